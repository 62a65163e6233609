//! What PyTorch's caching allocator says about a process whose `vramwarden_torch` companion
//! answers: the badge in the process table, and the detail pane's section (figures, a strip of
//! the allocator's memory, advice with its measured reason, and the actions that reach the
//! allocator from outside).

use egui::{Color32, CornerRadius, Rect, RichText, Sense, Stroke, StrokeKind, Ui};

use super::widgets;
use crate::engine::view::{Monitor, ProcessRow};
use crate::model::format::Units;
use crate::model::{TorchMem, UnixMs, MIB};

/// Releasable cache above which the pane advises releasing it (and at least this share of
/// reserved memory, see [`advice`]).
const RELEASE_ADVICE_BYTES: u64 = 1024 * MIB;
/// How long a process must hold memory without GPU activity before the pane calls it idle.
const IDLE_ADVICE_MS: UnixMs = 10 * 60_000;

/// The small "PyTorch" badge after a process's name, its figures on hover (in one unit, from
/// what the allocator holds, when `units` is Auto).
pub(crate) fn badge(ui: &mut Ui, t: &TorchMem, units: Units) {
    // One unit for all of this process's figures (Auto: from what the allocator holds).
    let units = units.for_largest(t.reserved_bytes);
    let color = widgets::torch_text(ui.visuals().dark_mode);
    let text = RichText::new("PyTorch").small().color(color);
    egui::Frame::new()
        .stroke(Stroke::new(1.0, color))
        .corner_radius(CornerRadius::same(3))
        .inner_margin(egui::Margin::symmetric(3, 0))
        .show(ui, |ui| ui.add(egui::Label::new(text).selectable(false)))
        .response
        .on_hover_text(format!(
            "vramwarden_torch answers in this process: {} in tensors, {} reserved by the \
             caching allocator, {} of cache that could be released",
            units.bytes(t.allocated_bytes),
            units.bytes(t.reserved_bytes),
            units.bytes(t.releasable_bytes()),
        ));
}

/// One hint from the memory playbook, with the measured reason for it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Advice {
    /// What to do.
    pub action: String,
    /// Why, in figures.
    pub reason: String,
}

/// The facts the hints are judged on, besides the allocator's figures.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Context {
    /// The GPU's used memory and size, bytes.
    pub gpu_used_total: Option<(u64, u64)>,
    /// The process's memory is rising (a flagged leak or a forecast to full).
    pub rising: bool,
    /// How long the process has been without GPU activity or memory change, ms.
    pub idle_ms: Option<UnixMs>,
}

/// The playbook's hints that apply to `t` (pure; the pane draws them).
fn advice(t: &TorchMem, cx: &Context, units: Units) -> Vec<Advice> {
    let mut out = Vec::new();
    let cache = t.releasable_bytes();
    if cache >= RELEASE_ADVICE_BYTES && cache >= t.reserved_bytes / 4 {
        out.push(Advice {
            action: "Release the cache (torch.cuda.empty_cache(), or the button above)".into(),
            reason: format!(
                "the allocator reserves {} but its tensors use {}: {} of cache other processes \
                 cannot use",
                units.bytes(t.reserved_bytes),
                units.bytes(t.allocated_bytes),
                units.bytes(cache)
            ),
        });
    }
    let split_heavy =
        t.inactive_split_bytes >= 256 * MIB && t.inactive_split_bytes >= t.reserved_bytes / 10;
    if (t.alloc_retries > 0 || split_heavy) && t.expandable_segments != Some(true) {
        let mut why = Vec::new();
        if t.alloc_retries > 0 {
            why.push(format!(
                "{} allocation(s) failed and were retried after flushing the cache",
                t.alloc_retries
            ));
        }
        if split_heavy {
            why.push(format!(
                "{} is free inside split blocks and cannot be released",
                units.bytes(t.inactive_split_bytes)
            ));
        }
        out.push(Advice {
            action: "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for the next run".into(),
            reason: why.join("; "),
        });
    }
    if let Some((used, total)) = cx.gpu_used_total.filter(|(_, t)| *t > 0) {
        let pct = used as f64 * 100.0 / total as f64;
        if pct >= 85.0 && cx.rising {
            out.push(Advice {
                action: "Use mixed precision (torch.autocast), gradient checkpointing or a \
                         smaller batch"
                    .into(),
                reason: format!("the GPU is {pct:.0} % full and this process is still growing"),
            });
        }
    }
    if let Some(idle) = cx.idle_ms.filter(|i| *i >= IDLE_ADVICE_MS) {
        out.push(Advice {
            action: "Release the cache, or end the process if it is done".into(),
            reason: format!(
                "no GPU activity for {} while holding {}",
                crate::model::format::duration(idle),
                units.bytes(t.reserved_bytes)
            ),
        });
    }
    out
}

