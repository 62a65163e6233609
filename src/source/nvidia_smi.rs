//! The CSV logs of `nvidia-smi --query-compute-apps=… --format=csv -l 1` (and optionally
//! `--query-gpu=…`) read as samples, for `vramwarden import nvidia-smi`, which runs the same
//! engine (history, leak detection) over them (`crate::engine::import`).
//!
//! Header names are taken as nvidia-smi writes them, in any order; each log must have the
//! columns of its kind (an apps log given as the GPU log, or the other way round, is refused).
//! Values may carry units (`14 MiB`, `1.5 GiB`, `512 MB`) or not (`--format=csv,nounits`: the
//! header's unit, MiB when it names none); `[N/A]` and `[Not Supported]` are missing readings;
//! timestamps (`2026/12/02 09:40:52.963`) are local time unless told otherwise.
//!
//! Processes are put on GPUs by their `gpu_uuid` (or `gpu_bus_id`): with a GPU log, the GPU of
//! that uuid and its index there; without one, the GPUs are the uuids of the apps log, numbered
//! in order of first appearance. A MIG device's uuid is put on its parent GPU when the bus ids
//! tell which that is. Nothing is guessed: a row that cannot be read or placed is skipped, and
//! [`ReadLogs`] counts the skipped rows per reason with the first line of each, so that
//! rows read = rows used + rows skipped.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use chrono::{NaiveDateTime, TimeZone};

use crate::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, UnixMs};

/// The highest GPU index accepted from a log (a row with a higher one is skipped).
const MAX_GPU_INDEX: u32 = 255;
/// The most process rows kept for one GPU at one time (more are skipped).
const MAX_PROCESSES_PER_GPU: usize = 4096;
/// The largest memory reading accepted (1 PiB); a larger one is skipped as out of range.
pub(crate) const MAX_BYTES: u64 = 1 << 50;
/// How far (ms) an apps log group may be from a GPU log sample to be attached to it.
const MATCH_MS: i64 = 700;

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The CSV is not what nvidia-smi writes.
    #[error("{path}: {why}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// No row could be used: every one was skipped (the reasons are listed).
    #[error("{path}: no usable rows{}", describe_skipped(.skipped))]
    NothingUsable {
        /// The apps log.
        path: String,
        /// The rows skipped, per reason.
        skipped: Vec<Skipped>,
    },
    /// Writing the session failed.
    #[error("{0}")]
    Write(String),
}

fn describe_skipped(skipped: &[Skipped]) -> String {
    skipped.iter().map(|s| format!("; {s}")).collect::<String>()
}

/// How to read the timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The importing machine's local time zone.
    Local,
    /// UTC.
    Utc,
}

/// Which of the two logs a row came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogKind {
    /// The `--query-compute-apps` log (`--apps`).
    Apps,
    /// The `--query-gpu` log (`--gpu`).
    Gpu,
}

impl fmt::Display for LogKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogKind::Apps => "apps log",
            LogKind::Gpu => "GPU log",
        })
    }
}

/// What is wrong with a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValueProblem {
    /// Not a plain decimal number (`1e5`, `-5`, `abc`).
    NotANumber,
    /// A unit this importer does not know.
    UnknownUnit,
    /// Too large to be a real reading.
    OutOfRange,
}

/// Why a row was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    /// The row is not valid UTF-8.
    NotUtf8,
    /// The CSV reader could not read the row.
    NotCsv,
    /// The header line again (logs concatenated).
    RepeatedHeader,
    /// Fewer or more fields than the header (a truncated line, or a comma inside a value).
    FieldCount,
    /// The timestamp is not a date and time like `2026/12/02 09:40:52.963`.
    Timestamp,
    /// The timestamp is before 1970 or after 9999.
    TimeRange,
    /// The row is longer than 64 KiB (no row of an nvidia-smi log is near it).
    TooLong,
    /// The pid is not a plain positive decimal integer.
    Pid,
    /// A value of this column could not be read.
    Value {
        /// The column (as nvidia-smi names it).
        column: &'static str,
        /// What is wrong with it.
        problem: ValueProblem,
    },
    /// The GPU index is not a decimal integer from 0 to [`MAX_GPU_INDEX`].
    GpuIndex,
    /// The row's GPU uuid (or bus id) is empty.
    NoGpuId,
    /// A MIG device uuid in the GPU log (it lists GPUs).
    MigInGpuLog,
    /// The GPU's index, uuid or bus id disagree with an earlier row.
    GpuConflict,
    /// More GPUs than indices 0 to [`MAX_GPU_INDEX`].
    TooManyGpus,
    /// The process's GPU is not in the GPU log.
    UnknownGpu,
    /// A MIG device whose parent GPU the logs do not tell.
    MigParentUnknown,
    /// The same GPU, or the same pid on the same device, twice at one time.
    Duplicate,
    /// More than [`MAX_PROCESSES_PER_GPU`] processes on one GPU at one time.
    TooManyProcesses,
    /// No GPU log sample within 700 ms of the row's time.
    NoGpuSample,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NotUtf8 => f.write_str("not valid UTF-8"),
            SkipReason::NotCsv => f.write_str("not readable as CSV"),
            SkipReason::RepeatedHeader => f.write_str("a repeated header line"),
            SkipReason::FieldCount => f.write_str(
                "not as many fields as the header (a truncated line, or a comma in a value)",
            ),
            SkipReason::Timestamp => {
                f.write_str("timestamp is not like 2026/12/02 09:40:52.963 (or not a valid time)")
            }
            SkipReason::TimeRange => f.write_str("timestamp is before 1970 or after 9999"),
            SkipReason::TooLong => write!(f, "longer than {} KiB", MAX_ROW_BYTES / 1024),
            SkipReason::Pid => f.write_str("pid is not a positive decimal integer"),
            SkipReason::Value { column, problem } => match problem {
                ValueProblem::NotANumber => {
                    write!(f, "{column} is not a plain decimal number")
                }
                ValueProblem::UnknownUnit => write!(
                    f,
                    "{column} has an unknown unit (known: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
                ),
                ValueProblem::OutOfRange => write!(f, "{column} is out of range"),
            },
            SkipReason::GpuIndex => write!(
                f,
                "GPU index is not a decimal integer from 0 to {MAX_GPU_INDEX}"
            ),
            SkipReason::NoGpuId => f.write_str("the GPU uuid (or bus id) is empty"),
            SkipReason::MigInGpuLog => f.write_str("a MIG device uuid (the GPU log lists GPUs)"),
            SkipReason::GpuConflict => {
                f.write_str("GPU index, uuid or bus id disagree with an earlier row")
            }
            SkipReason::TooManyGpus => write!(f, "more than {} GPUs", MAX_GPU_INDEX + 1),
            SkipReason::UnknownGpu => f.write_str("its GPU is not in the GPU log"),
            SkipReason::MigParentUnknown => f.write_str(
                "a MIG device whose parent GPU is not known (log gpu_bus_id with the apps \
                 and pci.bus_id with the GPUs to place it)",
            ),
            SkipReason::Duplicate => {
                f.write_str("a second row for the same GPU, or pid and device, at the same time")
            }
            SkipReason::TooManyProcesses => write!(
                f,
                "more than {MAX_PROCESSES_PER_GPU} processes on one GPU at one time"
            ),
            SkipReason::NoGpuSample => {
                write!(f, "no GPU log sample within {MATCH_MS} ms of its time")
            }
        }
    }
}

