//! A background poller for the engine: one thread keeps a connection to every companion, to
//! which each pushes its figures once per interval, so a tick only reads a map (no socket I/O
//! on the sampler's path, and a hung companion costs the engine nothing).
//!
//! One user's slow or hostile companions never blind the poller to everyone else's: new
//! companions are connected to in parallel ([`OPEN_THREADS`] at a time, each step bounded by
//! the client's timeout), reading pushed figures never waits, and a companion that failed is
//! tried again only after a back-off that doubles per failure ([`Backoff`], up to
//! [`MAX_BACKOFF`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::client::{Client, Pushed, Subscribed, DEFAULT_TIMEOUT};
use super::protocol::TorchFacts;
use super::sockets::list_sockets;
use crate::model::UnixMs;

/// How many intervals apart the poller looks for new companions' folders (new sockets in
/// known folders are found at every poll).
const RESCAN_EVERY: u32 = 10;
/// With no companion anywhere (no socket in any folder, no connection), the poller polls this
/// many intervals apart: there is nothing to read until one starts, and an empty poll's
/// wake-up is most of its cost (45–60 µs). A companion that starts is then found within this
/// many intervals (5 s at the engine's 1 s).
const IDLE_EVERY: u32 = 5;

/// What the poller last saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchState {
    /// Facts per pid, from companions that passed the peer checks.
    pub facts: HashMap<u32, TorchFacts>,
    /// Sockets refused or not answering, per pid: the reason.
    pub refused: HashMap<u32, String>,
    /// Completed polls.
    pub polls: u64,
    /// CPU time the poller thread has used so far, µs (its own cost, for `torch watch-cost`).
    pub cpu_us: u64,
    /// Companions asked, summed over the polls.
    pub asked: u64,
}

/// The poller; dropping it stops its thread.
#[derive(Debug)]
pub struct Watch {
    state: Arc<Mutex<WatchState>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The companions' folders this process may read: its own ([`super::sockets::runtime_dir`]) and, when
/// it runs as root, every user's (`/run/user/*/vramwarden`, `/tmp/vramwarden-*`).
pub(crate) fn all_runtime_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = super::sockets::runtime_dir().into_iter().collect();
    if nix::unistd::geteuid().is_root() {
        if let Ok(users) = std::fs::read_dir("/run/user") {
            dirs.extend(users.flatten().map(|u| u.path().join("vramwarden")));
        }
        if let Ok(tmp) = std::fs::read_dir("/tmp") {
            dirs.extend(
                tmp.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("vramwarden-"))
                    .map(|e| e.path()),
            );
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs.retain(|d| d.is_dir());
    dirs
}

/// A folder's listing: its modification time and when it was read, and its sockets.
#[derive(Debug)]
struct FolderListing {
    mtime: Option<std::time::SystemTime>,
    read_at: Instant,
    sockets: Vec<(u32, PathBuf)>,
}

/// A listing is read again after this long even when the folder's time says nothing moved.
const RELIST_EVERY: Duration = Duration::from_secs(10);
/// A folder changed this recently may change again within the same timestamp tick (coarse
/// file-system clocks): it is listed again at every poll until it has been quiet this long.
const SETTLE: Duration = Duration::from_secs(2);

/// The sockets of each folder, listed again only when the folder changed (its mtime moves when
/// a socket is made or removed), after a failure (a companion killed with SIGKILL leaves its
/// socket behind, and the full listing removes it), and every [`RELIST_EVERY`].
#[derive(Debug, Default)]
struct Listing {
    dirs: HashMap<PathBuf, FolderListing>,
    /// Set when a connection failed: the next poll lists every folder again.
    stale: bool,
    /// The socket of each pid over all folders (where two have one: the one in the folder of
    /// the process's owner, else the first),
    /// made again only when a folder was listed again.
    seen: HashMap<u32, PathBuf>,
}

impl Listing {
    /// Lists again the folders that may have changed; [`Listing::seen`] is then up to date.
    fn refresh(&mut self, dirs: &[PathBuf]) {
        let stale = std::mem::take(&mut self.stale);
        let before = self.dirs.len();
        self.dirs.retain(|d, _| dirs.contains(d));
        let mut changed = self.dirs.len() != before;
        let now = Instant::now();
        for d in dirs {
            let mtime = std::fs::metadata(d).and_then(|m| m.modified()).ok();
            let recent = mtime
                .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
                .is_none_or(|age| age < SETTLE);
            let fresh = |l: &FolderListing| {
                !stale
                    && !recent
                    && mtime.is_some()
                    && l.mtime == mtime
                    && now.duration_since(l.read_at) < RELIST_EVERY
            };
            if !self.dirs.get(d).is_some_and(fresh) {
                let sockets = list_sockets(d);
                changed |= self.dirs.get(d).is_none_or(|l| l.sockets != sockets);
                let l = FolderListing {
                    mtime,
                    read_at: now,
                    sockets,
                };
                self.dirs.insert(d.clone(), l);
            }
        }
        if changed {
            self.seen.clear();
            for d in dirs {
                let Some(entry) = self.dirs.get(d) else {
                    continue;
                };
                for (pid, path) in &entry.sockets {
                    // Two folders with a socket for one pid (one planted by another user in a
                    // folder that sorts first): the one in the folder of the process's owner.
                    match self.seen.entry(*pid) {
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(path.clone());
                        }
                        std::collections::hash_map::Entry::Occupied(mut o) => {
                            if !in_owners_folder(o.get(), *pid) && in_owners_folder(path, *pid) {
                                o.insert(path.clone());
                            }
                        }
                    }
                }
            }
        }
    }
}

