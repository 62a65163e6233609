//! Filtering and sorting the rows, and the cells they are read by (place, container).

use super::columns::SortColumn;
use crate::engine::view::ProcessRow;
use crate::model::UnixMs;

/// Where the processes shown run, for "not running …": "here" on this computer, "on HOST"
/// for an agent's (`host`).
pub(crate) fn place(host: Option<&str>) -> String {
    crate::front::report_words::Where::of(host).place()
}

/// True when `row` matches the filter (pid, name, command line, user, container or pod;
/// case-insensitive).
pub(crate) fn matches(row: &ProcessRow, filter: &str) -> bool {
    let f = filter.trim().to_lowercase();
    let opt = |s: &Option<String>| s.as_deref().is_some_and(|s| s.to_lowercase().contains(&f));
    f.is_empty()
        || row.key.pid.to_string().contains(&f)
        || row.info.name.to_lowercase().contains(&f)
        || row.info.cmdline.to_lowercase().contains(&f)
        || row.info.user.to_lowercase().contains(&f)
        || opt(&row.info.container_name)
        || opt(&row.info.container_id)
        || opt(&row.info.pod)
}

/// The Container cell: the container's name (else its short id) and, for a pod, `ns/pod ·`
/// before it; empty outside a container.
pub(crate) fn container_cell(row: &ProcessRow) -> String {
    match (&row.info.pod, row.container_label()) {
        (Some(pod), Some(c)) => format!("{pod} · {c}"),
        (Some(pod), None) => pod.clone(),
        (None, Some(c)) => c,
        (None, None) => String::new(),
    }
}

/// Sorts rows in place by `col` (ties broken by pid so the order never flickers). Status
/// sorts by leak rate (`leak_rate` of the row's series), then stale, then exited.
pub(crate) fn sort_rows(
    rows: &mut [&ProcessRow],
    col: SortColumn,
    desc: bool,
    now: UnixMs,
    status: &dyn Fn(&ProcessRow) -> (f64, bool, bool),
) {
    rows.sort_by(|a, b| {
        let o = match col {
            SortColumn::Pid => a.key.pid.cmp(&b.key.pid),
            SortColumn::Name => a.info.name.cmp(&b.info.name),
            SortColumn::User => a.info.user.cmp(&b.info.user),
            SortColumn::Gpu => a.device_index.cmp(&b.device_index),
            SortColumn::Memory => a.used_bytes.cmp(&b.used_bytes),
            SortColumn::Delta => a.delta_1m_bytes.cmp(&b.delta_1m_bytes),
            SortColumn::Age => (now - a.started_ms()).cmp(&(now - b.started_ms())),
            SortColumn::Command => a.info.cmdline.cmp(&b.info.cmdline),
            SortColumn::Container => container_cell(a).cmp(&container_cell(b)),
            SortColumn::Cpu => a
                .cpu_pct
                .unwrap_or(-1.0)
                .total_cmp(&b.cpu_pct.unwrap_or(-1.0)),
            SortColumn::Rss => a.rss_bytes.cmp(&b.rss_bytes),
            SortColumn::GpuUtil => a.sm_util_pct.cmp(&b.sm_util_pct),
            SortColumn::Status => {
                let (ra, sa, ea) = status(a);
                let (rb, sb, eb) = status(b);
                ra.total_cmp(&rb).then(sa.cmp(&sb)).then(eb.cmp(&ea))
            }
        };
        let o = if desc { o.reverse() } else { o };
        o.then(a.key.pid.cmp(&b.key.pid))
            .then(a.device_index.cmp(&b.device_index))
    });
}