/// Longest row read, bytes: a longer one is skipped ([`SkipReason::TooLong`]), so a process
/// name or any other text of an import stays far below what a session record may hold.
pub(crate) const MAX_ROW_BYTES: usize = 64 * 1024;

/// Where [`CappedLines`] cuts a line: twice a row's limit, so what is left of a row cut
/// there is still over the limit once its commas and spaces are trimmed.
const LINE_CUT: usize = 2 * MAX_ROW_BYTES;

/// A log's bytes with every line cut at [`LINE_CUT`] bytes (the rest of it dropped up to its
/// newline): such a row is still longer than a row may be (its fields without their commas
/// and spaces too), and skipped as one, but a line of gigabytes is never held in memory
/// (nvidia-smi's CSV quotes nothing, so a row is a line).
struct CappedLines<R> {
    inner: R,
    /// Bytes of the current line passed on.
    in_line: usize,
}

impl<R: std::io::BufRead> CappedLines<R> {
    fn new(inner: R) -> Self {
        Self { inner, in_line: 0 }
    }
}

impl<R: std::io::BufRead> std::io::Read for CappedLines<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() || out.is_empty() {
                return Ok(0);
            }
            let line_end = buf.iter().position(|b| *b == b'\n');
            let room = LINE_CUT.saturating_sub(self.in_line);
            if room == 0 {
                // Past the cap: drop up to the newline, which is passed on.
                let drop = line_end.unwrap_or(buf.len());
                self.inner.consume(drop);
                if line_end.is_some() {
                    self.in_line = 0;
                    out[0] = b'\n';
                    self.inner.consume(1);
                    return Ok(1);
                }
                continue;
            }
            let want = line_end
                .map_or(buf.len(), |e| e + 1)
                .min(room)
                .min(out.len());
            out[..want].copy_from_slice(&buf[..want]);
            self.inner.consume(want);
            self.in_line = if line_end.is_some_and(|e| want == e + 1) {
                0
            } else {
                self.in_line + want
            };
            return Ok(want);
        }
    }
}

/// Rows of one log skipped for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Which log.
    pub log: LogKind,
    /// Why.
    pub reason: SkipReason,
    /// How many rows.
    pub rows: usize,
    /// The line (1-based, in the file) of the first of them.
    pub first_line: u64,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} row(s) of the {} skipped: {} (first at line {})",
            self.rows, self.log, self.reason, self.first_line
        )
    }
}

/// Skipped rows, counted per (log, reason) with the first line.
#[derive(Default)]
struct Skips(BTreeMap<(LogKind, SkipReason), (usize, u64)>);

impl Skips {
    fn add(&mut self, log: LogKind, reason: SkipReason, line: u64, rows: usize) {
        let e = self.0.entry((log, reason)).or_insert((0, line));
        e.0 += rows;
        e.1 = e.1.min(line);
    }

    fn total(&self) -> usize {
        self.0.values().map(|(n, _)| n).sum()
    }

    fn to_vec(&self) -> Vec<Skipped> {
        self.0
            .iter()
            .map(|(&(log, reason), &(rows, first_line))| Skipped {
                log,
                reason,
                rows,
                first_line,
            })
            .collect()
    }
}

/// A header column: its name (lower case, unit stripped) and the unit in brackets, if any.
struct Col {
    name: String,
    unit: Option<String>,
}