/// The height of the allocator's strip (points).
const STRIP_HEIGHT: f32 = 16.0;

/// A strip of the memory the driver counts for the process, split the allocator's way:
/// tensors, free space in split blocks, releasable cache, and what lies outside the allocator
/// (the CUDA context, other libraries).
pub(crate) fn strip(ui: &mut Ui, t: &TorchMem, driver_bytes: Option<u64>, units: Units) {
    let (rect, resp) = ui.allocate_exact_size(
        egui::vec2(ui.available_width(), STRIP_HEIGHT),
        Sense::hover(),
    );
    let total = driver_bytes.unwrap_or(0).max(t.reserved_bytes).max(1);
    let split = t
        .inactive_split_bytes
        .min(t.reserved_bytes.saturating_sub(t.allocated_bytes));
    let free_cache = t.releasable_bytes().saturating_sub(split);
    let outside = total.saturating_sub(t.reserved_bytes);
    let parts: [(u64, Color32); 4] = [
        (t.allocated_bytes, widgets::TORCH_ALLOCATED),
        (split, widgets::TORCH_SPLIT),
        (free_cache, widgets::TORCH_CACHE),
        (outside, ui.visuals().weak_text_color().gamma_multiply(0.5)),
    ];
    paint_strip(ui, rect, &parts, total);
    let text = format!(
        "Tensors {} · free in split blocks {} · releasable cache {} · outside the allocator \
         (CUDA context, other libraries) {}",
        units.bytes(t.allocated_bytes),
        units.bytes(split),
        units.bytes(free_cache),
        units.bytes(outside)
    );
    // A name for screen readers (and tests): the same figures.
    let label = format!("PyTorch allocator: {text}");
    resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Meter, true, label.clone()));
    resp.on_hover_text(text);
    strip_legend(ui);
}

/// Paints the strip in `rect`: its background, each part (bytes, color) from the left as
/// its share of `total`, and its frame.
fn paint_strip(ui: &Ui, rect: Rect, parts: &[(u64, Color32)], total: u64) {
    let p = ui.painter();
    p.rect_filled(rect, CornerRadius::same(3), ui.visuals().extreme_bg_color);
    let mut x = rect.min.x;
    for &(bytes, color) in parts {
        let w = rect.width() * (bytes as f64 / total as f64) as f32;
        if w > 0.0 {
            p.rect_filled(
                Rect::from_min_size(egui::pos2(x, rect.min.y), egui::vec2(w, STRIP_HEIGHT)),
                CornerRadius::ZERO,
                color,
            );
        }
        x += w;
    }
    p.rect_stroke(
        rect,
        CornerRadius::same(3),
        Stroke::new(1.0, ui.visuals().widgets.noninteractive.bg_stroke.color),
        StrokeKind::Inside,
    );
}

/// The strip's legend: a color and a name for each of its parts.
fn strip_legend(ui: &mut Ui) {
    ui.horizontal_wrapped(|ui| {
        for (name, color) in [
            ("tensors", widgets::TORCH_ALLOCATED),
            ("split (fragmented)", widgets::TORCH_SPLIT),
            ("releasable cache", widgets::TORCH_CACHE),
            (
                "outside the allocator",
                ui.visuals().weak_text_color().gamma_multiply(0.5),
            ),
        ] {
            widgets::legend_item(ui, color, name, false);
        }
    });
}

