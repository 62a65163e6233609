//! The egui front end. It reads the shared [`crate::monitor::Monitor`] and never calls NVML,
//! touches session files or signals processes itself.

pub mod app;
pub mod graph;
pub mod leaks;
pub mod overview;
pub mod process_detail;
pub mod processes;
pub mod sessions;
pub mod settings_window;
pub mod task;
pub mod torch_pane;
pub mod widgets;

use std::sync::{Arc, RwLock};
use std::time::Duration;

pub use app::VramApp;

use crate::monitor::Monitor;
use crate::sampler::{SamplerHandle, SharedMonitor, SourceFactory};

/// What the window is started with.
#[derive(Debug, Clone)]
pub struct GuiOptions {
    /// Start on the simulated GPUs.
    pub demo: bool,
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
    pub config_error: Option<crate::settings::ConfigError>,
    /// The settings in force.
    pub settings: crate::settings::Settings,
}

/// The sampler behind the window: can be restarted on another source (e.g. the demo).
pub struct Backend {
    /// The state the UI draws.
    pub shared: SharedMonitor,
    handle: Option<SamplerHandle>,
    /// Whether the simulated GPUs are shown.
    pub demo: bool,
    interval: Duration,
    history_ticks: usize,
    repaint: Option<egui::Context>,
    record: crate::engine::RecordTo,
    /// The settings the engine runs with.
    pub settings: crate::settings::Settings,
}

impl Backend {
    /// A backend that samples `factory` on its own thread.
    pub fn start(
        factory: SourceFactory,
        demo: bool,
        interval: Duration,
        history_ticks: usize,
        ctx: &egui::Context,
    ) -> Self {
        Self::start_with(
            factory,
            demo,
            interval,
            history_ticks,
            ctx,
            crate::engine::RecordTo::Off,
            crate::settings::Settings::default(),
        )
    }

    /// Like [`Backend::start`], recording a session log as `record` says, with these settings
    /// for the engine.
    #[allow(clippy::too_many_arguments)]
    pub fn start_with(
        factory: SourceFactory,
        demo: bool,
        interval: Duration,
        history_ticks: usize,
        ctx: &egui::Context,
        record: crate::engine::RecordTo,
        settings: crate::settings::Settings,
    ) -> Self {
        let mut b = Self::detached(
            Monitor::new(interval.as_millis() as u64, history_ticks),
            demo,
        );
        b.settings = settings;
        b.interval = interval;
        b.history_ticks = history_ticks;
        b.repaint = Some(ctx.clone());
        b.record = record;
        b.spawn(factory);
        b
    }

    /// A backend over a monitor that something else fills (tests, replays): no thread.
    pub fn detached(monitor: Monitor, demo: bool) -> Self {
        let interval = Duration::from_millis(monitor.interval_ms);
        let history_ticks = monitor.history.capacity();
        Self {
            shared: Arc::new(RwLock::new(monitor)),
            handle: None,
            demo,
            interval,
            history_ticks,
            repaint: None,
            record: crate::engine::RecordTo::Off,
            settings: crate::settings::Settings::default(),
        }
    }

    fn spawn(&mut self, factory: SourceFactory) {
        let ctx = self.repaint.clone();
        let notify: crate::sampler::Notify = Arc::new(move || {
            if let Some(c) = &ctx {
                c.request_repaint();
            }
        });
        match SamplerHandle::spawn_recording(
            factory,
            self.interval,
            self.shared.clone(),
            notify,
            self.record.clone(),
            self.settings.clone(),
            crate::engine::EngineOptions {
                desktop_notifications: true,
                // The engine keeps the sessions folder within the retention limits (at start
                // and every hour), never deleting a log that is open for writing.
                retention_dir: match &self.record {
                    crate::engine::RecordTo::Dir(d) => Some(d.clone()),
                    _ => None,
                },
            },
        ) {
            Ok(h) => self.handle = Some(h),
            Err(e) => {
                if let Ok(mut m) = self.shared.write() {
                    m.status = crate::monitor::SourceStatus::Failed(format!(
                        "could not start the sampler thread: {e}"
                    ));
                }
            }
        }
    }

    /// Applies new settings to the running engine (and to later restarts).
    pub fn apply_settings(&mut self, s: crate::settings::Settings) {
        self.settings = s.clone();
        self.send(crate::engine::EngineCommand::ApplySettings(Box::new(s)));
    }

    /// Sends a request to the engine on the sampler thread.
    pub fn send(&self, c: crate::engine::EngineCommand) {
        if let Some(h) = &self.handle {
            h.send(c);
        }
    }

    /// Drops the current source and its history and starts over on `factory`.
    pub fn restart(&mut self, factory: SourceFactory, demo: bool) {
        self.handle = None;
        self.shared = Arc::new(RwLock::new(Monitor::new(
            self.interval.as_millis() as u64,
            self.history_ticks,
        )));
        self.demo = demo;
        self.spawn(factory);
    }
}

/// Opens the window and runs until it is closed.
///
/// # Errors
/// When no window can be created (no display, no usable graphics).
pub fn run(opts: GuiOptions) -> Result<(), eframe::Error> {
    let mut viewport = egui::ViewportBuilder::default()
        .with_title("vramwarden")
        .with_app_id("io.github.vramwarden.VramWarden")
        .with_inner_size([1400.0, 860.0])
        .with_min_inner_size([800.0, 500.0]);
    if let Ok(icon) = eframe::icon_data::from_png_bytes(include_bytes!("../../assets/icon-256.png"))
    {
        viewport = viewport.with_icon(icon);
    }
    let native = eframe::NativeOptions {
        viewport,
        // With VRAMWARDEN_DATA_DIR set (tests, a second profile), the window's state lives
        // there too, not in the platform folder.
        persistence_path: std::env::var_os("VRAMWARDEN_DATA_DIR")
            .map(|d| std::path::PathBuf::from(d).join("window-state.ron")),
        ..Default::default()
    };
    eframe::run_native(
        "vramwarden",
        native,
        Box::new(move |cc| {
            let record = if opts.record {
                crate::engine::RecordTo::Dir(crate::session::default_dir())
            } else {
                crate::engine::RecordTo::Off
            };
            let backend = Backend::start_with(
                crate::cli::source_factory(opts.demo),
                opts.demo,
                opts.interval,
                opts.history_ticks,
                &cc.egui_ctx,
                record,
                opts.settings.clone(),
            );
            let mut app = VramApp::new(cc, backend);
            app.set_config(opts.config_path.clone(), opts.config_error.clone());
            if let Some(p) = opts.open {
                app.open_session(p, &cc.egui_ctx);
            }
            Ok(Box::new(app))
        }),
    )
}
