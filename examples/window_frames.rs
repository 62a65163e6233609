//! The window's frames on a live source, drawn through wgpu on a chosen adapter: the figures
//! of docs/benchmarks.md on the window's CPU per frame with a GPU and with a software
//! rasterizer.
//!
//! The window is the app itself (egui_kittest drives its frames) on the simulated GPUs,
//! sampled once a second by a real engine thread, as `vramwarden --demo` runs. After each
//! sample it draws one frame, as the window does, and paints it with egui's wgpu renderer
//! into an offscreen target of the window's size: the same tessellation, buffer uploads and
//! render pass as on screen, without the swap chain (no display is needed). The adapter is
//! the first of the asked kind that wgpu finds: `gpu` (a discrete or integrated GPU, through
//! Vulkan or OpenGL) or `cpu` (Mesa's lavapipe).
//!
//! ```text
//! cargo run --release --example window_frames -- gpu 60      # 60 samples at 1280 × 800
//! cargo run --release --example window_frames -- cpu 60 2    # the same at 200 %
//! cargo run --release --example window_frames -- cpu 60 1 blank  # frames only cleared
//! ```
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eframe::egui_wgpu::{self, wgpu};
use vramwarden::front::gui::app::UiState;
use vramwarden::front::gui::{Backend, VramApp};
use vramwarden::source::sim::SimSource;
use vramwarden::source::{GpuSource, SourceKind};

#[path = "../benches/support/coverage.rs"]
mod coverage;
use coverage::coverage;

/// The window's size in points.
const SIZE: [f32; 2] = [1280.0, 800.0];

/// Samples taken before the frames are counted (the demo's start, fonts, first textures).
const WARMUP: u64 = 5;

/// One paint: this thread's CPU and the wall time, µs; the triangles and the pixels they
/// cover.
#[derive(Clone, Copy)]
struct Paint {
    cpu_us: f64,
    wall_us: f64,
    triangles: usize,
    pixels: f64,
}

/// The paints so far (shared with `main`).
type Paints = Arc<Mutex<Vec<Paint>>>;

/// Paints each frame into one kept texture of the window's size; no read-back.
struct Offscreen {
    state: egui_wgpu::RenderState,
    target: Option<(wgpu::Texture, wgpu::TextureView)>,
    /// Each paint.
    paints: Paints,
    /// Paint nothing but the clear (the rasterizer's cost of a frame apart from its pixels).
    blank: bool,
}

impl Offscreen {
    fn view(&mut self, size: [u32; 2]) -> wgpu::TextureView {
        if let Some((t, v)) = &self.target {
            if [t.width(), t.height()] == size {
                return v.clone();
            }
        }
        let texture = self.state.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("window_frames target"),
            size: wgpu::Extent3d {
                width: size[0],
                height: size[1],
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: self.state.target_format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
            view_formats: &[],
        });
        let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        self.target = Some((texture, view.clone()));
        view
    }

    fn paint(&mut self, ctx: &egui::Context, output: &egui::FullOutput) -> Result<(), String> {
        let (cpu0, wall0) = (thread_cpu_us(), Instant::now());
        let ppp = ctx.pixels_per_point();
        let size = ctx.content_rect().size() * ppp;
        let screen = egui_wgpu::ScreenDescriptor {
            pixels_per_point: ppp,
            size_in_pixels: [size.x.round() as u32, size.y.round() as u32],
        };
        let view = self.view(screen.size_in_pixels);
        let [r, g, b, a] = ctx
            .global_style()
            .visuals
            .panel_fill
            .to_normalized_gamma_f32();
        let clear = wgpu::Color {
            r: r.into(),
            g: g.into(),
            b: b.into(),
            a: a.into(),
        };
        let device = &self.state.device;
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("window_frames"),
        });
        let meshes = if self.blank {
            Vec::new()
        } else {
            ctx.tessellate(output.shapes.clone(), ppp)
        };
        let mut renderer = self.state.renderer.write();
        let user =
            renderer.update_buffers(device, &self.state.queue, &mut encoder, &meshes, &screen);
        {
            let mut pass = encoder
                .begin_render_pass(&wgpu::RenderPassDescriptor {
                    label: Some("window_frames pass"),
                    color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                        view: &view,
                        resolve_target: None,
                        ops: wgpu::Operations {
                            // The app's clear colour (the panels' colour) as eframe clears.
                            load: wgpu::LoadOp::Clear(clear),
                            store: wgpu::StoreOp::Store,
                        },
                        depth_slice: None,
                    })],
                    ..Default::default()
                })
                .forget_lifetime();
            renderer.render(&mut pass, &meshes, &screen);
        }
        drop(renderer);
        self.state
            .queue
            .submit(user.into_iter().chain(std::iter::once(encoder.finish())));
        // A window waits for the frame before it shows it; so does this.
        device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(Duration::from_secs(10)),
            })
            .map_err(|e| format!("the GPU did not finish the frame: {e}"))?;
        let (cpu_us, wall_us) = (thread_cpu_us() - cpu0, wall0.elapsed().as_secs_f64() * 1e6);
        let (triangles, pixels) = coverage(&meshes, ppp);
        if let Ok(mut p) = self.paints.lock() {
            p.push(Paint {
                cpu_us,
                wall_us,
                triangles,
                pixels,
            });
        }
        Ok(())
    }
}