/// True when the socket `path` of `pid` is in a folder that passes the checks for the uid
/// the process runs as.
fn in_owners_folder(path: &Path, pid: u32) -> bool {
    let Some(uid) = super::trust::process_euid(pid) else {
        return false;
    };
    path.parent()
        .is_some_and(|d| super::trust::folder_problem(d, uid).is_none())
}

/// Polls in a row a subscribed companion may push nothing beyond what it announced (the two
/// clocks drift, so one poll now and then finds no new figures) before its connection is
/// given up and made again.
const QUIET_POLLS: u32 = 3;

/// The poller subscribes to changes only, with this heartbeat: an idle job's companion sends
/// its unchanged figures only this often, and costs a poll nothing in between.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// How a connection gets its figures.
#[derive(Debug)]
enum Feed {
    /// The companion pushes them (`subscribe`): polls in a row without a push, and how many
    /// it may go without one.
    Pushed { quiet: u32, allowed: u32 },
    /// An older companion: asked each poll, read the next (`asked` while a reply is due).
    Asked { asked: bool },
}

/// How long a reply of an older (asked) companion may take to arrive whole once it began.
const ASKED_READ_TIMEOUT: Duration = Duration::from_millis(50);

/// Most companions connected to at once by one poll.
const OPEN_THREADS: usize = 16;
/// Longest wait before a failing companion is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Companions that failed, by pid: when each may be tried again, and how many times in a row
/// it failed (the wait doubles each time, from one interval up to [`MAX_BACKOFF`]).
#[derive(Debug, Default)]
struct Backoff {
    failing: HashMap<u32, (Instant, u32, String)>,
}

impl Backoff {
    /// True when `pid` may be tried at `now`.
    fn ready(&self, pid: u32, now: Instant) -> bool {
        self.failing.get(&pid).is_none_or(|(at, _, _)| now >= *at)
    }

    /// `pid` failed at `now` (`why`): its wait doubles.
    fn failed(&mut self, pid: u32, now: Instant, interval: Duration, why: String) {
        let n = self.failing.get(&pid).map_or(0, |(_, n, _)| *n);
        let wait = interval
            .max(Duration::from_millis(100))
            .saturating_mul(1u32 << n.min(16))
            .min(MAX_BACKOFF);
        self.failing.insert(pid, (now + wait, n + 1, why));
    }

