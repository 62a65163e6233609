//! CSV export of a session: one table of device samples, one of process samples, one of events.
//!
//! Every table has a header row with units in the names, `timestamp` (RFC 3339, UTC) and
//! `unix_ms` first, and reads with `pandas.read_csv(path)` and no options.

use std::io::Write;

use super::reader::SessionData;
use super::Event;
use crate::model::format::rfc3339;
use crate::model::MIB;

/// The tables a session exports to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    /// One row per GPU per sample.
    Devices,
    /// One row per process per GPU per sample.
    Processes,
    /// One row per event (process start/exit, leaks, rule actions).
    Events,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 3] = [Table::Devices, Table::Processes, Table::Events];

    /// Lower-case name, used in file names.
    pub fn name(self) -> &'static str {
        match self {
            Table::Devices => "devices",
            Table::Processes => "processes",
            Table::Events => "events",
        }
    }

    /// The header row. In the processes table, `container` is the container's name (else
    /// the first 12 digits of its id) and `pod` is `namespace/pod`; both are empty for a
    /// process outside a container (and in logs written before they were kept). The `torch_…`
    /// columns are PyTorch's allocator figures (MiB) where the process's companion answered,
    /// else empty.
    pub fn header(self) -> &'static str {
        match self {
            Table::Devices => "timestamp,unix_ms,device_index,uuid,name,memory_total_mib,memory_used_mib,memory_reserved_mib,memory_free_mib,utilization_gpu_pct,temperature_c,power_w",
            Table::Processes => "timestamp,unix_ms,device_index,pid,start_time,name,user,used_mib,cmdline,container,pod,torch_allocated_mib,torch_reserved_mib,torch_inactive_split_mib",
            Table::Events => "timestamp,unix_ms,kind,pid,device_index,name,user,rate_mib_per_min,detail",
        }
    }
}

/// The files an export writes: `out` for one table, else `OUT-devices.csv`,
/// `OUT-processes.csv` and `OUT-events.csv` beside it.
pub fn output_files(
    out: &std::path::Path,
    table: Option<Table>,
) -> Vec<(Table, std::path::PathBuf)> {
    match table {
        Some(t) => vec![(t, out.to_path_buf())],
        None => {
            let stem = out.with_extension("");
            Table::ALL
                .iter()
                .map(|t| {
                    (
                        *t,
                        std::path::PathBuf::from(format!("{}-{}.csv", stem.display(), t.name())),
                    )
                })
                .collect()
        }
    }
}

/// True when `a` and `b` name the same file (same device and inode; false when either is
/// missing).
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Why the output files of an export may not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputClash {
    /// This output is the session log being exported.
    IsTheSession(std::path::PathBuf),
    /// These outputs already exist as regular files.
    Exist(Vec<std::path::PathBuf>),
}

/// Checks the outputs before anything is written (the command line and the window alike):
/// never the session log itself; existing regular files only with `force` (devices and pipes
/// such as `/dev/stdout` are written to).
///
/// # Errors
/// The clash found.
pub fn check_outputs(
    jobs: &[(Table, std::path::PathBuf)],
    session: Option<&std::path::Path>,
    force: bool,
) -> Result<(), OutputClash> {
    if let Some(s) = session {
        if let Some((_, p)) = jobs.iter().find(|(_, p)| same_file(p, s)) {
            return Err(OutputClash::IsTheSession(p.clone()));
        }
    }
    let existing: Vec<std::path::PathBuf> = jobs
        .iter()
        .map(|(_, p)| p)
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .cloned()
        .collect();
    if force || existing.is_empty() {
        Ok(())
    } else {
        Err(OutputClash::Exist(existing))
    }
}

/// An output file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {error}", path.display())]
pub struct FileError {
    /// The file.
    pub path: std::path::PathBuf,
    /// What went wrong.
    pub error: ExportError,
}

