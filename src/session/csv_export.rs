//! CSV export of a session: one table of device samples, one of process samples, one of events.
//!
//! Every table has a header row with units in the names, `timestamp` (RFC 3339, UTC) and
//! `unix_ms` first, and reads with `pandas.read_csv(path)` and no options.

use std::io::Write;

use super::format::DecodedSample;
use super::reader::SessionData;
use super::Event;
use crate::model::format::rfc3339;
use crate::model::{UnixMs, MIB};

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

    /// Its rows in words: "device", "process", "event" (as in "120 device rows"; its file
    /// name's word, [`Table::name`], is plural).
    pub(crate) fn row_word(self) -> &'static str {
        match self {
            Table::Devices => "device",
            Table::Processes => "process",
            Table::Events => "event",
        }
    }

    /// The header row. In the processes table, `container` is the container's name (else
    /// the first 12 digits of its id) and `pod` is `namespace/pod`; both are empty for a
    /// process outside a container (and in logs written before they were kept). The `torch_…`
    /// columns are PyTorch's allocator figures (MiB) where the process's companion answered,
    /// else empty. `state` is `running`, or where a park stands (`parking`, `parked`, `resuming`,
    /// `locked`, `failed`), as in `snapshot --format csv`; `parked_mib` is the GPU memory its
    /// park moved to host memory (empty when not parked): while parked, the driver lists it
    /// with 0 MiB.
    pub fn header(self) -> &'static str {
        match self {
            Table::Devices => "timestamp,unix_ms,device_index,uuid,name,memory_total_mib,memory_used_mib,memory_reserved_mib,memory_free_mib,utilization_gpu_pct,temperature_c,power_w",
            Table::Processes => "timestamp,unix_ms,device_index,pid,start_time,name,user,used_mib,cmdline,container,pod,torch_allocated_mib,torch_reserved_mib,torch_inactive_split_mib,state,parked_mib",
            Table::Events => "timestamp,unix_ms,kind,pid,device_index,name,user,rate_mib_per_min,detail",
        }
    }
}