    /// `pid` answered: no wait any more.
    fn succeeded(&mut self, pid: u32) {
        self.failing.remove(&pid);
    }

    /// Forgets pids no longer seen.
    fn retain(&mut self, seen: &HashMap<u32, PathBuf>) {
        self.failing.retain(|pid, _| seen.contains_key(pid));
    }

    /// Why `pid` is waiting, if it is.
    fn why(&self, pid: u32) -> Option<&str> {
        self.failing.get(&pid).map(|(_, _, w)| w.as_str())
    }
}

/// Connects to each of `todo` (pid, socket) in parallel, [`OPEN_THREADS`] at a time.
fn open_all(
    todo: &[(u32, PathBuf)],
    interval: Duration,
) -> Vec<(u32, Result<Conn, super::error::TorchError>)> {
    if todo.len() <= 1 {
        return todo
            .iter()
            .map(|(pid, path)| (*pid, open(path, *pid, interval)))
            .collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = Mutex::new(Vec::with_capacity(todo.len()));
    std::thread::scope(|s| {
        for _ in 0..OPEN_THREADS.min(todo.len()) {
            let spawned = std::thread::Builder::new()
                .name("vramwarden-torch-open".into())
                .spawn_scoped(s, || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((pid, path)) = todo.get(i) else {
                        break;
                    };
                    let r = open(path, *pid, interval);
                    if let Ok(mut o) = out.lock() {
                        o.push((*pid, r));
                    }
                });
            if spawned.is_err() {
                break;
            }
        }
    });
    // A thread that could not be started leaves its share to this one.
    let mut out = out.into_inner().unwrap_or_default();
    let done: std::collections::HashSet<u32> = out.iter().map(|(p, _)| *p).collect();
    for (pid, path) in todo.iter().filter(|(p, _)| !done.contains(p)) {
        out.push((*pid, open(path, *pid, interval)));
    }
    out
}

/// A companion the poller is connected to.
#[derive(Debug)]
struct Conn {
    path: PathBuf,
    client: Client,
    feed: Feed,
}

/// Connects to the companion of `pid` at `path` and subscribes to its figures.
fn open(path: &Path, pid: u32, interval: Duration) -> Result<Conn, super::error::TorchError> {
    let mut client = Client::connect_at(path, pid, None, DEFAULT_TIMEOUT)?;
    let polls_in = |d: Duration| (d.as_millis() / interval.as_millis().max(1)) as u32;
    let feed = match client.subscribe(interval, Some(HEARTBEAT))? {
        // Its heartbeat comes at most an interval of its own late: half as long again.
        Subscribed::Changes { heartbeat } => Feed::Pushed {
            quiet: 0,
            allowed: polls_in(heartbeat * 3 / 2) + QUIET_POLLS,
        },
        Subscribed::Every => Feed::Pushed {
            quiet: 0,
            allowed: QUIET_POLLS,
        },
        Subscribed::No => {
            // Its replies are read only once they are there: a line cut short is an error
            // at once, not a wait.
            client.set_timeout(ASKED_READ_TIMEOUT);
            Feed::Asked { asked: false }
        }
    };
    Ok(Conn {
        path: path.to_path_buf(),
        client,
        feed,
    })
}

/// Which of `fds` have something to read (or were closed), in one `poll(2)` that does not
/// wait: a companion with nothing new costs no `recv`. All of them when the call fails.
fn readable(fds: impl Iterator<Item = std::os::fd::RawFd>) -> Vec<bool> {
    let mut fds: Vec<libc::pollfd> = fds
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries, open for the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    fds.iter().map(|fd| n < 0 || fd.revents != 0).collect()
}