/// Writes each table of `jobs` to its file (created 0600 or truncated; a regular file is
/// fsync'd).
/// `progress` sees the fraction done over all of them; returning false cancels. Returns the
/// rows written per table, in order.
///
/// # Errors
/// A file that cannot be created or written, or a cancel.
pub fn write_files(
    session: &SessionData,
    jobs: &[(Table, std::path::PathBuf)],
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<Vec<u64>, FileError> {
    // Every table within its limit before any file is made.
    let limit = output_limit(session);
    for (t, path) in jobs {
        let (estimate, longest) = estimate(session, *t);
        if estimate > limit {
            return Err(FileError {
                path: path.clone(),
                error: ExportError::TooLarge {
                    table: t.name(),
                    estimate,
                    limit,
                    longest,
                },
            });
        }
    }
    let n = jobs.len().max(1) as f32;
    let mut rows = Vec::with_capacity(jobs.len());
    for (k, (t, path)) in jobs.iter().enumerate() {
        let fail = |error: ExportError| FileError {
            path: path.clone(),
            error,
        };
        // Session data holds every user's command lines: a new file is 0600.
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| fail(e.into()))?
        };
        // An existing file keeps its mode when truncated: one readable by others (0644)
        // is made 0600 before anything is written into it.
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = file.metadata().map_err(|e| fail(e.into()))?;
            if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
                file.set_permissions(std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| fail(e.into()))?;
            }
        }
        let mut w = std::io::BufWriter::new(file);
        let r = export(session, *t, &mut w, &mut |f| progress((k as f32 + f) / n)).map_err(fail)?;
        let file = w.into_inner().map_err(|e| fail(e.into_error().into()))?;
        if file.metadata().is_ok_and(|m| m.is_file()) {
            file.sync_all().map_err(|e| fail(e.into()))?;
        }
        rows.push(r);
    }
    Ok(rows)
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Writing failed.
    #[error("could not write the CSV: {0}")]
    Io(#[from] std::io::Error),
    /// The progress callback asked to stop.
    #[error("export cancelled")]
    Cancelled,
    /// The table would be larger than the limit for this log (see [`output_limit`]): a log
    /// that repeats long text (a crafted or damaged file) is refused before anything is written.
    #[error(
        "the {table} table would be up to {estimate} bytes, more than the export limit of {limit} bytes ({OUTPUT_FACTOR} × the log's size, at least {MIN_OUTPUT_LIMIT} bytes): the log repeats long text (a command line or name of {longest} bytes); nothing was written"
    )]
    TooLarge {
        /// The table.
        table: &'static str,
        /// Its size at most, bytes.
        estimate: u64,
        /// [`output_limit`] of the log.
        limit: u64,
        /// The longest text repeated on its rows, bytes.
        longest: u64,
    },
}

/// An export may write this many times the log's size …
pub const OUTPUT_FACTOR: u64 = 4096;
/// … and at least this many bytes, whatever the log's size.
pub const MIN_OUTPUT_LIMIT: u64 = 4 << 30;
/// Bytes a row takes besides its texts, at most (times, numbers, commas).
const ROW_FIXED: u64 = 256;

/// The most bytes one table of `session` may be: [`OUTPUT_FACTOR`] × its size, at least
/// [`MIN_OUTPUT_LIMIT`]. A log stores a process's command line once and refers to it from
/// every sample in a few bytes, while each CSV row repeats it: a log of 1.8 MB can refer to a
/// 1 MiB command line 400 000 times (400 GiB of CSV). Memory stays bounded either way (rows
/// are written as they are made); the limit bounds the time and the disk.
pub fn output_limit(session: &SessionData) -> u64 {
    (session.file_bytes() as u64)
        .saturating_mul(OUTPUT_FACTOR)
        .max(MIN_OUTPUT_LIMIT)
}

/// The size `table` of `session` has at most, and the longest text repeated on its rows: a
/// pass over the samples' entries, nothing decoded into values. Texts count twice (CSV
/// quoting doubles a `"` at most).
pub fn estimate(session: &SessionData, table: Table) -> (u64, u64) {
    let text = |d: &super::ProcDef| {
        let i = &d.info;
        let extra = i.container_name.as_deref().map_or(0, str::len)
            + i.container_id.as_deref().map_or(0, str::len)
            + i.pod.as_deref().map_or(0, str::len);
        2 * (i.name.len() + i.user.len() + i.cmdline.len() + extra) as u64
    };
    match table {
        Table::Processes => {
            let lens: std::collections::HashMap<u32, u64> =
                session.defs.iter().map(|(id, d)| (*id, text(d))).collect();
            let (mut total, mut longest) = (0u64, 0u64);
            session.for_each_entry(
                |_| {},
                |id| {
                    let t = lens.get(&id).copied().unwrap_or(0);
                    longest = longest.max(t / 2);
                    total = total.saturating_add(ROW_FIXED + t);
                },
            );
            (total, longest)
        }
        Table::Devices => {
            let per_seg: Vec<u64> = (0..session.segment_count())
                .map(|seg| {
                    session.segment_header(seg).map_or(0, |h| {
                        h.devices
                            .iter()
                            .map(|d| 2 * (d.uuid.len() + d.name.len()) as u64)
                            .max()
                            .unwrap_or(0)
                    })
                })
                .collect();
            let (mut total, mut longest) = (0u64, 0u64);
            session.for_each_entry(
                |seg| {
                    let t = per_seg.get(seg).copied().unwrap_or(0);
                    longest = longest.max(t / 2);
                    total = total.saturating_add(ROW_FIXED + t);
                },
                |_| {},
            );
            (total, longest)
        }
        Table::Events => {
            // Events carry their own text (read from the log: at most its size) except a
            // process's exit, which repeats the name and user of its definition.
            let mut total = session.file_bytes() as u64 * 2;
            let mut longest = 0u64;
            for e in &session.events {
                total = total.saturating_add(ROW_FIXED);
                if let Event::ProcessExit { id, .. } = e {
                    let t = session
                        .defs
                        .get(id)
                        .map_or(0, |d| 2 * (d.info.name.len() + d.info.user.len()) as u64);
                    longest = longest.max(t / 2);
                    total = total.saturating_add(t);
                }
            }
            (total, longest)
        }
    }
}