/// The files an export writes: `out` for one table, else `OUT-devices.csv`,
/// `OUT-processes.csv` and `OUT-events.csv` beside it; into a folder `out`, `devices.csv`,
/// `processes.csv` and `events.csv` (or the one table's) in it.
pub(crate) fn output_files(
    out: &std::path::Path,
    table: Option<Table>,
) -> Vec<(Table, std::path::PathBuf)> {
    if out.is_dir() {
        return Table::ALL
            .iter()
            .filter(|t| table.is_none_or(|one| one == **t))
            .map(|t| (*t, out.join(format!("{}.csv", t.name()))))
            .collect();
    }
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
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Why the output files of an export may not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OutputClash {
    /// This output is the session log being exported.
    IsTheSession(std::path::PathBuf),
    /// These outputs already exist as regular files.
    Exist(Vec<std::path::PathBuf>),
    /// This output exists and is not a regular file (a symlink, a FIFO, a device, a folder):
    /// never written to, with or without `force`.
    NotRegular(std::path::PathBuf, &'static str),
}

/// What a non-regular file is, in words.
fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Checks the outputs before anything is written (the command line and the window alike):
/// never the session log itself; never a symlink (even a dangling one), FIFO, device or
/// folder; existing regular files only with `force`. (`export --csv -` writes to standard
/// output.)
///
/// # Errors
/// The clash found.
pub(crate) fn check_outputs(
    jobs: &[(Table, std::path::PathBuf)],
    session: Option<&std::path::Path>,
    force: bool,
) -> Result<(), OutputClash> {
    if let Some(s) = session {
        if let Some((_, p)) = jobs.iter().find(|(_, p)| same_file(p, s)) {
            return Err(OutputClash::IsTheSession(p.clone()));
        }
    }
    let mut existing = Vec::new();
    for (_, p) in jobs {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_file() => existing.push(p.clone()),
            Ok(m) => return Err(OutputClash::NotRegular(p.clone(), kind_of(m.file_type()))),
            Err(_) => {}
        }
    }
    if force || existing.is_empty() {
        Ok(())
    } else {
        Err(OutputClash::Exist(existing))
    }
}

/// An output file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {error}", path.display())]
pub(crate) struct FileError {
    /// The file.
    pub path: std::path::PathBuf,
    /// What went wrong.
    pub error: ExportError,
}

/// Writes each table of `jobs` to its file, never through a link and never into anything but
/// a new regular file: without `force` each file is created (`O_EXCL|O_NOFOLLOW`, 0600: an
/// existing name, a planted symlink among them, is an error); with `force` the table goes to
/// a new temporary file beside it (same flags), which is then renamed over the name (a
/// symlink, FIFO or device there is refused, never written through). Before anything is
/// written, every table must be within [`output_limit`] and all of them fit the free space
/// of their folders; a file whose export fails is removed. Files are fsync'd.
/// `progress` sees the fraction done over all of them; returning false cancels. Returns the
/// rows written per table, in order.
///
/// # Errors
/// A file that cannot be created or written, a table over its limit, too little free space,
/// or a cancel.
pub(crate) fn write_files(
    session: &SessionData,
    jobs: &[(Table, std::path::PathBuf)],
    (force, span): (bool, (UnixMs, UnixMs)),
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<Vec<u64>, FileError> {
    let limit = output_limit(session);
    let mut need: std::collections::HashMap<std::path::PathBuf, u64> = Default::default();
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
        let dir = folder_of(path);
        *need.entry(dir).or_insert(0) += estimate;
    }
    for (dir, bytes) in &need {
        if let Some(free) = free_bytes(dir) {
            if bytes.saturating_add(FREE_RESERVE) > free {
                return Err(FileError {
                    path: dir.clone(),
                    error: ExportError::NoSpace { need: *bytes, free },
                });
            }
        }
    }
    let n = jobs.len().max(1) as f32;
    let mut rows = Vec::with_capacity(jobs.len());
    for (k, (t, path)) in jobs.iter().enumerate() {
        let fail = |error: ExportError| FileError {
            path: path.clone(),
            error,
        };
        let out = Output::create(path, force).map_err(|e| fail(e.into()))?;
        let written = write_table(session, (*t, span), &out, limit, &mut |f| {
            progress((k as f32 + f) / n)
        })
        .and_then(|r| out.finish().map(|()| r).map_err(ExportError::Io));
        match written {
            Ok(r) => rows.push(r),
            Err(e) => {
                out.discard();
                return Err(fail(e));
            }
        }
    }
    Ok(rows)
}

/// Writes `table` into the open output, at most `limit` bytes, and syncs it.
fn write_table(
    session: &SessionData,
    (table, span): (Table, (UnixMs, UnixMs)),
    out: &Output,
    limit: u64,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<u64, ExportError> {
    let mut capped = Capped {
        out: std::io::BufWriter::new(&out.file),
        left: limit,
    };
    let r = export_between(session, table, span, &mut capped, progress)?;
    capped.out.flush()?;
    out.file.sync_all()?;
    Ok(r)
}

/// Bytes left free on the disk after an export, at least.
const FREE_RESERVE: u64 = 64 << 20;

/// The folder a file is made in.
fn folder_of(path: &std::path::Path) -> std::path::PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// Bytes free for us on the file system of `dir` (None when it cannot be told).
#[allow(clippy::unnecessary_cast)] // the field types differ between platforms
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero statvfs is a valid value for the call to fill in.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a struct we own.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // A file system with no blocks at all (/proc, /sys) has no free space to tell: writing
    // there fails with its own error.
    if st.f_blocks == 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// A writer that fails once more than `left` bytes would pass.
struct Capped<W: Write> {
    out: W,
    left: u64,
}

impl<W: Write> Write for Capped<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() as u64 > self.left {
            return Err(std::io::Error::other(
                "the export grew past its size limit; stopped",
            ));
        }
        let n = self.out.write(buf)?;
        self.left -= n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// One output being written: the file, and the temporary name it has until
/// [`Output::finish`] (with `force`).
struct Output {
    file: std::fs::File,
    /// Where it is being written.
    at: std::path::PathBuf,
    /// The name it gets when done, for a temporary file.
    rename_to: Option<std::path::PathBuf>,
}

/// A new regular file at `path`, 0600, never through a link (`O_EXCL|O_NOFOLLOW`).
fn create_new(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(path)
}

impl Output {
    /// The output for `path`: the file itself (new), or with `force` a new temporary file in
    /// the same folder.
    fn create(path: &std::path::Path, force: bool) -> std::io::Result<Self> {
        if !force {
            let file = create_new(path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    std::io::Error::new(
                        e.kind(),
                        "it exists (maybe as a symbolic link): add --force to replace it",
                    )
                } else {
                    e
                }
            })?;
            return Ok(Self {
                file,
                at: path.to_path_buf(),
                rename_to: None,
            });
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = folder_of(path);
        let mut last = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let tmp = dir.join(format!(
                ".{name}.{}-{nanos:x}-{attempt}.part",
                std::process::id()
            ));
            match create_new(&tmp) {
                Ok(file) => {
                    return Ok(Self {
                        file,
                        at: tmp,
                        rename_to: Some(path.to_path_buf()),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name")))
    }

    /// Gives the finished file its name: the temporary file is renamed over the name (which
    /// must be a regular file or nothing: a link or a FIFO planted meanwhile is refused).
    fn finish(&self) -> std::io::Result<()> {
        let Some(to) = &self.rename_to else {
            return Ok(());
        };
        if let Ok(m) = std::fs::symlink_metadata(to) {
            if !m.is_file() {
                return Err(std::io::Error::other(format!(
                    "{} is {}: not replaced",
                    to.display(),
                    kind_of(m.file_type())
                )));
            }
        }
        std::fs::rename(&self.at, to)
    }

    /// Removes what was written (a failed or cancelled export leaves no partial file).
    fn discard(self) {
        drop(self.file);
        let _ = std::fs::remove_file(&self.at);
    }
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
    /// The tables would not fit the free space of their folder's file system.
    #[error(
        "the export would take up to {need} bytes, but only {free} are free there (at least {FREE_RESERVE} must stay free); nothing was written"
    )]
    NoSpace {
        /// Bytes the tables take at most.
        need: u64,
        /// Bytes free.
        free: u64,
    },
    /// The table would be larger than the limit for this log (see [`output_limit`]): a log
    /// that repeats long text (a crafted or damaged file) is refused before anything is written.
    #[error(
        "the {table} table would be up to {estimate} bytes, more than the export limit of {limit} bytes ({OUTPUT_FACTOR} × the log's size, at least {MIN_OUTPUT_LIMIT} and at most {MAX_OUTPUT_LIMIT} bytes): the log repeats long text (a command line or name of {longest} bytes); nothing was written"
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
const OUTPUT_FACTOR: u64 = 1024;
/// … and at least this many bytes, whatever the log's size …
const MIN_OUTPUT_LIMIT: u64 = 1 << 30;
/// … and never more than this, per table.
const MAX_OUTPUT_LIMIT: u64 = 64 << 30;
/// Bytes a row takes besides its texts, at most (times, numbers, commas).
const ROW_FIXED: u64 = 256;

/// The most bytes one table of `session` may be: [`OUTPUT_FACTOR`] × its size, at least
/// [`MIN_OUTPUT_LIMIT`], at most [`MAX_OUTPUT_LIMIT`]. A log stores a process's command line
/// once and refers to it from every sample in a few bytes, while each CSV row repeats it: a
/// log of 1.8 MB can refer to a 1 MiB command line 400 000 times (400 GiB of CSV). Memory
/// stays bounded either way (rows are written as they are made); the limit bounds the time
/// and the disk, and [`write_files`] also checks the free space first.
fn output_limit(session: &SessionData) -> u64 {
    (session.file_bytes() as u64)
        .saturating_mul(OUTPUT_FACTOR)
        .clamp(MIN_OUTPUT_LIMIT, MAX_OUTPUT_LIMIT)
}

/// The size `table` of `session` has at most, and the longest text repeated on its rows: a
/// pass over the samples' entries, nothing decoded into values. Texts count twice (CSV
/// quoting doubles a `"` at most).
pub fn estimate(session: &SessionData, table: Table) -> (u64, u64) {
    match table {
        Table::Processes => estimate_processes(session),
        Table::Devices => estimate_devices(session),
        Table::Events => estimate_events(session),
    }
}

/// The bytes the texts of a process's row take at most: name, user, command line and container
/// facts, counted twice.
fn info_text(i: &crate::model::ProcInfo) -> u64 {
    let extra = i.container_name.as_deref().map_or(0, str::len)
        + i.container_id.as_deref().map_or(0, str::len)
        + i.pod.as_deref().map_or(0, str::len);
    2 * (i.name.len() + i.user.len() + i.cmdline.len() + extra) as u64
}

/// [`estimate`] of the processes table: a row per process entry of every sample.
fn estimate_processes(session: &SessionData) -> (u64, u64) {
    let lens: std::collections::HashMap<u32, u64> = session
        .defs()
        .map(|(id, d)| (id, info_text(&d.info)))
        .collect();
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

/// [`estimate`] of the devices table: a row per device entry of every sample, with the longest
/// uuid and name of its segment's header.
fn estimate_devices(session: &SessionData) -> (u64, u64) {
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

/// [`estimate`] of the events table.
fn estimate_events(session: &SessionData) -> (u64, u64) {
    // Events carry their own text (read from the log: at most its size) except a
    // process's exit, which repeats the name and user of its definition.
    let mut total = session.file_bytes() as u64 * 2;
    let mut longest = 0u64;
    for e in &session.events {
        total = total.saturating_add(ROW_FIXED);
        if let Event::ProcessExit { id, .. } = e {
            let t = session
                .def(*id)
                .map_or(0, |d| 2 * (d.info.name.len() + d.info.user.len()) as u64);
            longest = longest.max(t / 2);
            total = total.saturating_add(t);
        }
    }
    (total, longest)
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

/// The output of an export: counts the bytes the CSV writer passes on, for the progress.
struct Counted<'a> {
    out: &'a mut dyn Write,
    bytes: u64,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The csv crate's writer (RFC 4180: a field holding `,`, `"`, CR or LF is quoted, its `"`
/// doubled; rows end in LF) over the export's output.
type CsvOut<'a> = csv::Writer<Counted<'a>>;

/// Bytes the CSV writer gathers before it writes to the output.
const BUFFER: usize = 1 << 16;

/// Bytes written between two calls of the progress callback.
const PROGRESS_EVERY: u64 = 1 << 20;

impl From<csv::Error> for ExportError {
    fn from(e: csv::Error) -> Self {
        match e.into_kind() {
            csv::ErrorKind::Io(e) => ExportError::Io(e),
            other => ExportError::Io(std::io::Error::other(format!("{other:?}"))),
        }
    }
}

/// A field made in a reused buffer (numbers), then written.
struct Cell {
    buf: Vec<u8>,
}

impl Cell {
    fn new() -> Self {
        Self {
            buf: Vec::with_capacity(32),
        }
    }

    /// Writes `put`'s bytes as the next field of `w`.
    fn write(&mut self, w: &mut CsvOut<'_>, put: impl FnOnce(&mut Vec<u8>)) -> csv::Result<()> {
        self.buf.clear();
        put(&mut self.buf);
        w.write_field(&self.buf)
    }

    fn u64(&mut self, w: &mut CsvOut<'_>, v: Option<u64>) -> csv::Result<()> {
        self.write(w, |b| {
            if let Some(v) = v {
                put_u64(b, v);
            }
        })
    }

    fn mib(&mut self, w: &mut CsvOut<'_>, bytes: Option<u64>) -> csv::Result<()> {
        self.write(w, |b| put_mib(b, bytes))
    }
}

/// Ends the current row.
fn end_row(w: &mut CsvOut<'_>) -> csv::Result<()> {
    w.write_record(None::<&[u8]>)
}

/// Calls the progress callback after each [`PROGRESS_EVERY`] bytes written.
struct Pace {
    next: u64,
    samples: usize,
}

impl Pace {
    fn new(samples: usize) -> Self {
        Self {
            next: PROGRESS_EVERY,
            samples: samples.max(1),
        }
    }

    /// After sample `i`: tells `progress` how far the export is, now and then.
    fn step(
        &mut self,
        w: &CsvOut<'_>,
        i: usize,
        progress: &mut dyn FnMut(f32) -> bool,
    ) -> Result<(), ExportError> {
        if w.get_ref().bytes >= self.next {
            self.next = w.get_ref().bytes + PROGRESS_EVERY;
            if !progress(i as f32 / self.samples as f32) {
                return Err(ExportError::Cancelled);
            }
        }
        Ok(())
    }
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
    export_between(session, table, (UnixMs::MIN, UnixMs::MAX), out, progress)
}

/// [`export`] of the samples and events from `from` to `to` (ms since the epoch, both
/// included).
///
/// # Errors
/// When writing fails or the export is cancelled.
pub(crate) fn export_between(
    session: &SessionData,
    table: Table,
    (from, to): (UnixMs, UnixMs),
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
    let mut w = csv::WriterBuilder::new()
        .buffer_capacity(BUFFER)
        .from_writer(Counted { out, bytes: 0 });
    w.write_record(table.header().split(','))?;
    let span = session.indices_between(from, to);
    let rows = match table {
        Table::Devices => device_rows(session, span, &mut w, progress)?,
        Table::Processes => process_rows(session, span, &mut w, progress)?,
        Table::Events => event_rows(session, (from, to), &mut w)?,
    };
    w.flush()?;
    progress(1.0);
    Ok(rows)
}

/// The time of a sample, as the first two fields of its rows.
struct Stamp {
    rfc3339: String,
    unix_ms: u64,
}

impl Stamp {
    fn new(unix_ms: crate::model::UnixMs) -> Self {
        Self {
            rfc3339: rfc3339(unix_ms),
            unix_ms: unix_ms as u64,
        }
    }

    fn write(&self, w: &mut CsvOut<'_>, cell: &mut Cell) -> csv::Result<()> {
        w.write_field(&self.rfc3339)?;
        cell.u64(w, Some(self.unix_ms))
    }
}

/// The devices table: a row per GPU per sample.
fn device_rows(
    session: &SessionData,
    span: std::ops::Range<usize>,
    w: &mut CsvOut<'_>,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<u64, ExportError> {
    // Device uuid and name by index, from each segment's own header (joined logs may come
    // from different machines).
    let names: Vec<std::collections::HashMap<u32, (&str, &str)>> = (0..session.segment_count())
        .map(|seg| {
            session
                .segment_header(seg)
                .iter()
                .flat_map(|h| h.devices.iter())
                .map(|d| (d.index, (d.uuid.as_str(), d.name.as_str())))
                .collect()
        })
        .collect();
    sample_rows(session, span, w, progress, |w, cell, stamp, i, s| {
        let names = session.segment_of(i).and_then(|seg| names.get(seg));
        for d in &s.devices {
            let name = names.and_then(|n| n.get(&d.index)).copied();
            device_row(w, cell, stamp, name, d)?;
        }
        Ok(s.devices.len() as u64)
    })
}

/// Calls `rows_of` on each sample of `session` that decodes (with the sample's time and
/// index), which writes its rows and says how many; tells `progress` how far it is now and
/// then. Returns the rows written.
fn sample_rows(
    session: &SessionData,
    span: std::ops::Range<usize>,
    w: &mut CsvOut<'_>,
    progress: &mut dyn FnMut(f32) -> bool,
    mut rows_of: impl FnMut(
        &mut CsvOut<'_>,
        &mut Cell,
        &Stamp,
        usize,
        &DecodedSample,
    ) -> csv::Result<u64>,
) -> Result<u64, ExportError> {
    let (mut rows, mut pace, mut cell) = (0u64, Pace::new(span.len()), Cell::new());
    let first = span.start;
    for i in span {
        let Some(s) = session.decoded(i) else {
            continue;
        };
        rows += rows_of(w, &mut cell, &Stamp::new(s.unix_ms), i, &s)?;
        pace.step(w, i - first, progress)?;
    }
    Ok(rows)
}

/// One GPU's row: `name` is its uuid and name from the log's header.
fn device_row(
    w: &mut CsvOut<'_>,
    cell: &mut Cell,
    stamp: &Stamp,
    name: Option<(&str, &str)>,
    d: &crate::model::DeviceSample,
) -> csv::Result<()> {
    stamp.write(w, cell)?;
    cell.u64(w, Some(u64::from(d.index)))?;
    let (uuid, name) = name.unwrap_or_default();
    w.write_field(uuid)?;
    w.write_field(name)?;
    for v in [
        d.memory_total_bytes,
        d.memory_used_bytes,
        d.memory_reserved_bytes,
        d.memory_free_bytes,
    ] {
        cell.mib(w, v)?;
    }
    cell.u64(w, d.utilization_gpu_pct.map(u64::from))?;
    cell.u64(w, d.temperature_c.map(u64::from))?;
    cell.write(w, |b| {
        if let Some(p) = d.power_w {
            // Watts with up to three decimals (NVML reports milliwatts).
            let mw = (p.max(0.0) * 1000.0).round() as u64;
            put_u64(b, mw / 1000);
            put_frac3(b, mw % 1000);
        }
    })?;
    end_row(w)
}

/// What the processes table repeats of a process on each of its rows.
struct ProcFields<'a> {
    device_index: u32,
    pid: String,
    start: String,
    def: &'a crate::model::ProcInfo,
    container: std::borrow::Cow<'a, str>,
}

impl<'a> ProcFields<'a> {
    fn new(d: &'a super::reader::ProcFacts) -> Self {
        let i = &d.info;
        let container = match (&i.container_name, &i.container_id) {
            (Some(n), _) => n.as_str().into(),
            (None, Some(id)) => id.chars().take(12).collect::<String>().into(),
            (None, None) => "".into(),
        };
        Self {
            device_index: d.device_index,
            pid: d.pid.to_string(),
            start: if i.start_time_ms > 0 {
                rfc3339(i.start_time_ms)
            } else {
                String::new()
            },
            def: i,
            container,
        }
    }

    /// pid, start, name, user, command line, container, pod.
    fn texts(&self) -> [&str; 7] {
        [
            &self.pid,
            &self.start,
            &self.def.name,
            &self.def.user,
            &self.def.cmdline,
            &self.container,
            self.def.pod.as_deref().unwrap_or(""),
        ]
    }
}

/// The processes table: a row per process per GPU per sample.
fn process_rows(
    session: &SessionData,
    span: std::ops::Range<usize>,
    w: &mut CsvOut<'_>,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<u64, ExportError> {
    let defs: std::collections::HashMap<u32, ProcFields<'_>> = session
        .defs()
        .map(|(id, d)| (id, ProcFields::new(d)))
        .collect();
    sample_rows(session, span, w, progress, |w, cell, stamp, _, s| {
        // PyTorch's figures (empty cells where no companion answered); the entries come in
        // increasing position order.
        let mut torch = s.torch.iter().peekable();
        for (pos, (id, used)) in s.procs.iter().enumerate() {
            let t = torch.next_if(|(p, _)| *p as usize == pos).map(|(_, t)| t);
            let park = session.park_at(*id, s.unix_ms);
            process_row(w, cell, stamp, defs.get(id), *used, t, park)?;
        }
        Ok(s.procs.len() as u64)
    })
}

/// One process's row: its fields (empty where its definition is missing), the memory it
/// holds, PyTorch's figures and its park.
fn process_row(
    w: &mut CsvOut<'_>,
    cell: &mut Cell,
    stamp: &Stamp,
    p: Option<&ProcFields<'_>>,
    used: Option<u64>,
    torch: Option<&crate::model::TorchMem>,
    park: Option<crate::model::ParkInfo>,
) -> csv::Result<()> {
    stamp.write(w, cell)?;
    cell.u64(w, Some(u64::from(p.map_or(0, |p| p.device_index))))?;
    let [pid, start, name, user, cmdline, container, pod] = p.map_or([""; 7], ProcFields::texts);
    for f in [pid, start, name, user] {
        w.write_field(f)?;
    }
    cell.mib(w, used)?;
    for f in [cmdline, container, pod] {
        w.write_field(f)?;
    }
    cell.mib(w, torch.map(|t| t.allocated_bytes))?;
    cell.mib(w, torch.map(|t| t.reserved_bytes))?;
    cell.mib(w, torch.map(|t| t.inactive_split_bytes))?;
    w.write_field(park.map_or("running", |p| p.state.label()))?;
    cell.mib(w, park.and_then(|p| p.bytes))?;
    end_row(w)
}

/// The events table: a row per event but the process tables.
fn event_rows(
    session: &SessionData,
    (from, to): (UnixMs, UnixMs),
    w: &mut CsvOut<'_>,
) -> Result<u64, ExportError> {
    let (mut rows, mut cell) = (0u64, Cell::new());
    let made = parks_made(session);
    let within = |e: &&Event| (from..=to).contains(&e.unix_ms());
    for e in session.events.iter().filter(within) {
        if let Event::ParkState {
            pid, device_index, ..
        } = e
        {
            if made.contains(&(*pid, *device_index)) {
                // vramwarden's own park or resume has its row (`park`, `resume`).
                continue;
            }
        }
        if let Some(row) = event_row(session, e) {
            row.write(w, &mut cell, e.unix_ms())?;
            rows += 1;
        }
    }
    Ok(rows)
}

/// The columns of an event's row after its time.
struct EventRow<'a> {
    kind: &'a str,
    pid: Option<u32>,
    device_index: Option<u32>,
    name: &'a str,
    user: &'a str,
    rate_mib_per_min: Option<f64>,
    detail: String,
}

impl<'a> EventRow<'a> {
    /// A row about `pid` (if known) on GPU `device_index`, without name or rate.
    fn new(kind: &'a str, pid: Option<u32>, device_index: Option<u32>, detail: String) -> Self {
        Self {
            kind,
            pid,
            device_index,
            name: "",
            user: "",
            rate_mib_per_min: None,
            detail,
        }
    }

    /// The same, naming the process.
    fn named(mut self, name: &'a str, user: &'a str) -> Self {
        self.name = name;
        self.user = user;
        self
    }

    /// A leak's row: its process and rate.
    fn leak(kind: &'a str, leak: &'a super::LeakInfo, detail: String) -> Self {
        Self {
            rate_mib_per_min: Some(leak.rate_mib_per_min),
            ..Self::new(kind, Some(leak.pid), Some(leak.device_index), detail)
                .named(&leak.name, &leak.user)
        }
    }

    /// A row naming the first of `holders` (an OOM's victim, a forecast's driver).
    fn first_of(
        kind: &'a str,
        holders: &'a [super::OomHolder],
        device_index: u32,
        detail: String,
    ) -> Self {
        let first = holders.first();
        Self::new(kind, first.map(|h| h.pid), Some(device_index), detail)
            .named(first.map_or("", |h| &h.name), first.map_or("", |h| &h.user))
    }

    fn write(&self, w: &mut CsvOut<'_>, cell: &mut Cell, unix_ms: UnixMs) -> csv::Result<()> {
        w.write_field(rfc3339(unix_ms))?;
        w.write_field(unix_ms.to_string())?;
        w.write_field(self.kind)?;
        cell.u64(w, self.pid.map(u64::from))?;
        cell.u64(w, self.device_index.map(u64::from))?;
        w.write_field(self.name)?;
        w.write_field(self.user)?;
        w.write_field(
            self.rate_mib_per_min
                .map_or(String::new(), |r| format!("{r:.2}")),
        )?;
        w.write_field(&self.detail)?;
        end_row(w)
    }
}

/// The row of event `e` (None for a process table, which is no event of its own).
fn event_row<'a>(session: &'a SessionData, e: &'a Event) -> Option<EventRow<'a>> {
    Some(match e {
        Event::ProcessStart { .. } | Event::ProcessExit { .. } => process_event_row(session, e)?,
        Event::LeakStarted { .. } | Event::LeakEnded { .. } => leak_row(e)?,
        Event::Activity { .. } => activity_row(e)?,
        Event::OomSuspected {
            device_index,
            used_pct,
            victims,
            holders,
            ..
        } => EventRow::first_of(
            "oom_suspected",
            victims,
            *device_index,
            super::describe_oom(*used_pct, victims, holders),
        ),
        Event::Park { .. } => park_row(e)?,
        Event::ParkState { .. } => park_state_row(session, e)?,
        Event::OomForecast { .. } | Event::OomForecastEnded { .. } => forecast_row(e)?,
        Event::Recording { active, gap, .. } => EventRow::new(
            "recording",
            None,
            None,
            recording_detail(*active, gap.as_ref()),
        ),
        Event::ProcessTable { .. } => return None,
    })
}

/// The row of a process's start or exit (an exit's name and user from its definition).
fn process_event_row<'a>(session: &'a SessionData, e: &'a Event) -> Option<EventRow<'a>> {
    Some(match e {
        Event::ProcessStart { def, .. } => EventRow::new(
            "process_start",
            Some(def.pid),
            Some(def.device_index),
            def.info.cmdline.clone(),
        )
        .named(&def.info.name, &def.info.user),
        Event::ProcessExit {
            id,
            pid,
            device_index,
            ..
        } => {
            let d = session.def(*id).map(|d| &*d.info);
            EventRow::new(
                "process_exit",
                Some(*pid),
                Some(*device_index),
                String::new(),
            )
            .named(d.map_or("", |i| &i.name), d.map_or("", |i| &i.user))
        }
        _ => return None,
    })
}

/// The row of a leak's start or end.
fn leak_row(e: &Event) -> Option<EventRow<'_>> {
    Some(match e {
        Event::LeakStarted { leak, .. } => EventRow::leak(
            "leak_started",
            leak,
            format!("since {}", rfc3339(leak.since_ms)),
        ),
        Event::LeakEnded {
            leak,
            grown_mib,
            peak_mib,
            ..
        } => EventRow::leak(
            "leak_ended",
            leak,
            format!(
                "grew {grown_mib:.0} MiB since {}, peak {peak_mib:.0} MiB",
                rfc3339(leak.since_ms)
            ),
        ),
        _ => return None,
    })
}

/// The row of an OOM forecast raised or receded.
fn forecast_row(e: &Event) -> Option<EventRow<'_>> {
    Some(match e {
        Event::OomForecast {
            device_index,
            full_in_s,
            drivers,
            ..
        } => EventRow::first_of(
            "oom_forecast",
            drivers,
            *device_index,
            forecast_detail(*device_index, *full_in_s, drivers),
        ),
        Event::OomForecastEnded {
            device_index,
            raised_ms,
            ..
        } => EventRow::new(
            "oom_forecast_ended",
            None,
            Some(*device_index),
            format!("the forecast raised at {} receded", rfc3339(*raised_ms)),
        ),
        _ => return None,
    })
}

/// A rule's (or the user's) action.
fn activity_row(e: &Event) -> Option<EventRow<'_>> {
    let Event::Activity {
        rule,
        pid,
        device_index,
        name,
        user,
        action,
        outcome,
        detail,
        ..
    } = e
    else {
        return None;
    };
    let detail = format!("{rule}: {action}: {}: {detail}", outcome.label());
    Some(EventRow::new("rule_action", Some(*pid), Some(*device_index), detail).named(name, user))
}

/// A park or resume: its action when it went through, `park_failed` when not.
fn park_row(e: &Event) -> Option<EventRow<'_>> {
    let Event::Park {
        pid,
        device_index,
        name,
        action,
        bytes,
        seconds,
        ok,
        detail,
        ..
    } = e
    else {
        return None;
    };
    let detail = format!(
        "{action} {}: {} MiB in {seconds:.1} s: {detail}",
        if *ok { "done" } else { "failed" },
        bytes.map_or_else(|| "?".into(), |b| (b / MIB).to_string())
    );
    let kind = if *ok { action.as_str() } else { "park_failed" };
    Some(EventRow::new(kind, Some(*pid), Some(*device_index), detail).named(name, ""))
}

/// The processes (pid, GPU) that vramwarden parked or resumed itself: their `park` events
/// tell their parks, and their `park_state` events get no row of their own.
fn parks_made(session: &SessionData) -> std::collections::HashSet<(u32, u32)> {
    session
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Park {
                pid, device_index, ..
            } => Some((*pid, *device_index)),
            _ => None,
        })
        .collect()
}

