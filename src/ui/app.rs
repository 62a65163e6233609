//! The window: menus, status bar and the panes, drawn from one read of the shared monitor.

use egui::{Color32, RichText, Ui};
use serde::{Deserialize, Serialize};

use super::graph::{GraphCache, Window};
use super::processes::{SortColumn, TableState};
use super::{overview, process_detail, processes, widgets, Backend};
use crate::format::{self, Units};
use crate::history::ProcSeriesKey;
use crate::model::UnixMs;
use crate::monitor::{Monitor, SourceStatus};
use crate::sampler::now_ms;

/// UI choices that survive a restart (eframe persistence; not the settings file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UiState {
    /// MiB / GiB / automatic.
    pub units: Units,
    /// Graph time window.
    pub window: Window,
    /// Stack the graph by process.
    pub stacked: bool,
    /// Table sort column.
    pub sort: SortColumn,
    /// Sort descending.
    pub sort_desc: bool,
}

impl Default for UiState {
    fn default() -> Self {
        Self {
            units: Units::Auto,
            window: Window::TenMinutes,
            stacked: true,
            sort: SortColumn::Memory,
            sort_desc: true,
        }
    }
}

const FILTER_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::F);

/// The eframe application.
pub struct VramApp {
    backend: Backend,
    /// Persisted UI choices.
    pub state: UiState,
    /// GPU whose graph is shown.
    pub selected_gpu: u32,
    /// Process whose detail pane is open.
    pub selected: Option<ProcSeriesKey>,
    /// Process-table filter text.
    pub filter: String,
    focus_filter: bool,
    graph: GraphCache,
    detail_graph: GraphCache,
    fixed_now: Option<UnixMs>,
}

impl VramApp {
    /// The app for a real window, restoring persisted UI state.
    pub fn new(cc: &eframe::CreationContext<'_>, backend: Backend) -> Self {
        let state = cc
            .storage
            .and_then(|s| eframe::get_value::<UiState>(s, eframe::APP_KEY))
            .unwrap_or_default();
        Self::with_backend(backend, state)
    }

    /// The app over `backend` with the given UI state (tests, benchmarks).
    pub fn with_backend(backend: Backend, state: UiState) -> Self {
        Self {
            backend,
            state,
            selected_gpu: 0,
            selected: None,
            filter: String::new(),
            focus_filter: false,
            graph: GraphCache::default(),
            detail_graph: GraphCache::default(),
            fixed_now: None,
        }
    }

    /// Freezes the app's clock (tests and benchmarks: no wall-clock dependence).
    pub fn with_fixed_now(mut self, now: UnixMs) -> Self {
        self.fixed_now = Some(now);
        self
    }

    /// Forgets the decimated graph lines, as new data does (benchmarks).
    pub fn invalidate_caches(&mut self) {
        self.graph.invalidate();
        self.detail_graph.invalidate();
    }

    fn now(&self) -> UnixMs {
        self.fixed_now.unwrap_or_else(now_ms)
    }