fn column(h: &str) -> Col {
    // "used_gpu_memory [MiB]" → ("used_gpu_memory", "MiB"); "memory.used" → ("memory.used", None).
    let h = h.trim();
    let (name, unit) = match h.split_once(" [") {
        Some((n, rest)) => (n, rest.strip_suffix(']').map(|u| u.trim().to_string())),
        None => (h, None),
    };
    Col {
        name: name.trim().to_lowercase(),
        unit,
    }
}

/// A row that has the header's number of fields, in valid UTF-8.
struct Row {
    line: u64,
    fields: Vec<String>,
}

impl Row {
    fn get(&self, c: Option<usize>) -> Option<&str> {
        c.and_then(|c| self.fields.get(c)).map(String::as_str)
    }
}

struct Table {
    path: String,
    cols: Vec<Col>,
    rows: Vec<Row>,
    /// Data records read (every one is in `rows` or was counted as skipped).
    read: usize,
}

impl Table {
    fn read(path: &Path, log: LogKind, skips: &mut Skips) -> Result<Self, ImportError> {
        let p = path.display().to_string();
        // Read as it goes: a log of gigabytes never lies in memory whole.
        let file = std::fs::File::open(path).map_err(|source| ImportError::Io {
            path: p.clone(),
            source,
        })?;
        let mut r = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .from_reader(CappedLines::new(std::io::BufReader::new(file)));
        let cols: Vec<Col> = r
            .byte_headers()
            .map_err(|e| ImportError::Format {
                path: p.clone(),
                why: e.to_string(),
            })?
            .iter()
            .map(|h| column(&String::from_utf8_lossy(h)))
            .collect();
        let mut rows = Vec::new();
        let mut read = 0;
        let mut rec = csv::ByteRecord::new();
        loop {
            let line = r.position().line();
            match r.read_byte_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    if matches!(e.kind(), csv::ErrorKind::Io(_)) {
                        // The file itself could not be read on: said as such, not a row.
                        if let csv::ErrorKind::Io(source) = e.into_kind() {
                            return Err(ImportError::Io { path: p, source });
                        }
                        break;
                    }
                    read += 1;
                    let line = e.position().map_or(line, csv::Position::line);
                    skips.add(log, SkipReason::NotCsv, line, 1);
                    continue;
                }
            }
            read += 1;
            let line = rec.position().map_or(line, csv::Position::line);
            if rec.as_slice().len() > MAX_ROW_BYTES {
                skips.add(log, SkipReason::TooLong, line, 1);
                continue;
            }
            let fields: Option<Vec<String>> = rec
                .iter()
                .map(|f| std::str::from_utf8(f).ok().map(str::to_string))
                .collect();
            match Self::check(&cols, fields) {
                Ok(fields) => rows.push(Row { line, fields }),
                Err(reason) => skips.add(log, reason, line, 1),
            }
        }
        Ok(Self {
            path: p,
            cols,
            rows,
            read,
        })
    }

    /// The row's fields, or why it is skipped.
    fn check(cols: &[Col], fields: Option<Vec<String>>) -> Result<Vec<String>, SkipReason> {
        let fields = fields.ok_or(SkipReason::NotUtf8)?;
        if fields.len() != cols.len() {
            return Err(SkipReason::FieldCount);
        }
        if fields
            .iter()
            .zip(cols)
            .all(|(f, c)| column(f).name == c.name)
        {
            return Err(SkipReason::RepeatedHeader);
        }
        Ok(fields)
    }

    fn col(&self, names: &[&str]) -> Option<usize> {
        names
            .iter()
            .find_map(|n| self.cols.iter().position(|c| c.name == *n))
    }

    fn unit(&self, c: Option<usize>) -> Option<&str> {
        c.and_then(|c| self.cols.get(c))
            .and_then(|c| c.unit.as_deref())
    }

    /// The header's column names as an error shows them: none of a binary file's bytes, and
    /// at most 200 characters of a text one.
    fn names(&self) -> String {
        let all = self
            .cols
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        if all
            .chars()
            .any(|c| c == '\u{FFFD}' || (c.is_control() && c != '\t'))
        {
            return "none (its first line is not text: is it a CSV log?)".into();
        }
        if all.trim().is_empty() {
            return "none (the file is empty)".into();
        }
        match all.char_indices().nth(200) {
            Some((cut, _)) => format!("{}…", &all[..cut]),
            None => all,
        }
    }

    /// Refuses the file unless it has each group of columns (one name of each group).
    fn require(&self, what: &str, groups: &[&[&str]]) -> Result<(), ImportError> {
        let missing: Vec<String> = groups
            .iter()
            .filter(|g| self.col(g).is_none())
            .map(|g| g.join(" or "))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let hint = match (what, self.col(&["pid"])) {
            ("--query-gpu", Some(_)) => " (it looks like a --query-compute-apps log)",
            ("--query-compute-apps", None) if self.col(&["memory.used", "uuid"]).is_some() => {
                " (it looks like a --query-gpu log)"
            }
            _ => "",
        };
        Err(ImportError::Format {
            path: self.path.clone(),
            why: format!(
                "not an nvidia-smi {what} log{hint}: missing column(s) {}; columns are: {}",
                missing.join(", "),
                self.names()
            ),
        })
    }
}

