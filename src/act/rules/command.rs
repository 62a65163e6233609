//! The `run_command` transport: a program started directly (no shell), in a process group of
//! its own, with a timeout, its output read while it runs. Bounded: at most one run per rule and
//! target at a time and [`MAX_RUNNING`] over all rules (a GPU-wide rule with no cooldown must
//! not start a command per tick); a run over either limit is skipped and says why.
//!
//! A command ends with its whole group: on its timeout, when its program exits (a background
//! process it left is ended too: start a lasting service with `systemd-run`), and when the
//! [`Commands`] owner (the engine's action runner) is dropped. Each child also gets
//! `PR_SET_PDEATHSIG`, so one whose watcher thread dies with vramwarden is killed by the
//! kernel. A group is signalled only while its leader is not yet reaped (exit seen with
//! `WNOWAIT`), so its id cannot have been reused.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::outcome::Outcome;

/// The most commands running at once, over all rules.
pub const MAX_RUNNING: usize = 8;

/// The key of one run: the rule and its target (a process by pid and start time, a GPU).
pub(crate) fn key_of(p: &super::eval::Planned) -> String {
    match &p.target {
        super::eval::Target::Process { key, .. } => format!(
            "{}\0{}\0{}\0{}",
            p.rule, key.0.pid, key.0.start_time_ms, key.1
        ),
        super::eval::Target::Device(_) => format!("{}\0gpu {}", p.rule, p.target.device_index()),
    }
}

/// Most bytes of a command's output kept (its end: the last lines say most).
pub const OUTPUT_TAIL: usize = 4096;

#[derive(Debug, Default)]
struct Inner {
    /// Running commands by ticket id: their (rule, target) key and process group.
    running: HashMap<u64, (String, Option<i32>)>,
    next: u64,
    /// The owner is gone: groups that start now are killed at once.
    closed: bool,
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The commands one runner started that have not ended; dropping it kills every one's group.
#[derive(Debug, Default)]
pub(crate) struct Commands {
    inner: Arc<Mutex<Inner>>,
}

/// One claimed run (see [`Commands::claim`]); its slot is given back when it is dropped.
#[derive(Debug)]
pub struct Ticket {
    inner: Arc<Mutex<Inner>>,
    id: u64,
}

impl Commands {
    /// A slot for a run of `key` (a rule and its target).
    ///
    /// # Errors
    /// Why not: that rule already runs its command for that target, or [`MAX_RUNNING`] run.
    pub(crate) fn claim(&self, key: String) -> Result<Ticket, String> {
        let mut g = lock(&self.inner);
        if g.running.values().any(|(k, _)| *k == key) {
            return Err(
                "not run: this rule's command for this target is still running (one at a time)"
                    .into(),
            );
        }
        if g.running.len() >= MAX_RUNNING {
            return Err(format!(
                "not run: {MAX_RUNNING} commands are already running (the most at once)"
            ));
        }
        g.next += 1;
        let id = g.next;
        g.running.insert(id, (key, None));
        Ok(Ticket {
            inner: self.inner.clone(),
            id,
        })
    }
}

impl Drop for Commands {
    fn drop(&mut self) {
        let mut g = lock(&self.inner);
        g.closed = true;
        for (_, pgid) in g.running.values_mut() {
            if let Some(pg) = pgid.take() {
                kill_group(pg);
            }
        }
    }
}

impl Ticket {
    /// Records the group of the started command; false (and the group killed) when the
    /// owner is already gone.
    fn started(&self, pgid: i32) -> bool {
        let mut g = lock(&self.inner);
        if g.closed {
            kill_group(pgid);
            return false;
        }
        if let Some(slot) = g.running.get_mut(&self.id) {
            slot.1 = Some(pgid);
        }
        true
    }