/// The detail pane's PyTorch section, for a process whose companion answers, in the pane's
/// `units` (resolved once for the whole pane, see [`Units::for_largest`]). `request`
/// (absent for a recorded session or an exited process) receives the allocator actions the
/// user asks for (release the cache, limit the process's memory) as
/// [`super::ui_command::UiCommand::AskAction`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn section(
    ui: &mut Ui,
    m: &Monitor,
    row: &ProcessRow,
    t: &TorchMem,
    units: Units,
    now: UnixMs,
    rising: bool,
    request: Option<&mut Vec<super::ui_command::UiCommand>>,
) {
    ui.separator();
    ui.horizontal(|ui| {
        badge(ui, t, units);
        ui.label(RichText::new("PyTorch caching allocator").strong());
    });
    let gpu_gib = m
        .latest
        .as_ref()
        .and_then(|s| s.devices.iter().find(|d| d.index == row.device_index))
        .and_then(|d| d.memory_total_bytes)
        .map_or(crate::act::rules::model::MAX_LIMIT_GIB, |b| {
            (b as f64 / (1u64 << 30) as f64).floor()
        });
    if let Some(request) = request {
        actions(ui, row, t, units, gpu_gib, request);
    }
    figures(ui, t, units);
    strip(ui, t, row.used_bytes, units);
    tips(ui, m, row, t, units, (now, rising));
}

/// The allocator's actions: release the cache, and limit the process to a size in GiB (at
/// most `gpu_gib`); a click asks for the action through `request`.
fn actions(
    ui: &mut Ui,
    row: &ProcessRow,
    t: &TorchMem,
    units: Units,
    gpu_gib: f64,
    request: &mut Vec<super::ui_command::UiCommand>,
) {
    ui.horizontal_wrapped(|ui| {
        if ui
            .button("Release cached memory")
            .on_hover_text(format!(
                "torch.cuda.empty_cache() in the process, through its companion: up to {} go back to the driver; its tensors stay",
                units.bytes(t.releasable_bytes())
            ))
            .clicked()
        {
            request.push(super::ui_command::UiCommand::AskAction(
                row.series_key(),
                crate::act::rules::Action::ReleaseCache,
            ));
        }
        ui.separator();
        let gib = limit_gib(ui, row, t, gpu_gib);
        let b = ui.button("Set limit").on_hover_text(
            "A per-process memory fraction (torch.cuda.set_per_process_memory_fraction): the job gets its own out-of-memory error at this size instead of starving its neighbours",
        );
        if b.clicked() {
            request.push(super::ui_command::UiCommand::AskAction(
                row.series_key(),
                crate::act::rules::Action::LimitMemory { gib },
            ));
        }
    });
}

/// The "Limit to" field: GiB, 1 to `gpu_gib`, first the process's reserved memory rounded
/// up, kept while the pane shows the process; returns the value it holds.
fn limit_gib(ui: &mut Ui, row: &ProcessRow, t: &TorchMem, gpu_gib: f64) -> f64 {
    let id = egui::Id::unique(("torch-limit", row.key.pid, row.device_index));
    let mut gib: f64 = ui.data(|d| d.get_temp(id)).unwrap_or_else(|| {
        (t.reserved_bytes as f64 / (1u64 << 30) as f64)
            .ceil()
            .clamp(1.0, gpu_gib.max(1.0))
    });
    let label = ui.label("Limit to");
    let l = ui
        .add(
            egui::DragValue::new(&mut gib)
                .range(1.0..=gpu_gib.max(1.0))
                .speed(0.5)
                .suffix(" GiB"),
        )
        .labelled_by(label.id);
    if l.changed() {
        ui.data_mut(|d| d.insert_temp(id, gib));
    }
    gib
}