/// A reading: `Ok(None)` when missing (`[N/A]`, empty), else the number and its unit.
fn reading(v: &str) -> Result<Option<(&str, &str)>, ValueProblem> {
    let v = v.trim();
    if v.is_empty() || v.starts_with('[') || v.eq_ignore_ascii_case("n/a") {
        return Ok(None);
    }
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(end);
    let unit = unit.trim();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let plain = match num.split_once('.') {
        Some((i, f)) => digits(i) && digits(f),
        None => digits(num),
    };
    // "1e5", "-5", "1.2.3", "1 5", "abc" are not plain numbers (units have no digits).
    if !plain || unit.bytes().any(|b| b.is_ascii_digit()) {
        return Err(ValueProblem::NotANumber);
    }
    Ok(Some((num, unit)))
}

fn unit_bytes(unit: &str) -> Option<u128> {
    Some(match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    })
}

/// A memory reading in bytes, exact for the binary units; no unit means the header's (MiB
/// when it names none).
fn bytes(v: &str, header_unit: Option<&str>) -> Result<Option<u64>, ValueProblem> {
    let Some((num, unit)) = reading(v)? else {
        return Ok(None);
    };
    let unit = if unit.is_empty() {
        header_unit.unwrap_or("MiB")
    } else {
        unit
    };
    let mult = unit_bytes(unit).ok_or(ValueProblem::UnknownUnit)?;
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    let digits = format!("{int}{frac}");
    if digits.len() > 30 {
        return Err(ValueProblem::OutOfRange);
    }
    let n: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| ValueProblem::NotANumber)?
    };
    let scale = 10u128
        .checked_pow(u32::try_from(frac.len()).map_err(|_| ValueProblem::OutOfRange)?)
        .ok_or(ValueProblem::OutOfRange)?;
    let b = n
        .checked_mul(mult)
        .and_then(|x| x.checked_add(scale / 2))
        .map(|x| x / scale)
        .ok_or(ValueProblem::OutOfRange)?;
    match u64::try_from(b) {
        Ok(b) if b <= MAX_BYTES => Ok(Some(b)),
        _ => Err(ValueProblem::OutOfRange),
    }
}

/// A plain reading (percent, degrees, watts) whose unit, if any, is one of `units`.
fn scalar(v: &str, units: &[&str]) -> Result<Option<f64>, ValueProblem> {
    let Some((num, unit)) = reading(v)? else {
        return Ok(None);
    };
    if !unit.is_empty() && !units.contains(&unit) {
        return Err(ValueProblem::UnknownUnit);
    }
    let x: f64 = num.parse().map_err(|_| ValueProblem::NotANumber)?;
    if x.is_finite() && x <= f64::from(u32::MAX) {
        Ok(Some(x))
    } else {
        Err(ValueProblem::OutOfRange)
    }
}

/// A plain positive decimal integer that fits a pid.
fn pid(v: &str) -> Option<u32> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u32>().ok().filter(|p| *p > 0)
}

/// A GPU index: a plain decimal integer up to [`MAX_GPU_INDEX`].
fn gpu_index(v: &str) -> Option<u32> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u32>().ok().filter(|i| *i <= MAX_GPU_INDEX)
}

/// The latest time accepted: 9999-12-31 23:59:59.999 UTC.
const MAX_TIME_MS: UnixMs = 253_402_300_799_999;

/// A timestamp as nvidia-smi writes it, from 1970 to 9999 (session logs keep no earlier times).
fn time_ms(v: Option<&str>, zone: Zone) -> Result<UnixMs, SkipReason> {
    let v = v.unwrap_or("").trim();
    let t = NaiveDateTime::parse_from_str(v, "%Y/%m/%d %H:%M:%S%.f")
        .map_err(|_| SkipReason::Timestamp)?;
    let ms = match zone {
        Zone::Utc => Some(t.and_utc().timestamp_millis()),
        Zone::Local => chrono::Local
            .from_local_datetime(&t)
            .earliest()
            .map(|t| t.timestamp_millis()),
    }
    .ok_or(SkipReason::Timestamp)?;
    if (0..=MAX_TIME_MS).contains(&ms) {
        Ok(ms)
    } else {
        Err(SkipReason::TimeRange)
    }
}

fn bus_key(v: &str) -> String {
    v.trim().to_ascii_uppercase()
}

fn is_mig(uuid: &str) -> bool {
    uuid.starts_with("MIG-")
}

/// The GPU log read: samples per time, and which index each uuid and bus id has.
#[derive(Default)]
struct GpuLog {
    ticks: BTreeMap<UnixMs, Vec<DeviceSample>>,
    by_uuid: BTreeMap<String, u32>,
    by_bus: BTreeMap<String, u32>,
    /// index → (uuid, bus id) as first seen.
    owner: BTreeMap<u32, (String, String)>,
    used: usize,
}

impl GpuLog {
    fn read(t: &Table, zone: Zone, skips: &mut Skips) -> Self {
        let mut g = GpuLog::default();
        for row in &t.rows {
            match g.row(t, row, zone) {
                Ok(()) => g.used += 1,
                Err(reason) => skips.add(LogKind::Gpu, reason, row.line, 1),
            }
        }
        g
    }