    /// Draws one frame into `ui` (the root of the window).
    pub fn draw(&mut self, ui: &mut Ui) {
        let now = self.now();
        let shared = self.backend.shared.clone();
        let Ok(monitor) = shared.read() else {
            ui.label("internal error: the monitor lock is poisoned");
            return;
        };
        if ui.input_mut(|i| i.consume_shortcut(&FILTER_SHORTCUT)) {
            self.focus_filter = true;
        }
        if ui.input(|i| i.key_pressed(egui::Key::Escape)) {
            self.selected = None;
        }
        let mut start_demo = false;
        let mut retry = false;
        egui::Panel::top("menu").show(ui, |ui| {
            egui::MenuBar::new().ui(ui, |ui| {
                ui.menu_button("File", |ui| {
                    if ui.button("Quit").clicked() {
                        ui.send_viewport_cmd(egui::ViewportCommand::Close);
                    }
                });
                ui.menu_button("View", |ui| {
                    ui.label("Units");
                    for u in Units::ALL {
                        ui.radio_value(&mut self.state.units, u, u.label());
                    }
                    ui.separator();
                    ui.checkbox(&mut self.state.stacked, "Stack graph by process");
                });
                ui.menu_button("Source", |ui| {
                    if ui.button("Simulated GPUs (demo)").clicked() {
                        start_demo = true;
                        ui.close();
                    }
                    if ui.button("NVIDIA driver (NVML)").clicked() {
                        retry = true;
                        ui.close();
                    }
                });
                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                    for u in Units::ALL.iter().rev() {
                        ui.selectable_value(&mut self.state.units, *u, u.label());
                    }
                    ui.label("Units:");
                    if self.backend.demo {
                        ui.label(RichText::new("DEMO · simulated GPUs").color(Color32::from_rgb(230, 170, 40)).strong());
                    }
                });
            });
        });
        egui::Panel::bottom("status").show(ui, |ui| status_bar(ui, &monitor, now));

        let has_devices = monitor.latest.as_ref().is_some_and(|s| !s.devices.is_empty());
        if !has_devices {
            egui::CentralPanel::default().show(ui, |ui| {
                empty_state(ui, &monitor, &mut start_demo, &mut retry);
            });
        } else {
            let n_devices = monitor.latest.as_ref().map_or(0, |s| s.devices.len()) as u32;
            if self.selected_gpu >= n_devices {
                self.selected_gpu = 0;
            }
            egui::Panel::left("gpus")
                .resizable(true)
                .default_size(340.0)
                .min_size(260.0)
                .show(ui, |ui| {
                    egui::ScrollArea::vertical().show(ui, |ui| {
                        overview::cards(ui, &monitor, self.state.units, &mut self.selected_gpu);
                    });
                });
            let selected_row = self.selected.and_then(|k| monitor.row(&k));
            if self.selected.is_some() && selected_row.is_none() {
                self.selected = None;
            }
            if let Some(row) = selected_row {
                let mut open = true;
                egui::Panel::right("detail")
                    .resizable(true)
                    .default_size(420.0)
                    .min_size(300.0)
                    .show(ui, |ui| {
                        open = process_detail::pane(ui, &monitor, row, self.state.units, now, &mut self.detail_graph);
                    });
                if !open {
                    self.selected = None;
                }
            }
            egui::CentralPanel::default().show(ui, |ui| {
                let h = (ui.available_height() * 0.5).max(220.0);
                ui.allocate_ui(egui::vec2(ui.available_width(), h), |ui| {
                    super::graph::device_graph(ui, &monitor, self.selected_gpu, &mut self.state, &mut self.graph, now);
                });
                ui.separator();
                let mut table = TableState {
                    units: self.state.units,
                    sort: &mut self.state.sort,
                    desc: &mut self.state.sort_desc,
                    filter: &mut self.filter,
                    focus_filter: &mut self.focus_filter,
                    selected: &mut self.selected,
                };
                processes::table(ui, &monitor, &mut table, now);
            });
        }
        drop(monitor);
        if start_demo {
            self.backend.restart(crate::cli::source_factory(true), true);
            self.selected = None;
        } else if retry {
            self.backend.restart(crate::cli::source_factory(false), false);
            self.selected = None;
        }
        ui.request_repaint_after(std::time::Duration::from_millis(1000));
    }
}

fn status_bar(ui: &mut Ui, m: &Monitor, now: UnixMs) {
    ui.horizontal(|ui| {
        let src = m.source.as_ref();
        match src {
            Some(s) => {
                ui.label(format!("Source: {}", s.kind));
                ui.separator();
                ui.label(format!("Driver {}", s.driver_version.as_deref().unwrap_or("—")));
                if let Some(v) = &s.nvml_version {
                    ui.label(format!("NVML {v}"));
                }
                if let Some(v) = &s.cuda_version {
                    ui.label(format!("CUDA {v}"));
                }
                ui.separator();
                ui.label(format!("Host {}", s.host));
            }
            None => {
                ui.label("Source: —");
            }
        }
        ui.separator();
        ui.label(format!("Sampling every {}", format::duration(m.interval_ms as i64).replace("0s", "<1s")));
        ui.separator();
        if m.is_stale(now) {
            let age = m.latest_received_ms.map_or(0, |t| now - t);
            ui.label(
                RichText::new(format!("STALE: no sample for {}", format::duration(age)))
                    .color(widgets::WARN)
                    .strong(),
            )
            .on_hover_text("The driver has not answered for 3 intervals. The window keeps working; data resumes when the driver answers.");
        } else if let Some(t) = m.latest_received_ms {
            ui.label(format!("Last sample {}", format::clock(t)));
        }
        if let Some(e) = &m.last_error {
            ui.separator();
            ui.label(RichText::new(e).color(widgets::WARN));
        }
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            let (a, b) = m.history.span().unwrap_or((now, now));
            ui.label(format!("History {} ({} samples)", format::duration(b - a), m.history.len()));
        });
    });
}

fn empty_state(ui: &mut Ui, m: &Monitor, start_demo: &mut bool, retry: &mut bool) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.25);
        match &m.status {
            SourceStatus::Failed(why) => {
                ui.heading(RichText::new("No NVIDIA GPU can be read").color(widgets::WARN));
                ui.add_space(8.0);
                ui.label(why.as_str());
                ui.add_space(16.0);
                ui.label("You can still explore vramwarden on simulated GPUs:");
                ui.add_space(8.0);
                if ui.button(RichText::new("Start the demo (simulated GPUs)").size(16.0)).clicked() {
                    *start_demo = true;
                }
                ui.add_space(4.0);
                if ui.button("Retry the NVIDIA driver").clicked() {
                    *retry = true;
                }
            }
            SourceStatus::Starting => {
                ui.heading("Opening the GPU driver…");
            }
            SourceStatus::Running => {
                ui.heading("No GPUs found");
                ui.label("The driver answered but lists no devices.");
                if ui.button("Start the demo (simulated GPUs)").clicked() {
                    *start_demo = true;
                }
            }
        }
    });
}

impl eframe::App for VramApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        self.draw(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        eframe::set_value(storage, eframe::APP_KEY, &self.state);
    }
}
