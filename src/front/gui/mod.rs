//! The egui front end. It reads the shared [`crate::engine::view::Monitor`] and never calls NVML,
//! touches session files or signals processes itself.

pub(crate) mod action_status;
pub mod alert_words;
pub mod app;
pub(crate) mod backend;
pub mod connect;
pub(crate) mod fit_zoom;
pub mod graph;
pub(crate) mod guard_pane;
pub(crate) mod leaks;
pub mod notices;
pub(crate) mod notify;
pub(crate) mod overview;
pub(crate) mod plot_table;
pub(crate) mod process_detail;
pub mod processes;
pub(crate) mod replies;
pub mod sessions;
pub mod settings_window;
pub(crate) mod settings_words;
pub(crate) mod status_bar;
pub(crate) mod tabs;
pub(crate) mod task;
pub(crate) mod torch_pane;
pub(crate) mod ui_command;
pub mod ui_state;
pub mod widgets;

use std::sync::Arc;
use std::time::Duration;

pub use app::VramApp;
pub use backend::{Backend, NEW_DATA_FRAME, NO_ENGINE};

use crate::engine::view::Monitor;

/// What the window is started with.
#[derive(Debug)]
pub struct GuiOptions {
    /// The GPUs to sample (unless `connect` is given).
    pub source: crate::source::SourceKind,
    /// Sampling interval.
    pub interval: Duration,
    /// History length in samples.
    pub history_ticks: usize,
    /// Record a session log while the window runs.
    pub record: bool,
    /// A session log to open at start.
    pub open: Option<std::path::PathBuf>,
    /// The settings file.
    pub config_path: std::path::PathBuf,
    /// Why the settings file could not be used (the app then runs on defaults).
    pub config_error: Option<crate::engine::settings::ConfigError>,
    /// The settings in force.
    pub settings: crate::engine::settings::Settings,
    /// `--connect`: the agent to attach to from the start, opened already
    /// ([`open_connect`]); this computer's GPUs are not sampled then.
    pub connect: Option<(connect::SavedHost, crate::link::open::OpenedHost)>,
}

/// Opens `--connect`'s target before the window exists: reads the token from `token_file`
/// and, for `ssh://`, starts the tunnel (stopped when the window closes).
///
/// # Errors
/// A sentence: the token file unreadable or empty, ssh not runnable.
pub fn open_connect(
    target: &crate::link::open::ConnectTarget,
    token_file: &std::path::Path,
) -> Result<(connect::SavedHost, crate::link::open::OpenedHost), String> {
    let host = connect::SavedHost {
        url: target.url.clone(),
        ssh: target.ssh.clone(),
        token_file: token_file.display().to_string(),
    };
    let opened = crate::link::open::open_host(&host.url, &host.ssh, &host.token_file, "")?;
    Ok((host, opened))
}

/// Opens the window and runs until it is closed.
///
/// # Errors
/// When no window can be created (no display, no usable graphics).
pub fn run(mut opts: GuiOptions) -> Result<(), eframe::Error> {
    let native = native_options();
    // The tunnel of `--connect` goes to the window's backend (which stops it when the window
    // closes); if the window never opens, it is stopped here.
    let mut connect = opts.connect.take();
    let tunnel = Arc::new(std::sync::Mutex::new(
        connect.as_mut().and_then(|(_, o)| o.tunnel.take()),
    ));
    let held = tunnel.clone();
    let result = eframe::run_native(
        "vramwarden",
        native,
        Box::new(move |cc| {
            // The host of `--connect` joins the saved hosts, as one connected from the window.
            let attached = connect.as_ref().map(|(host, _)| host.clone());
            let backend = window_backend(cc, &opts, connect, &held)?;
            let mut app = VramApp::new(cc, backend);
            if let Some(host) = attached {
                app.remember_host(host);
            }
            app.set_config(opts.config_path.clone(), opts.config_error.clone());
            if let Some(p) = opts.open {
                app.open_session(p);
            }
            Ok(Box::new(app))
        }),
    );
    crate::link::open::stop_tunnel(tunnel.lock().ok().and_then(|mut t| t.take()));
    result
}