    fn row(&mut self, t: &Table, row: &Row, zone: Zone) -> Result<(), SkipReason> {
        let cells = GpuCells { t, row };
        let ts = time_ms(cells.get("timestamp"), zone)?;
        let uuid = cells.get("uuid").unwrap_or("").to_string();
        let bus = cells.get("pci.bus_id").map(bus_key).unwrap_or_default();
        if uuid.is_empty() && bus.is_empty() {
            return Err(SkipReason::NoGpuId);
        }
        if is_mig(&uuid) {
            return Err(SkipReason::MigInGpuLog);
        }
        let index = self.index_for(cells.get("index"), &uuid, &bus)?;
        let sample = cells.device_sample(index, &uuid)?;
        let tick = self.ticks.entry(ts).or_default();
        if tick.iter().any(|d| d.index == index) {
            return Err(SkipReason::Duplicate);
        }
        tick.push(sample);
        self.owner
            .entry(index)
            .or_insert_with(|| (uuid.clone(), bus.clone()));
        if !uuid.is_empty() {
            self.by_uuid.entry(uuid).or_insert(index);
        }
        if !bus.is_empty() {
            self.by_bus.entry(bus).or_insert(index);
        }
        Ok(())
    }

    /// The index of the GPU a row is about: its `index` column (`column`), else the index its
    /// uuid or bus id already has, else the next one; an error where that disagrees with the
    /// uuid and bus id earlier rows gave that index, or the indexes earlier rows gave them.
    fn index_for(&self, column: Option<&str>, uuid: &str, bus: &str) -> Result<u32, SkipReason> {
        let known = self
            .by_uuid
            .get(uuid)
            .or_else(|| self.by_bus.get(bus))
            .copied();
        let index = match column {
            Some(v) => gpu_index(v).ok_or(SkipReason::GpuIndex)?,
            None => match known {
                Some(i) => i,
                None => u32::try_from(self.owner.len())
                    .ok()
                    .filter(|i| *i <= MAX_GPU_INDEX)
                    .ok_or(SkipReason::TooManyGpus)?,
            },
        };
        let conflict = self
            .owner
            .get(&index)
            .is_some_and(|(u, b)| u != uuid || b != bus)
            || (!uuid.is_empty() && self.by_uuid.get(uuid).is_some_and(|i| *i != index))
            || (!bus.is_empty() && self.by_bus.get(bus).is_some_and(|i| *i != index));
        if conflict {
            return Err(SkipReason::GpuConflict);
        }
        Ok(index)
    }
}

/// One row of a GPU log with its table, read by column name.
struct GpuCells<'a> {
    t: &'a Table,
    row: &'a Row,
}

impl<'a> GpuCells<'a> {
    /// The text in `column`, if the table has it.
    fn get(&self, column: &str) -> Option<&'a str> {
        self.row.get(self.t.col(&[column]))
    }

    /// The bytes in `column` (its unit from the value or the header); a value that does not
    /// parse is a reason to skip the row.
    fn bytes(&self, column: &'static str) -> Result<Option<u64>, SkipReason> {
        let col = self.t.col(&[column]);
        self.row
            .get(col)
            .map_or(Ok(None), |v| bytes(v, self.t.unit(col)))
            .map_err(|problem| SkipReason::Value { column, problem })
    }

    /// The number in `column`, in one of `units`; a value that does not parse is a reason to
    /// skip the row.
    fn scalar(&self, column: &'static str, units: &[&str]) -> Result<Option<f64>, SkipReason> {
        self.get(column)
            .map_or(Ok(None), |v| scalar(v, units))
            .map_err(|problem| SkipReason::Value { column, problem })
    }

    /// An extra a query may hold: read when it parses, never a reason to skip the row.
    fn extra(&self, column: &'static str, units: &[&str]) -> Option<f64> {
        self.scalar(column, units).ok().flatten()
    }

    /// The row as GPU `index`'s sample (`uuid` as read).
    fn device_sample(&self, index: u32, uuid: &str) -> Result<DeviceSample, SkipReason> {
        let (total, used, reserved, free) = (
            self.bytes("memory.total")?,
            self.bytes("memory.used")?,
            self.bytes("memory.reserved")?,
            self.bytes("memory.free")?,
        );
        let util = self.scalar("utilization.gpu", &["%"])?;
        let temp = self.scalar("temperature.gpu", &["C"])?;
        let power = self.scalar("power.draw", &["W"])?;
        let w = &["W"];
        let power_limit = self
            .extra("enforced.power.limit", w)
            .or(self.extra("power.limit", w));
        let mhz = &["MHz"];
        let sm_clock = self
            .extra("clocks.sm", mhz)
            .or(self.extra("clocks.current.sm", mhz));
        let mem_clock = self
            .extra("clocks.mem", mhz)
            .or(self.extra("clocks.current.memory", mhz));
        let fan = self.extra("fan.speed", &["%"]);
        Ok(DeviceSample {
            index,
            uuid: uuid.to_string(),
            name: self.get("name").unwrap_or("").to_string(),
            pci_bus_id: self.get("pci.bus_id").map(str::to_string),
            memory_total_bytes: total,
            memory_used_bytes: used,
            memory_reserved_bytes: reserved,
            memory_free_bytes: free,
            utilization_gpu_pct: util.map(|x| x.round() as u32),
            temperature_c: temp.map(|x| x.round() as u32),
            power_w: power,
            power_limit_w: power_limit,
            sm_clock_mhz: sm_clock.map(|x| x.round() as u32),
            mem_clock_mhz: mem_clock.map(|x| x.round() as u32),
            fan_pct: fan.map(|x| x.round() as u32).filter(|f| *f <= 100),
            process_list_error: None,
            time_to_full_s: None,
            time_to_full_earliest_s: None,
        })
    }
}