impl egui_kittest::TestRenderer for Offscreen {
    fn setup_eframe(&self, cc: &mut eframe::CreationContext<'_>, frame: &mut eframe::Frame) {
        cc.wgpu_render_state = Some(self.state.clone());
        frame.wgpu_render_state = Some(self.state.clone());
    }

    fn handle_delta(&mut self, delta: &mut egui::TexturesDelta) {
        let mut renderer = self.state.renderer.write();
        for (id, images) in std::mem::take(&mut delta.set) {
            for image in images {
                renderer.update_texture(&self.state.device, &self.state.queue, id, &image);
            }
        }
        for id in std::mem::take(&mut delta.free) {
            renderer.free_texture(&id);
        }
    }

    fn render(
        &mut self,
        ctx: &egui::Context,
        output: &egui::FullOutput,
    ) -> Result<image::RgbaImage, String> {
        self.paint(ctx, output)?;
        Ok(image::RgbaImage::new(1, 1))
    }
}

/// CPU time of `clock` (this thread's or the whole process's), µs.
fn cpu_us(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// This thread's CPU time, µs.
fn thread_cpu_us() -> f64 {
    cpu_us(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The whole process's CPU time (all threads: the engine's, the driver's), µs.
fn process_cpu_us() -> f64 {
    cpu_us(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// A wgpu set-up that takes the first adapter of the asked kind.
fn setup(want_cpu: bool) -> egui_wgpu::WgpuSetup {
    let mut s = egui_wgpu::WgpuSetupCreateNew::without_display_handle();
    // As the window's own set-up (`front::gui::wgpu_options`): no indirect-draw validation,
    // which NVIDIA's OpenGL cannot run.
    if std::env::var_os("WGPU_VALIDATION_INDIRECT_CALL").is_none() {
        s.instance_descriptor
            .flags
            .remove(wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL);
    }
    s.native_adapter_selector = Some(Arc::new(move |adapters, _surface| {
        adapters
            .iter()
            .find(|a| (a.get_info().device_type == wgpu::DeviceType::Cpu) == want_cpu)
            .cloned()
            .ok_or_else(|| {
                let found: Vec<String> = adapters
                    .iter()
                    .map(|a| format!("{:?}", a.get_info()))
                    .collect();
                format!("no adapter of that kind; wgpu found: {found:?}")
            })
    }));
    egui_wgpu::WgpuSetup::CreateNew(s)
}

fn render_state(want_cpu: bool) -> Result<egui_wgpu::RenderState, String> {
    let setup = setup(want_cpu);
    let instance = pollster::block_on(setup.new_instance());
    let config = egui_wgpu::WgpuConfiguration {
        wgpu_setup: setup,
        ..Default::default()
    };
    pollster::block_on(egui_wgpu::RenderState::create(
        &config,
        &instance,
        None,
        egui_wgpu::RendererOptions::default(),
    ))
    .map_err(|e| format!("no wgpu device: {e}"))
}

/// Mean, median and 95th percentile of `v`.
fn spread(mut v: Vec<f64>) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    format!(
        "mean {:.2} ms, median {:.2} ms, p95 {:.2} ms",
        mean / 1e3,
        at(0.5) / 1e3,
        at(0.95) / 1e3
    )
}

/// What the command line asks for.
struct Args {
    want_cpu: bool,
    samples: u64,
    ppp: f32,
    /// Hand the renderer nothing: each frame is only cleared (the rasterizer's fixed cost).
    blank: bool,
}

fn args() -> Result<Args, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: window_frames gpu|cpu [SAMPLES] [PIXELS_PER_POINT] [blank]";
    let want_cpu = match args.first().map(String::as_str) {
        Some("gpu") => false,
        Some("cpu") => true,
        _ => return Err(usage.into()),
    };
    let number = |i: usize, default: f64| {
        args.get(i)
            .map_or(Ok(default), |s| s.parse::<f64>())
            .map_err(|e| format!("{usage}: {e}"))
    };
    Ok(Args {
        want_cpu,
        samples: number(1, 60.0)?.max(1.0) as u64,
        ppp: number(2, 1.0)? as f32,
        blank: args.get(3).is_some_and(|a| a == "blank"),
    })
}

/// The window on the demo (its engine sampling once a second), painted by `renderer`.
fn window(
    renderer: Offscreen,
    ppp: f32,
) -> (
    egui_kittest::Harness<'static, VramApp>,
    vramwarden::engine::shared::SharedMonitor,
) {
    let backend = Backend::start(
        Box::new(|| {
            Ok(Box::new(SimSource::demo(vramwarden::model::now_ms())) as Box<dyn GpuSource>)
        }),
        SourceKind::demo(),
        Duration::from_secs(1),
        86_400,
        &egui::Context::default(),
    );
    let shared = backend.shared().clone();
    let app = VramApp::with_backend(backend, UiState::default());
    let h = egui_kittest::Harness::builder()
        .with_size(egui::vec2(SIZE[0], SIZE[1]))
        .with_pixels_per_point(ppp)
        .renderer(renderer)
        .build_eframe(|_cc| app);
    (h, shared)
}

/// What the counted frames cost: each one's UI pass (µs), the process's CPU (µs) and the
/// wall time (s) over them.
struct Counted {
    ui_us: Vec<f64>,
    cpu_us: f64,
    secs: f64,
}

/// Draws and paints one frame after each of `samples` samples (after [`WARMUP`] more).
fn frames(
    h: &mut egui_kittest::Harness<'static, VramApp>,
    shared: &vramwarden::engine::shared::SharedMonitor,
    paints: &Paints,
    samples: u64,
) -> Result<Counted, String> {
    let ticks = || shared.read().map(|m| m.ticks).unwrap_or(0);
    let (mut seen, mut ui_us, mut warm) = (0, Vec::new(), false);
    let (mut cpu0, mut wall0) = (process_cpu_us(), Instant::now());
    while (ui_us.len() as u64) < samples {
        // The window draws when a sample comes (the engine asks it to); so does this.
        let t = Instant::now();
        while ticks() == seen {
            if t.elapsed() > Duration::from_secs(10) {
                return Err("the engine gave no sample in 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        seen = ticks();
        let c = thread_cpu_us();
        h.step();
        let ui = thread_cpu_us() - c;
        h.render()?;
        if warm {
            ui_us.push(ui);
        } else if seen >= WARMUP {
            warm = true;
            (cpu0, wall0) = (process_cpu_us(), Instant::now());
            paints.lock().map_err(|e| e.to_string())?.clear();
        }
    }
    Ok(Counted {
        ui_us,
        cpu_us: process_cpu_us() - cpu0,
        secs: wall0.elapsed().as_secs_f64(),
    })
}

fn report(c: Counted, paints: &[Paint], ppp: f32) {
    let n = c.ui_us.len();
    println!(
        "{n} frames, one a sample, at {}×{} points, {ppp} pixels per point",
        SIZE[0], SIZE[1]
    );
    println!("UI pass (this thread's CPU): {}", spread(c.ui_us));
    let mean =
        |f: fn(&Paint) -> f64| paints.iter().map(f).sum::<f64>() / paints.len().max(1) as f64;
    println!(
        "paint, CPU (tessellate, upload, encode, submit, wait): {}",
        spread(paints.iter().map(|p| p.cpu_us).collect())
    );
    println!(
        "paint, wall: {}",
        spread(paints.iter().map(|p| p.wall_us).collect())
    );
    println!(
        "a frame's triangles: {:.0}, the pixels they cover (overlaps counted each time): {:.2} M",
        mean(|p| p.triangles as f64),
        mean(|p| p.pixels) / 1e6
    );
    println!(
        "the process (all threads, the engine's included): {:.1} ms of CPU per second, {:.2} ms per frame",
        c.cpu_us / c.secs / 1e3,
        c.cpu_us / n.max(1) as f64 / 1e3
    );
}

fn main() -> Result<(), String> {
    // Warnings on stderr (RUST_LOG=wgpu_hal=debug says why an adapter or device failed).
    let _log = vramwarden::host::logging::init(
        vramwarden::host::logging::Mode::Headless,
        vramwarden::host::logging::Level::Normal,
    );
    let a = args()?;
    let state = render_state(a.want_cpu)?;
    let info = state.adapter.get_info();
    println!(
        "adapter: {} ({:?}, {:?}, driver {} {}), target {:?}",
        info.name,
        info.backend,
        info.device_type,
        info.driver,
        info.driver_info,
        state.target_format
    );
    let paints = Paints::default();
    let renderer = Offscreen {
        state,
        target: None,
        paints: paints.clone(),
        blank: a.blank,
    };
    let (mut h, shared) = window(renderer, a.ppp);
    let counted = frames(&mut h, &shared, &paints, a.samples)?;
    let paints = paints.lock().map_err(|e| e.to_string())?.clone();
    report(counted, &paints, a.ppp);
    Ok(())
}