/// The window's viewport (title, app id, size, icon), where its state is kept, and its wgpu
/// set-up.
fn native_options() -> eframe::NativeOptions {
    let mut viewport = egui::ViewportBuilder::default()
        .with_title("vramwarden")
        .with_app_id("io.github.vramwarden.VramWarden")
        .with_inner_size([1400.0, 860.0])
        .with_min_inner_size(fit_zoom::MIN_POINTS);
    if let Ok(icon) =
        eframe::icon_data::from_png_bytes(include_bytes!("../../../assets/icon-256.png"))
    {
        viewport = viewport.with_icon(icon);
    }
    eframe::NativeOptions {
        viewport,
        // With VRAMWARDEN_DATA_DIR set (tests, a second profile), the window's state lives
        // there too, not in the platform folder.
        persistence_path: std::env::var_os("VRAMWARDEN_DATA_DIR")
            .map(|d| std::path::PathBuf::from(d).join("window-state.ron")),
        wgpu_options: wgpu_options(),
        ..Default::default()
    }
}

/// The window's backend: attached to `--connect`'s agent (its tunnel taken from `held`),
/// else an engine of its own sampling `opts.source` (recording when asked).
fn window_backend(
    cc: &eframe::CreationContext<'_>,
    opts: &GuiOptions,
    connect: Option<(connect::SavedHost, crate::link::open::OpenedHost)>,
    held: &std::sync::Mutex<Option<crate::link::open::Tunnel>>,
) -> Result<Backend, String> {
    let record = if opts.record {
        crate::engine::RecordTo::Dir(crate::session::default_dir())
    } else {
        crate::engine::RecordTo::Off
    };
    Ok(match connect {
        Some((host, mut opened)) => {
            opened.tunnel = held.lock().ok().and_then(|mut t| t.take());
            let mut b = Backend::detached(
                Monitor::new(opts.interval.as_millis() as u64, opts.history_ticks),
                crate::source::SourceKind::Nvml,
            );
            b.repaint = Some(cc.egui_ctx.clone());
            b.jobs = crate::link::jobs::JobBoard::new(task::repaint(&cc.egui_ctx));
            b.settings = opts.settings.clone();
            b.attach_opened(&host, opened)?;
            b
        }
        None => Backend::start_with(
            opts.source.factory(),
            opts.source,
            opts.interval,
            opts.history_ticks,
            &cc.egui_ctx,
            record,
            opts.settings.clone(),
        ),
    })
}

/// eframe's wgpu set-up without wgpu's validation of indirect draws: egui makes none, and the
/// check needs compute shaders, which the NVIDIA driver's OpenGL 3.3 (through EGL) lacks. With
/// it on, a machine with the driver's OpenGL and no Vulkan loader could not open the window
/// (wgpu: "Parent device is lost"); without it the window draws there (measured on an H100 and
/// an H200, driver 580, `examples/window_frames` with `WGPU_BACKEND=gl`).
/// `WGPU_VALIDATION_INDIRECT_CALL=1` turns it back on.
fn wgpu_options() -> eframe::egui_wgpu::WgpuConfiguration {
    let mut c = eframe::egui_wgpu::WgpuConfiguration::default();
    if let eframe::egui_wgpu::WgpuSetup::CreateNew(s) = &mut c.wgpu_setup {
        if std::env::var_os("WGPU_VALIDATION_INDIRECT_CALL").is_none() {
            s.instance_descriptor
                .flags
                .remove(eframe::wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    /// The window's wgpu instance is made without indirect-draw validation (see
    /// `wgpu_options`: with it, NVIDIA's OpenGL could not give the window a device).
    #[test]
    fn the_window_asks_wgpu_for_no_indirect_draw_validation() {
        let c = super::wgpu_options();
        let eframe::egui_wgpu::WgpuSetup::CreateNew(s) = c.wgpu_setup else {
            panic!("eframe's default set-up creates its own instance");
        };
        assert!(!s
            .instance_descriptor
            .flags
            .contains(eframe::wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL));
    }
}