/// How apps rows are put on GPUs.
enum Placement<'a> {
    /// By the GPU log's uuids (`by_uuid`) or bus ids.
    Log {
        /// The GPU log.
        log: &'a GpuLog,
        /// Match `gpu_uuid` against `uuid` (else `gpu_bus_id` against `pci.bus_id`).
        by_uuid: bool,
    },
    /// GPUs discovered from the apps log (uuid or bus id), numbered in order of appearance.
    Discover {
        /// The GPU ids (uuid, or bus id when the apps log has no uuid) in order.
        ids: Vec<String>,
        /// Bus id → parent GPU uuid, from the apps rows that carry both (for MIG devices).
        parents: BTreeMap<String, String>,
    },
    /// Every row on this GPU (the apps log names none, and there is at most one).
    Fixed(u32),
}

impl Placement<'_> {
    /// The device index of an apps row from its uuid and bus id, and the id it came under
    /// (MIG instances of one GPU differ in it).
    fn place(&mut self, uuid: Option<&str>, bus: &str) -> Result<(u32, String), SkipReason> {
        let id = uuid.unwrap_or(bus).to_string();
        match self {
            Placement::Fixed(i) => Ok((*i, id)),
            Placement::Log { log, by_uuid } => {
                let found = match uuid {
                    Some("") => return Err(SkipReason::NoGpuId),
                    Some(u) if is_mig(u) => {
                        return log
                            .by_bus
                            .get(bus)
                            .map(|i| (*i, id))
                            .ok_or(SkipReason::MigParentUnknown)
                    }
                    Some(u) if *by_uuid => log.by_uuid.get(u),
                    _ if bus.is_empty() => return Err(SkipReason::NoGpuId),
                    _ => log.by_bus.get(bus),
                };
                found.map(|i| (*i, id)).ok_or(SkipReason::UnknownGpu)
            }
            Placement::Discover { ids, parents } => {
                if id.is_empty() {
                    return Err(SkipReason::NoGpuId);
                }
                let key = if is_mig(&id) {
                    parents
                        .get(bus)
                        .cloned()
                        .ok_or(SkipReason::MigParentUnknown)?
                } else {
                    id.clone()
                };
                let i = match ids.iter().position(|k| *k == key) {
                    Some(i) => i,
                    None if ids.len() <= MAX_GPU_INDEX as usize => {
                        ids.push(key);
                        ids.len() - 1
                    }
                    None => return Err(SkipReason::TooManyGpus),
                };
                let i = u32::try_from(i).map_err(|_| SkipReason::TooManyGpus)?;
                Ok((i, id))
            }
        }
    }
}

/// The processes of the apps log at one time.
#[derive(Default)]
struct AppTick {
    procs: Vec<ProcessSample>,
    /// (pid, device, id) already seen, for duplicates.
    seen: HashSet<(u32, u32, String)>,
    rows: usize,
    first_line: u64,
}

impl AppTick {
    fn add(&mut self, p: ProcessSample, id: String, line: u64) -> Result<(), SkipReason> {
        let key = (p.pid, p.device_index, id);
        if self.seen.contains(&key) {
            return Err(SkipReason::Duplicate);
        }
        // Another MIG instance of the same GPU: its memory adds to the same process.
        if let Some(q) = self
            .procs
            .iter_mut()
            .find(|q| q.pid == p.pid && q.device_index == p.device_index)
        {
            q.used_bytes = match (q.used_bytes, p.used_bytes) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            };
        } else {
            let on_device = self
                .procs
                .iter()
                .filter(|q| q.device_index == p.device_index)
                .count();
            if on_device >= MAX_PROCESSES_PER_GPU {
                return Err(SkipReason::TooManyProcesses);
            }
            self.procs.push(p);
        }
        self.seen.insert(key);
        if self.rows == 0 {
            self.first_line = line;
        }
        self.rows += 1;
        Ok(())
    }
}

/// Reads the apps log's rows into groups per time.
struct AppsReader<'t> {
    table: &'t Table,
    zone: Zone,
    time: Option<usize>,
    pid: Option<usize>,
    used: Option<usize>,
    used_name: &'static str,
    name: Option<usize>,
    uuid: Option<usize>,
    bus: Option<usize>,
    infos: BTreeMap<(u32, String), Arc<ProcInfo>>,
    ticks: BTreeMap<UnixMs, AppTick>,
}

impl<'t> AppsReader<'t> {
    fn new(table: &'t Table, zone: Zone) -> Self {
        let c = |n: &[&str]| table.col(n);
        Self {
            table,
            zone,
            time: c(&["timestamp"]),
            pid: c(&["pid"]),
            used: c(&["used_gpu_memory", "used_memory"]),
            used_name: if c(&["used_gpu_memory"]).is_some() {
                "used_gpu_memory"
            } else {
                "used_memory"
            },
            name: c(&["process_name", "name"]),
            uuid: c(&["gpu_uuid"]),
            bus: c(&["gpu_bus_id"]),
            infos: BTreeMap::new(),
            ticks: BTreeMap::new(),
        }
    }

    /// Reads every row, counting the skipped ones.
    fn read(
        mut self,
        placement: &mut Placement<'_>,
        skips: &mut Skips,
    ) -> BTreeMap<UnixMs, AppTick> {
        let table = self.table;
        for row in &table.rows {
            if let Err(reason) = self.row(row, placement) {
                skips.add(LogKind::Apps, reason, row.line, 1);
            }
        }
        self.ticks
    }