    /// Kills the group unless the owner already did; the leader is not reaped yet.
    fn end_group(&self) {
        let mut g = lock(&self.inner);
        if let Some(pg) = g.running.get_mut(&self.id).and_then(|s| s.1.take()) {
            kill_group(pg);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        lock(&self.inner).running.remove(&self.id);
    }
}

fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: plain syscall; the group's leader is not reaped, so the id is still its.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
}

/// True when `pid` (our child) has exited, without reaping it (`WNOWAIT`).
fn exited(pid: u32) -> std::io::Result<bool> {
    // SAFETY: siginfo_t is plain data; all-zero is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall with a valid out-pointer.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: waitid filled in the union's pid field (0 when nothing has exited).
    Ok(unsafe { info.si_pid() } != 0)
}

/// A pipe reader's thread: the end of what it read, and how many bytes that was in all.
type Tail = std::thread::JoinHandle<(Vec<u8>, u64)>;

/// Reads a pipe to its end on a thread, keeping only the last [`OUTPUT_TAIL`] bytes, so a
/// command that prints a lot never blocks on a full pipe.
fn drain_tail<R: Read + Send + 'static>(r: Option<R>) -> Option<Tail> {
    let mut r = r?;
    std::thread::Builder::new()
        .name("vramwarden-cmd-out".into())
        .spawn(move || {
            let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
            let mut total = 0u64;
            let mut buf = [0u8; 8192];
            loop {
                match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        total += n as u64;
                        tail.extend(&buf[..n]);
                        let extra = tail.len().saturating_sub(OUTPUT_TAIL);
                        tail.drain(..extra);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            (tail.into_iter().collect(), total)
        })
        .ok()
}

/// The end of what the readers got, as text ("… (N bytes, the last K kept) …" when cut).
fn collect_output(readers: [Option<Tail>; 2]) -> String {
    let mut bytes = Vec::new();
    let mut total = 0;
    for h in readers.into_iter().flatten() {
        // A process holding the pipe open could keep a reader waiting: give up after a while.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !h.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if h.is_finished() {
            if let Ok((tail, n)) = h.join() {
                bytes.extend_from_slice(&tail);
                total += n;
            }
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let out = text.trim().to_string();
    if total > bytes.len() as u64 {
        return format!("… ({total} bytes, the last {} kept) {out}", bytes.len());
    }
    out
}

/// Runs `argv` (no shell) with a timeout; returns the outcome and the end of its output.
/// Output is read while the command runs (a chatty command never stalls on a full pipe).
/// Without a [`Ticket`] it is still run in a group of its own, ended with it.
pub fn run_command(argv: &[String], timeout: Duration) -> (Outcome, String) {
    run(argv, timeout, None)
}

/// [`run_command`] for a claimed slot: the group is known to the [`Commands`] owner, which
/// ends it if it is dropped first.
pub fn run(argv: &[String], timeout: Duration, ticket: Option<&Ticket>) -> (Outcome, String) {
    let Some((prog, args)) = argv.split_first() else {
        return (Outcome::Failed, "empty command".into());
    };
    let mut child = match spawn(prog, args) {
        Ok(c) => c,
        Err(e) => return (Outcome::Failed, format!("could not start {prog}: {e}")),
    };
    let pgid = child.id() as i32;
    let ours = ticket.is_none_or(|t| t.started(pgid));
    let end_group = || match ticket {
        Some(t) => t.end_group(),
        None => kill_group(pgid),
    };
    let readers = [
        drain_tail(child.stdout.take()),
        drain_tail(child.stderr.take()),
    ];
    let timed_out = match wait_for(&child, ours, timeout) {
        Ok(t) => t,
        Err(e) => {
            end_group();
            let _ = child.wait();
            return (Outcome::Failed, format!("waiting for {prog}: {e}"));
        }
    };
    // The whole group ends with the command (the leader is not reaped yet).
    end_group();
    let status = child.wait();
    let out = collect_output(readers);
    match status {
        _ if !ours => (
            Outcome::Failed,
            format!("{prog} was ended: vramwarden's engine stopped"),
        ),
        _ if timed_out => (
            Outcome::Failed,
            format!(
                "{prog} timed out after {:.0} s and was killed; output: {out}",
                timeout.as_secs_f64()
            ),
        ),
        Ok(s) if s.success() => (Outcome::Acted, format!("{prog} exited 0; output: {out}")),
        Ok(s) => (
            Outcome::Failed,
            format!("{prog} failed ({s}); output: {out}"),
        ),
        Err(e) => (Outcome::Failed, format!("waiting for {prog}: {e}")),
    }
}

/// Starts `prog` with `args` (no shell, no input, its output piped) in a process group of
/// its own, killed if vramwarden dies.
fn spawn(prog: &str, args: &[String]) -> std::io::Result<std::process::Child> {
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: prctl is async-signal-safe and touches nothing of the parent's.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
}

/// Waits for `child` to exit (not reaping it): true when `timeout` passed first, or at once
/// when its slot is not `ours` (the engine stopped).
fn wait_for(child: &std::process::Child, ours: bool, timeout: Duration) -> std::io::Result<bool> {
    let start = Instant::now();
    loop {
        match exited(child.id()) {
            Ok(true) => return Ok(false),
            Ok(false) if !ours || start.elapsed() >= timeout => return Ok(true),
            Ok(false) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e),
        }
    }
}