/// One poll. A companion subscribed to (every one from 0.2.0) pushes its figures on its own
/// timer (from 0.3.0 only when they changed, and once per [`HEARTBEAT`]), so a poll reads
/// only what is waiting: one `poll(2)` for all of them, then one `recv` per companion that
/// sent something; no request to write and no wake-up of the training process by us. Older
/// companions are asked, pipelined: last poll's replies are read, then the next requests go
/// out. `prev` is the last poll's state: a companion that sent nothing new keeps its figures.
fn poll_once(
    dirs: &[PathBuf],
    listing: &mut Listing,
    conns: &mut HashMap<u32, Conn>,
    prev: &mut WatchState,
    backoff: &mut Backoff,
    interval: Duration,
) -> WatchState {
    listing.refresh(dirs);
    let seen = &listing.seen;
    conns.retain(|pid, c| seen.get(pid) == Some(&c.path));
    backoff.retain(seen);
    let mut out = WatchState {
        facts: HashMap::with_capacity(seen.len()),
        ..WatchState::default()
    };
    let mut failed = connect_new(seen, conns, backoff, interval, &mut out);
    let mut connected: Vec<(u32, &mut Conn)> = conns.iter_mut().map(|(p, c)| (*p, c)).collect();
    let ready = readable(connected.iter().map(|(_, c)| c.client.raw_fd()));
    for ((pid, c), ready) in connected.iter_mut().zip(ready) {
        let pid = *pid;
        // A push can already be in the client's buffer (the first one, read together with
        // the reply to `subscribe`): the socket then has nothing new, but the line is there.
        let ready = ready || c.client.has_buffered_line();
        match read_feed(c, pid, ready, prev) {
            Ok(Some(f)) => {
                backoff.succeeded(pid);
                out.facts.insert(pid, f);
            }
            Ok(None) => {}
            Err(e) => {
                backoff.failed(pid, Instant::now(), interval, e.clone());
                out.refused.insert(pid, e);
                failed.push(pid);
            }
        }
    }
    if !failed.is_empty() {
        // A companion gone or broken: its connection closes; the next poll lists the
        // folders again (removing sockets of processes that no longer exist) and reconnects.
        for pid in failed {
            conns.remove(&pid);
        }
        listing.stale = true;
    }
    out
}

/// Connects to the companions in `seen` not connected yet whose back-off allows it (a
/// refusal noted in `out` for the others). Returns the pids whose connection failed.
fn connect_new(
    seen: &HashMap<u32, PathBuf>,
    conns: &mut HashMap<u32, Conn>,
    backoff: &mut Backoff,
    interval: Duration,
    out: &mut WatchState,
) -> Vec<u32> {
    let now = Instant::now();
    let mut todo = Vec::new();
    for (&pid, path) in seen {
        if conns.contains_key(&pid) {
            continue;
        }
        if backoff.ready(pid, now) {
            todo.push((pid, path.clone()));
        } else if let Some(why) = backoff.why(pid) {
            out.refused.insert(pid, why.to_string());
        }
    }
    let mut failed = Vec::new();
    for (pid, r) in open_all(&todo, interval) {
        match r {
            Ok(c) => {
                conns.insert(pid, c);
            }
            Err(e) => {
                out.refused.insert(pid, e.to_string());
                backoff.failed(pid, Instant::now(), interval, e.to_string());
                failed.push(pid);
            }
        }
    }
    failed
}

/// This poll's figures of companion `pid` on `c` (`ready`: its socket or buffer holds
/// something): pushed or asked, as its feed is; `prev` holds the last poll's.
fn read_feed(
    c: &mut Conn,
    pid: u32,
    ready: bool,
    prev: &mut WatchState,
) -> Result<Option<TorchFacts>, String> {
    match &mut c.feed {
        Feed::Pushed { quiet, allowed } => {
            let pushed = if ready {
                c.client.poll_pushed()
            } else {
                Ok(Pushed::Nothing)
            };
            match pushed {
                Ok(Pushed::Figures(f)) => {
                    *quiet = 0;
                    Ok(Some(f))
                }
                // The same figures again (a heartbeat, or an older companion's push): kept,
                // parsed again only if the last poll has none.
                Ok(Pushed::Same) => {
                    *quiet = 0;
                    match prev.facts.remove(&pid) {
                        Some(f) => Ok(Some(f)),
                        None => c
                            .client
                            .last_pushed_facts()
                            .map(Some)
                            .map_err(|e| e.to_string()),
                    }
                }
                Ok(Pushed::Nothing) if *quiet < *allowed => {
                    *quiet += 1;
                    Ok(prev.facts.remove(&pid))
                }
                Ok(Pushed::Nothing) => Err(format!(
                    "the companion sent no figures for {} polls",
                    *allowed
                )),
                Err(e) => Err(e.to_string()),
            }
        }
        // A reply not there yet is waited for at the next poll, not now (a companion that
        // answers slowly delays no one else's figures).
        Feed::Asked { asked } if *asked && !ready => Ok(prev.facts.remove(&pid)),
        Feed::Asked { asked } => read_asked(&mut c.client, asked),
    }
}