    fn row(&mut self, row: &Row, placement: &mut Placement<'_>) -> Result<(), SkipReason> {
        let ts = time_ms(row.get(self.time), self.zone)?;
        let pid = row.get(self.pid).and_then(pid).ok_or(SkipReason::Pid)?;
        let used = row
            .get(self.used)
            .map_or(Ok(None), |v| bytes(v, self.table.unit(self.used)))
            .map_err(|problem| SkipReason::Value {
                column: self.used_name,
                problem,
            })?;
        let bus = row.get(self.bus).map(bus_key).unwrap_or_default();
        let (device_index, id) = placement.place(row.get(self.uuid), &bus)?;
        let name = row.get(self.name).unwrap_or("?").to_string();
        let info = self
            .infos
            .entry((pid, name.clone()))
            .or_insert_with(|| {
                let mut short = name.rsplit('/').next().unwrap_or(&name).to_string();
                crate::model::cut_text(&mut short, crate::model::MAX_PROC_TEXT);
                Arc::new(ProcInfo {
                    name: short,
                    cmdline: name.clone(),
                    ..ProcInfo::default()
                })
            })
            .clone();
        let p = ProcessSample::recorded(pid, device_index, used, Some(info));
        self.ticks.entry(ts).or_default().add(p, id, row.line)
    }
}

/// Bus id → parent uuid, from apps rows that carry a GPU (not MIG) uuid and a bus id.
fn mig_parents(at: &Table) -> BTreeMap<String, String> {
    let (Some(u), Some(b)) = (at.col(&["gpu_uuid"]), at.col(&["gpu_bus_id"])) else {
        return BTreeMap::new();
    };
    let mut parents = BTreeMap::new();
    for row in &at.rows {
        if let (Some(uuid), Some(bus)) = (row.get(Some(u)), row.get(Some(b))) {
            if !uuid.is_empty() && !is_mig(uuid) && !bus.trim().is_empty() {
                parents
                    .entry(bus_key(bus))
                    .or_insert_with(|| uuid.to_string());
            }
        }
    }
    parents
}

/// The samples to write, and the rows that went into them.
struct Built {
    snaps: Vec<Snapshot>,
    rows_used: usize,
}

/// Attaches to each GPU log sample the nearest apps group within [`MATCH_MS`]; the apps
/// groups attached to none are skipped.
fn with_gpu_log(g: GpuLog, apps: BTreeMap<UnixMs, AppTick>, skips: &mut Skips) -> Built {
    let app_times: Vec<UnixMs> = apps.keys().copied().collect();
    let mut attached: BTreeSet<UnixMs> = BTreeSet::new();
    let mut snaps = Vec::with_capacity(g.ticks.len());
    for (t, devices) in g.ticks {
        let i = app_times.partition_point(|a| *a < t);
        let near = [i.checked_sub(1), Some(i)]
            .into_iter()
            .flatten()
            .filter_map(|j| app_times.get(j))
            .min_by_key(|a| a.abs_diff(t))
            .filter(|a| a.abs_diff(t) <= MATCH_MS.unsigned_abs());
        let processes = near
            .and_then(|a| {
                attached.insert(*a);
                apps.get(a)
            })
            .map(|a| a.procs.clone())
            .unwrap_or_default();
        snaps.push(Snapshot {
            taken_at_ms: t,
            devices,
            processes,
        });
    }
    let mut rows_used = g.used;
    for (t, a) in &apps {
        if attached.contains(t) {
            rows_used += a.rows;
        } else {
            skips.add(LogKind::Apps, SkipReason::NoGpuSample, a.first_line, a.rows);
        }
    }
    Built { snaps, rows_used }
}

/// One sample per apps group, with the GPUs discovered from the apps log.
fn apps_only(devices: &[DeviceSample], apps: BTreeMap<UnixMs, AppTick>) -> Built {
    let rows_used = apps.values().map(|a| a.rows).sum();
    let snaps = apps
        .into_iter()
        .map(|(t, a)| Snapshot {
            taken_at_ms: t,
            devices: devices.to_vec(),
            processes: a.procs,
        })
        .collect();
    Built { snaps, rows_used }
}

/// Without a GPU log: the GPUs are the apps log's, in order of first appearance.
fn build_apps_only(at: &Table, zone: Zone, skips: &mut Skips) -> Built {
    let has_uuid = at.col(&["gpu_uuid"]).is_some();
    let has_bus = at.col(&["gpu_bus_id"]).is_some();
    let mut placement = if has_uuid || has_bus {
        Placement::Discover {
            ids: Vec::new(),
            parents: mig_parents(at),
        }
    } else {
        Placement::Fixed(0)
    };
    let ticks = AppsReader::new(at, zone).read(&mut placement, skips);
    let devices: Vec<DeviceSample> = match placement {
        Placement::Discover { ids, .. } => (0u32..)
            .zip(ids)
            .map(|(index, id)| DeviceSample {
                index,
                uuid: if has_uuid { id.clone() } else { String::new() },
                pci_bus_id: (!has_uuid).then_some(id),
                ..DeviceSample::default()
            })
            .collect(),
        _ => vec![DeviceSample::default()],
    };
    apps_only(&devices, ticks)
}