/// Quotes a CSV field when it needs it.
pub fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) || s.starts_with(' ') || s.ends_with(' ') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// MiB with up to three decimals, exact for whole MiB.
fn put_mib(out: &mut Vec<u8>, bytes: Option<u64>) {
    let Some(b) = bytes else { return };
    put_u64(out, b / MIB);
    put_frac3(out, (b % MIB) * 1000 / MIB);
}

/// ".d", ".dd" or ".ddd" for thousandths `frac` (0..1000), trailing zeros dropped; nothing for 0.
fn put_frac3(out: &mut Vec<u8>, frac: u64) {
    if frac == 0 {
        return;
    }
    let d = [
        (frac / 100) as u8,
        (frac / 10 % 10) as u8,
        (frac % 10) as u8,
    ];
    let keep = if d[2] != 0 {
        3
    } else if d[1] != 0 {
        2
    } else {
        1
    };
    out.push(b'.');
    out.extend(d[..keep].iter().map(|x| b'0' + x));
}

/// Writes `table` of `session` as CSV to `out`. `progress(done_fraction)` is called now and
/// then; returning false cancels. Returns the number of data rows written.
///
/// # Errors
/// When writing fails or the export is cancelled.
pub fn export(
    session: &SessionData,
    table: Table,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<u64, ExportError> {
    let limit = output_limit(session);
    let (estimate, longest) = estimate(session, table);
    if estimate > limit {
        return Err(ExportError::TooLarge {
            table: table.name(),
            estimate,
            limit,
            longest,
        });
    }
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(table.header().as_bytes());
    buf.push(b'\n');
    let mut rows = 0u64;
    let n = session.len();
    match table {
        Table::Devices | Table::Processes => {
            // Device uuid and name by index, from each segment's own header (joined logs may
            // come from different machines).
            let names: Vec<std::collections::HashMap<u32, (String, String)>> = (0..session
                .segment_count())
                .map(|seg| {
                    session
                        .segment_header(seg)
                        .iter()
                        .flat_map(|h| h.devices.iter())
                        .map(|d| (d.index, (quote(&d.uuid), quote(&d.name))))
                        .collect()
                })
                .collect();
            let defs: std::collections::HashMap<u32, String> = session
                .defs
                .values()
                .map(|d| {
                    let start = if d.info.start_time_ms > 0 {
                        rfc3339(d.info.start_time_ms)
                    } else {
                        String::new()
                    };
                    (
                        d.id,
                        format!(
                            "{},{},{},{}",
                            d.pid,
                            start,
                            quote(&d.info.name),
                            quote(&d.info.user)
                        ),
                    )
                })
                .collect();
            let cmdlines: std::collections::HashMap<u32, String> = session
                .defs
                .values()
                .map(|d| {
                    let container = d.info.container_name.clone().or_else(|| {
                        d.info
                            .container_id
                            .as_ref()
                            .map(|id| id.chars().take(12).collect())
                    });
                    (
                        d.id,
                        format!(
                            "{},{},{}",
                            quote(&d.info.cmdline),
                            quote(container.as_deref().unwrap_or("")),
                            quote(d.info.pod.as_deref().unwrap_or(""))
                        ),
                    )
                })
                .collect();
            for i in 0..n {
                let Some(s) = session.decoded(i) else {
                    continue;
                };
                let ts = rfc3339(s.unix_ms);
                let mut prefix = Vec::with_capacity(40);
                prefix.extend_from_slice(ts.as_bytes());
                prefix.push(b',');
                put_u64(&mut prefix, s.unix_ms as u64);
                prefix.push(b',');
                if table == Table::Devices {
                    let names = session.segment_of(i).and_then(|seg| names.get(seg));
                    for d in &s.devices {
                        buf.extend_from_slice(&prefix);
                        put_u64(&mut buf, u64::from(d.index));
                        buf.push(b',');
                        if let Some((u, nm)) = names.and_then(|n| n.get(&d.index)) {
                            buf.extend_from_slice(u.as_bytes());
                            buf.push(b',');
                            buf.extend_from_slice(nm.as_bytes());
                        } else {
                            buf.push(b',');
                        }
                        for v in [
                            d.memory_total_bytes,
                            d.memory_used_bytes,
                            d.memory_reserved_bytes,
                            d.memory_free_bytes,
                        ] {
                            buf.push(b',');
                            put_mib(&mut buf, v);
                        }
                        buf.push(b',');
                        if let Some(u) = d.utilization_gpu_pct {
                            put_u64(&mut buf, u64::from(u));
                        }
                        buf.push(b',');
                        if let Some(t) = d.temperature_c {
                            put_u64(&mut buf, u64::from(t));
                        }
                        buf.push(b',');
                        if let Some(p) = d.power_w {
                            // Watts with up to three decimals (NVML reports milliwatts).
                            let mw = (p.max(0.0) * 1000.0).round() as u64;
                            put_u64(&mut buf, mw / 1000);
                            put_frac3(&mut buf, mw % 1000);
                        }
                        buf.push(b'\n');
                        rows += 1;
                        flush_full(&mut buf, out)?;
                    }
                } else {
                    let mut torch = s.torch.iter().peekable();
                    for (pos, (id, used)) in s.procs.iter().enumerate() {
                        buf.extend_from_slice(&prefix);
                        let dev = session.defs.get(id).map_or(0, |d| d.device_index);
                        put_u64(&mut buf, u64::from(dev));
                        buf.push(b',');
                        match defs.get(id) {
                            Some(d) => buf.extend_from_slice(d.as_bytes()),
                            None => buf.extend_from_slice(b",,,"),
                        }
                        buf.push(b',');
                        put_mib(&mut buf, *used);
                        buf.push(b',');
                        match cmdlines.get(id) {
                            Some(c) => buf.extend_from_slice(c.as_bytes()),
                            None => buf.extend_from_slice(b",,"),
                        }
                        // PyTorch's figures (empty cells where no companion answered); the
                        // entries come in increasing position order.
                        let t = torch.next_if(|(p, _)| *p as usize == pos).map(|(_, t)| t);
                        for v in [
                            t.map(|t| t.allocated_bytes),
                            t.map(|t| t.reserved_bytes),
                            t.map(|t| t.inactive_split_bytes),
                        ] {
                            buf.push(b',');
                            put_mib(&mut buf, v);
                        }
                        buf.push(b'\n');
                        rows += 1;
                        flush_full(&mut buf, out)?;
                    }
                }
                if buf.len() > (1 << 20) {
                    out.write_all(&buf)?;
                    buf.clear();
                    if !progress(i as f32 / n.max(1) as f32) {
                        return Err(ExportError::Cancelled);
                    }
                }
            }
        }
        Table::Events => {
            for e in &session.events {
                if let Some(line) = event_row(session, e) {
                    buf.extend_from_slice(line.as_bytes());
                    rows += 1;
                    flush_full(&mut buf, out)?;
                }
            }
        }
    }
    out.write_all(&buf)?;
    out.flush()?;
    progress(1.0);
    Ok(rows)
}

/// Writes the buffer out once it holds more than 1 MiB: memory stays bounded whatever one
/// sample holds (4096 devices, millions of process entries).
fn flush_full(buf: &mut Vec<u8>, out: &mut dyn Write) -> std::io::Result<()> {
    if buf.len() > (1 << 20) {
        out.write_all(buf)?;
        buf.clear();
    }
    Ok(())
}

fn event_row(session: &SessionData, e: &Event) -> Option<String> {
    let t = e.unix_ms();
    let (kind, pid, dev, name, user, rate, detail) = match e {
        Event::ProcessStart { def, .. } => (
            "process_start",
            Some(def.pid),
            Some(def.device_index),
            def.info.name.clone(),
            def.info.user.clone(),
            None::<f64>,
            def.info.cmdline.clone(),
        ),
        Event::ProcessExit {
            id,
            pid,
            device_index,
            ..
        } => {
            let d = session.defs.get(id);
            (
                "process_exit",
                Some(*pid),
                Some(*device_index),
                d.map_or(String::new(), |d| d.info.name.clone()),
                d.map_or(String::new(), |d| d.info.user.clone()),
                None,
                String::new(),
            )
        }
        Event::LeakStarted { leak, .. } => (
            "leak_started",
            Some(leak.pid),
            Some(leak.device_index),
            leak.name.clone(),
            leak.user.clone(),
            Some(leak.rate_mib_per_min),
            format!("since {}", rfc3339(leak.since_ms)),
        ),
        Event::LeakEnded {
            leak,
            grown_mib,
            peak_mib,
            ..
        } => (
            "leak_ended",
            Some(leak.pid),
            Some(leak.device_index),
            leak.name.clone(),
            leak.user.clone(),
            Some(leak.rate_mib_per_min),
            format!(
                "grew {grown_mib:.0} MiB since {}, peak {peak_mib:.0} MiB",
                rfc3339(leak.since_ms)
            ),
        ),
        Event::Activity {
            rule,
            pid,
            device_index,
            name,
            user,
            action,
            outcome,
            detail,
            ..
        } => (
            "rule_action",
            Some(*pid),
            Some(*device_index),
            name.clone(),
            user.clone(),
            None,
            format!("{rule}: {action}: {}: {detail}", outcome.label()),
        ),
        Event::OomSuspected {
            device_index,
            used_pct,
            victims,
            holders,
            ..
        } => {
            let first = victims.first();
            (
                "oom_suspected",
                first.map(|v| v.pid),
                Some(*device_index),
                first.map_or(String::new(), |v| v.name.clone()),
                first.map_or(String::new(), |v| v.user.clone()),
                None,
                crate::session::describe_oom(*used_pct, victims, holders),
            )
        }
        Event::Park {
            pid,
            device_index,
            name,
            action,
            bytes,
            seconds,
            ok,
            detail,
            ..
        } => (
            if *ok { action.as_str() } else { "park_failed" },
            Some(*pid),
            Some(*device_index),
            name.clone(),
            String::new(),
            None,
            format!(
                "{action} {}: {} MiB in {seconds:.1} s: {detail}",
                if *ok { "done" } else { "failed" },
                bytes.map_or_else(|| "?".into(), |b| (b / crate::model::MIB).to_string())
            ),
        ),
        Event::OomForecast {
            device_index,
            full_in_s,
            drivers,
            ..
        } => (
            "oom_forecast",
            drivers.first().map(|d| d.pid),
            Some(*device_index),
            drivers.first().map_or(String::new(), |d| d.name.clone()),
            drivers.first().map_or(String::new(), |d| d.user.clone()),
            None,
            format!(
                "GPU {device_index} forecast full in {:.1} min; growing: {}",
                full_in_s / 60.0,
                drivers
                    .iter()
                    .map(|d| format!("{} (PID {})", d.name, d.pid))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        Event::OomForecastEnded {
            device_index,
            raised_ms,
            ..
        } => (
            "oom_forecast_ended",
            None,
            Some(*device_index),
            String::new(),
            String::new(),
            None,
            format!(
                "the forecast raised at {} receded",
                crate::model::format::rfc3339(*raised_ms)
            ),
        ),
        Event::Recording { active, gap, .. } => (
            "recording",
            None,
            None,
            String::new(),
            String::new(),
            None,
            match (active, gap) {
                (_, Some(g)) => format!(
                    "resumed after a gap: {} sample(s) from {} to {} not written: {}",
                    g.lost_samples,
                    crate::model::format::rfc3339(g.from_ms),
                    crate::model::format::rfc3339(g.to_ms),
                    g.cause
                ),
                (true, None) => "resumed".into(),
                (false, None) => "paused".into(),
            },
        ),
        Event::ProcessTable { .. } => return None,
    };
    let opt = |v: Option<u32>| v.map_or(String::new(), |v| v.to_string());
    Some(format!(
        "{},{},{},{},{},{},{},{},{}\n",
        rfc3339(t),
        t,
        kind,
        opt(pid),
        opt(dev),
        quote(&name),
        quote(&user),
        rate.map_or(String::new(), |r| format!("{r:.2}")),
        quote(&detail)
    ))
}