/// An older companion's reply to the last poll's request (when `asked`), then the next
/// request sent.
fn read_asked(client: &mut Client, asked: &mut bool) -> Result<Option<TorchFacts>, String> {
    let read = if std::mem::take(asked) {
        client.read_facts().map(Some)
    } else {
        Ok(None)
    };
    read.and_then(|f| {
        client.ask_facts()?;
        *asked = true;
        Ok(f)
    })
    .map_err(|e| e.to_string())
}

impl Watch {
    /// Starts polling the companions in `dirs` every `interval` (first poll at once; every
    /// [`IDLE_EVERY`] intervals while no companion is found). With no `dirs`,
    /// [`all_runtime_dirs`] is read again every [`RESCAN_EVERY`] intervals.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn spawn(dirs: Vec<PathBuf>, interval: Duration) -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(WatchState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("vramwarden-torch".into())
            .spawn(move || {
                let mut conns = HashMap::new();
                let mut listing = Listing::default();
                let mut prev = WatchState::default();
                let mut backoff = Backoff::default();
                let mut found: Vec<PathBuf> = Vec::new();
                let mut since_scan = u32::MAX;
                // Intervals between the last poll and this one.
                let mut pause = 1;
                while !sp.load(Ordering::Relaxed) {
                    // No folders given: the companions' folders, looked for again every
                    // RESCAN_EVERY intervals (they appear when a user's first companion
                    // starts; /tmp may hold many entries, so not on every poll).
                    let scan = if dirs.is_empty() {
                        since_scan = since_scan.saturating_add(pause);
                        if since_scan >= RESCAN_EVERY {
                            found = all_runtime_dirs();
                            since_scan = 0;
                        }
                        &found
                    } else {
                        &dirs
                    };
                    let mut fresh = poll_once(
                        scan,
                        &mut listing,
                        &mut conns,
                        &mut prev,
                        &mut backoff,
                        interval,
                    );
                    fresh.polls = prev.polls + 1;
                    fresh.asked = prev.asked + (fresh.facts.len() + fresh.refused.len()) as u64;
                    fresh.cpu_us = crate::host::proc_usage::thread_cpu_ns() / 1000;
                    // Readers get a copy; this poll's state is the next poll's `prev` (the
                    // figures of a companion that pushed nothing new are carried from it).
                    // Handing readers the state itself and keeping the one it replaced made
                    // `prev` two polls old: figures then showed every other poll.
                    if let Ok(mut s) = st.lock() {
                        *s = fresh.clone();
                    }
                    prev = fresh;
                    pause = if conns.is_empty() && listing.seen.is_empty() {
                        IDLE_EVERY
                    } else {
                        1
                    };
                    std::thread::park_timeout(interval * pause);
                }
            })?;
        Ok(Self {
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// A copy of what the last poll saw.
    pub fn state(&self) -> WatchState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The facts of `pid` when it is the process that started at `start_time_ms` (the
    /// sampler's identity of an NVML process); None otherwise.
    pub fn get(&self, pid: u32, start_time_ms: UnixMs) -> Option<TorchFacts> {
        let s = self.state.lock().ok()?;
        s.facts
            .get(&pid)
            .filter(|f| f.start_time_ms == Some(start_time_ms))
            .cloned()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