/// The allocator's figures, one a row: allocated, reserved, cache, split blocks, retries,
/// and (when there are) OOM errors, the memory fraction and expandable segments.
fn figures(ui: &mut Ui, t: &TorchMem, units: Units) {
    egui::Grid::new("torch-figures")
        .num_columns(2)
        .spacing([12.0, 4.0])
        .show(ui, |ui| {
            let kv = |ui: &mut Ui, k: &str, v: String| {
                ui.label(RichText::new(k).weak());
                ui.label(RichText::new(v).monospace());
                ui.end_row();
            };
            kv(ui, "Allocated (tensors)", units.bytes(t.allocated_bytes));
            kv(ui, "Reserved (allocator)", units.bytes(t.reserved_bytes));
            kv(
                ui,
                "Cache (releasable at most)",
                units.bytes(t.releasable_bytes()),
            );
            kv(
                ui,
                "Free in split blocks",
                units.bytes(t.inactive_split_bytes),
            );
            kv(ui, "Allocation retries", t.alloc_retries.to_string());
            if t.ooms > 0 {
                kv(ui, "Out-of-memory errors", t.ooms.to_string());
            }
            if let Some(f) = t.memory_fraction {
                kv(
                    ui,
                    "Memory fraction",
                    format!("{:.1} % of the GPU", f * 100.0),
                );
            }
            if let Some(e) = t.expandable_segments {
                kv(
                    ui,
                    "Expandable segments",
                    if e { "on" } else { "off" }.to_string(),
                );
            }
        });
}

/// The section's tips (see [`advice`]): for the GPU's fill, the process still `rising`,
/// and how long it has been idle at `now`.
fn tips(
    ui: &mut Ui,
    m: &Monitor,
    row: &ProcessRow,
    t: &TorchMem,
    units: Units,
    (now, rising): (UnixMs, bool),
) {
    let device = m
        .latest
        .as_ref()
        .and_then(|s| s.devices.iter().find(|d| d.index == row.device_index));
    let cx = Context {
        gpu_used_total: device.and_then(|d| Some((d.memory_used_bytes?, d.memory_total_bytes?))),
        rising,
        idle_ms: m
            .last_active
            .get(&row.series_key())
            .map(|t| now - *t)
            .filter(|_| row.exited_at_ms.is_none()),
    };
    for a in advice(t, &cx, units) {
        ui.add(
            egui::Label::new(
                RichText::new(format!("Tip: {} — {}.", a.action, a.reason))
                    .color(widgets::forecast_color(ui.visuals().dark_mode)),
            )
            .wrap(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(alloc_mib: u64, reserved_mib: u64) -> TorchMem {
        TorchMem {
            allocated_bytes: alloc_mib * MIB,
            reserved_bytes: reserved_mib * MIB,
            ..Default::default()
        }
    }

    #[test]
    fn a_swollen_cache_gets_release_advice_with_its_figures() {
        // The H200 `bloat` job: 121 GB reserved, 1.8 GB in tensors.
        let a = advice(&mem(1_800, 115_000), &Context::default(), Units::MiB);
        assert_eq!(a.len(), 1, "{a:?}");
        assert!(a[0].action.starts_with("Release the cache"));
        assert!(a[0].reason.contains("113200 MiB"), "{}", a[0].reason);
        // A cache that is small next to the tensors is left alone.
        assert!(advice(&mem(30_000, 31_500), &Context::default(), Units::MiB).is_empty());
    }

    #[test]
    fn retries_or_split_blocks_advise_expandable_segments_unless_on() {
        let mut t = mem(10_000, 10_500);
        t.alloc_retries = 4;
        let a = advice(&t, &Context::default(), Units::MiB);
        assert!(a
            .iter()
            .any(|a| a.action.contains("expandable_segments")
                && a.reason.contains("4 allocation(s)")));
        t.expandable_segments = Some(true);
        assert!(advice(&t, &Context::default(), Units::MiB).is_empty());
    }

    #[test]
    fn near_full_and_rising_advises_amp_and_idle_holding_advises_release() {
        let t = mem(70_000, 72_000);
        let full = Context {
            gpu_used_total: Some((130_000 * MIB, 140_000 * MIB)),
            rising: true,
            idle_ms: None,
        };
        assert!(advice(&t, &full, Units::MiB)
            .iter()
            .any(|a| a.action.contains("mixed precision") && a.reason.contains("93 %")));
        let not_rising = Context {
            rising: false,
            ..full
        };
        assert!(advice(&t, &not_rising, Units::MiB).is_empty());
        let idle = Context {
            idle_ms: Some(3_600_000),
            ..Context::default()
        };
        assert!(advice(&t, &idle, Units::MiB)
            .iter()
            .any(|a| a.reason.starts_with("no GPU activity for 1h 00m")));
    }
}