/// A park seen in the samples (a simulated one, or one made elsewhere): `parked` with its
/// bytes in host memory, `resumed` when it is back on its GPU, `park_failed` when the driver
/// holds it in its failed state; no row while it is on its way.
fn park_state_row<'a>(session: &'a SessionData, e: &'a Event) -> Option<EventRow<'a>> {
    let Event::ParkState {
        id,
        pid,
        device_index,
        park,
        ..
    } = e
    else {
        return None;
    };
    let (kind, detail) = match park {
        None => ("resumed", "back on its GPU".to_string()),
        Some(p) => match p.state {
            crate::model::ParkState::Parked => (
                "parked",
                format!(
                    "{} MiB in host memory since {}",
                    p.bytes
                        .map_or_else(|| "?".into(), |b| (b / MIB).to_string()),
                    rfc3339(p.since_ms)
                ),
            ),
            crate::model::ParkState::Failed => {
                ("park_failed", format!("since {}", rfc3339(p.since_ms)))
            }
            _ => return None,
        },
    };
    let d = session.def(*id).map(|d| &*d.info);
    Some(
        EventRow::new(kind, Some(*pid), Some(*device_index), detail)
            .named(d.map_or("", |i| &i.name), d.map_or("", |i| &i.user)),
    )
}

/// "GPU 0 forecast full in 12.5 min; growing: python (PID 7), …".
fn forecast_detail(device_index: u32, full_in_s: f64, drivers: &[super::OomHolder]) -> String {
    format!(
        "GPU {device_index} forecast full in {:.1} min; growing: {}",
        full_in_s / 60.0,
        drivers
            .iter()
            .map(|d| format!("{} (PID {})", d.name, d.pid))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A recording paused, resumed, or resumed after a gap (with what was lost).
fn recording_detail(active: bool, gap: Option<&super::RecordingGap>) -> String {
    match (active, gap) {
        (_, Some(g)) => format!(
            "resumed after a gap: {} sample(s) from {} to {} not written: {}",
            g.lost_samples,
            rfc3339(g.from_ms),
            rfc3339(g.to_ms),
            g.cause
        ),
        (true, None) => "resumed".into(),
        (false, None) => "paused".into(),
    }
}