/// With a GPU log: processes on the GPU log's GPUs, matched by uuid (or bus id).
fn build_with_gpu_log(
    at: &Table,
    gt: &Table,
    zone: Zone,
    skips: &mut Skips,
) -> Result<Built, ImportError> {
    gt.require(
        "--query-gpu",
        &[&["timestamp"], &["uuid", "pci.bus_id"], &["memory.used"]],
    )?;
    let has_uuid = at.col(&["gpu_uuid"]).is_some();
    let has_bus = at.col(&["gpu_bus_id"]).is_some();
    let gpu_uuid = gt.col(&["uuid"]).is_some();
    let gpu_bus = gt.col(&["pci.bus_id"]).is_some();
    if (has_uuid || has_bus) && !(has_uuid && gpu_uuid) && !(has_bus && gpu_bus) {
        return Err(ImportError::Format {
            path: gt.path.clone(),
            why: format!(
                "cannot tell which GPU each process is on: the apps log has {}, the GPU log \
                 has {}",
                if has_uuid { "gpu_uuid" } else { "gpu_bus_id" },
                if gpu_uuid { "uuid" } else { "pci.bus_id" },
            ),
        });
    }
    let log = GpuLog::read(gt, zone, skips);
    let ticks = {
        let mut placement = if has_uuid || has_bus {
            Placement::Log {
                log: &log,
                by_uuid: has_uuid && gpu_uuid,
            }
        } else if log.owner.len() <= 1 {
            Placement::Fixed(log.owner.keys().next().copied().unwrap_or(0))
        } else {
            return Err(ImportError::Format {
                path: at.path.clone(),
                why: format!(
                    "no gpu_uuid or gpu_bus_id column, and the GPU log has {} GPUs: cannot \
                     tell which GPU each process is on",
                    log.owner.len()
                ),
            });
        };
        AppsReader::new(at, zone).read(&mut placement, skips)
    };
    Ok(with_gpu_log(log, ticks, skips))
}

/// Rows of `t` whose time is earlier than that of the row before them (a clock set back, logs
/// concatenated out of order, or a crafted log jumping between 1970 and 9999).
fn rows_back_in_time(t: &Table, zone: Zone) -> usize {
    let c = t.col(&["timestamp"]);
    let mut prev = None;
    let mut n = 0;
    for row in &t.rows {
        if let Ok(ts) = time_ms(row.get(c), zone) {
            n += usize::from(prev.is_some_and(|p| ts < p));
            prev = Some(ts);
        }
    }
    n
}

/// Reads the logs into samples, counting every row read, used or skipped.
fn build(
    apps: &Path,
    gpu: Option<&Path>,
    zone: Zone,
    skips: &mut Skips,
) -> Result<(Built, usize, usize), ImportError> {
    let at = Table::read(apps, LogKind::Apps, skips)?;
    at.require(
        "--query-compute-apps",
        &[
            &["timestamp"],
            &["pid"],
            &["used_gpu_memory", "used_memory"],
        ],
    )?;
    match gpu {
        None => {
            let back = rows_back_in_time(&at, zone);
            Ok((build_apps_only(&at, zone, skips), at.read, back))
        }
        Some(g) => {
            let gt = Table::read(g, LogKind::Gpu, skips)?;
            let back = rows_back_in_time(&at, zone) + rows_back_in_time(&gt, zone);
            let built = build_with_gpu_log(&at, &gt, zone, skips)?;
            Ok((built, at.read + gt.read, back))
        }
    }
}

/// The samples read from the logs, with their rows counted.
#[derive(Debug)]
pub(crate) struct ReadLogs {
    /// The samples, oldest first (never empty).
    pub snaps: Vec<Snapshot>,
    /// Data rows read, of both logs (header lines not counted).
    pub rows_read: usize,
    /// Rows that went into the samples.
    pub rows_used: usize,
    /// Rows skipped, of both logs (the sum of `skipped`).
    pub bad_rows: usize,
    /// The skipped rows per log and reason, in that order.
    pub skipped: Vec<Skipped>,
    /// Rows earlier than the row before them in their log (see [`rows_back_in_time`]).
    pub back_in_time: usize,
}

/// Reads the logs into samples.
///
/// # Errors
/// When a file cannot be read, is not the log it is given as (lacks its columns), or has no
/// usable row. Rows that cannot be read or placed on a GPU are skipped and counted, not errors.
pub(crate) fn read_logs(
    apps: &Path,
    gpu: Option<&Path>,
    zone: Zone,
) -> Result<ReadLogs, ImportError> {
    let mut skips = Skips::default();
    let (built, rows_read, back_in_time) = build(apps, gpu, zone, &mut skips)?;
    let Built { snaps, rows_used } = built;
    if snaps.is_empty() {
        return Err(ImportError::NothingUsable {
            path: apps.display().to_string(),
            skipped: skips.to_vec(),
        });
    }
    Ok(ReadLogs {
        snaps,
        rows_read,
        rows_used,
        bad_rows: skips.total(),
        skipped: skips.to_vec(),
        back_in_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A line of megabytes reaches the CSV reader cut past the row limit (so it is still
    /// skipped as too long), its newline and the lines after it whole.
    #[test]
    fn a_huge_line_is_cut_and_the_next_lines_pass_whole() {
        let text = format!("h,i\n{}\nb,c\nd,e", "a".repeat(3 << 20));
        // A small buffer, so lines cross reads.
        let mut r = CappedLines::new(std::io::BufReader::with_capacity(1000, text.as_bytes()));
        let mut out = Vec::new();
        r.read_to_end(&mut out).expect("read");
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 4, "{}", out.len());
        assert_eq!(lines[0], b"h,i");
        assert_eq!(lines[1].len(), LINE_CUT);
        assert_eq!(lines[2], b"b,c");
        assert_eq!(lines[3], b"d,e");
    }
}
