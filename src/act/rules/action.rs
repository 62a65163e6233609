//! Carrying out planned actions: the only code in vramwarden that signals a process or starts
//! a program. Every action, from a rule or from the user, goes through [`ActionRunner::run`]:
//!
//! - never PID 1, vramwarden itself, its parent or its session leader;
//! - never a process on the protected list (by name, and by executable or owner: see
//!   [`super::protect`]);
//! - never another user's process unless vramwarden runs as root *and* the rule allows it;
//! - identity is (pid, start time): the start time is read again right before acting, through
//!   a pidfd where the kernel has one (so the signal reaches the process that was checked even
//!   if the PID is reused a moment later);
//! - in dry-run, the outcome says what would have happened and nothing is signalled.
//!
//! The PyTorch actions ([`Action::ReleaseCache`], [`Action::LimitMemory`]) take the same path
//! (policy, then identity right before acting) and then talk to the process's
//! `vramwarden_torch` companion through [`super::companion_action`], whose client checks the
//! socket's peer against the same pid and start time before it sends anything.

pub use super::activity::{Activity, Entry, ANSWER_FOLLOWS, ANSWER_SUFFIX, DRIVER_FIGURE_SUFFIX};
pub use crate::model::outcome::Outcome;
use std::time::{Duration, Instant};

use super::companion_action::{self, LimitGpu, NO_COMPANION};
use super::eval::{Planned, Target};
use super::model::{parse_signal, Action};
use crate::host::procinfo::ProcReader;
use crate::model::history::ProcSeriesKey;
use crate::model::reply::{CommandId, CommandReply};
use crate::model::{Origin, Snapshot, UnixMs, MIB};

/// Global safety settings of the runner.
#[derive(Debug, Clone, PartialEq)]
pub struct Safety {
    /// Everything is a dry run.
    pub global_dry_run: bool,
    /// Process names never signalled.
    pub protected: Vec<String>,
    /// What a command sent through an agent's API may do (see [`Safety::remote_verdict`]).
    pub remote: RemotePolicy,
}

/// The policy for commands sent through an agent's API (`POST /api/v1/command`), before the
/// checks every manual action goes through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemotePolicy {
    /// Other users' processes may be acted on (the agent's `--remote-other-users`).
    pub other_users: bool,
}

/// The names protected by default.
pub const DEFAULT_PROTECTED: &[&str] = &[
    "Xorg",
    "Xwayland",
    "gnome-shell",
    "kwin",
    "kwin_x11",
    "kwin_wayland",
    "nvidia-persistenced",
    "sshd",
    "systemd",
];

impl Default for Safety {
    fn default() -> Self {
        Self {
            global_dry_run: true,
            protected: DEFAULT_PROTECTED.iter().map(|s| (*s).to_string()).collect(),
            remote: RemotePolicy::default(),
        }
    }
}

impl Safety {
    /// The verdict on a command sent through an agent's API to do `action` to `target`, where
    /// it ends before the runner: a live process of another user than the agent's unless
    /// [`RemotePolicy::other_users`]. None: on to [`ActionRunner::run`], as a window's manual
    /// action, in dry run when the agent's global dry run is on (see [`Safety::remote_dry_run`]).
    pub(crate) fn remote_verdict(&self, target: &Target) -> Option<(Outcome, String)> {
        let live = matches!(
            target,
            Target::Process {
                origin: Origin::Live,
                ..
            }
        );
        // Simulated and recorded processes go on to the runner, which refuses them in its words.
        if live && target.uid() != nix::unistd::geteuid().as_raw() && !self.remote.other_users {
            return Some((
                Outcome::Skipped,
                "another user's process: this agent takes remote actions only on its own user's processes (start it with --remote-other-users to allow more)".into(),
            ));
        }
        None
    }

    /// A remote command's dry-run answer in the agent's words: the runner's "would …" (said
    /// only once every refusal has been checked) with where the dry run comes from.
    pub(crate) fn remote_dry_run(would: &str) -> String {
        format!(
            "dry run is on in the agent's settings (cleanup.dry_run): {would}; nothing was sent"
        )
    }
}

struct PendingKill {
    key: ProcSeriesKey,
    deadline: Instant,
    rule: String,
    target: Target,
    pidfd: Option<Pidfd>,
}

/// A release whose effect the driver's next sample shows.
struct PendingCheck {
    key: ProcSeriesKey,
    rule: String,
    target: Target,
    /// When the release was done: the first snapshot taken after it tells.
    after_ms: UnixMs,
    /// The process's GPU memory (driver's figure) the rule saw before it.
    before: Option<u64>,
    /// What PyTorch said it gave back.
    freed_by_torch: u64,
}

/// A companion's answer still coming (a release of a large cache takes seconds).
struct PendingAnswer {
    rx: std::sync::mpsc::Receiver<companion_action::Answer>,
    key: ProcSeriesKey,
    rule: String,
    target: Target,
    action: String,
    before: Option<u64>,
    /// The front end's command it answers, if it came from one, and what that asked.
    command: Option<(CommandId, String)>,
    /// When the companion was asked.
    asked: Instant,
}

/// Runs actions and follows up on terminations (SIGKILL after the grace period) and cache
/// releases (the driver's figure on the next sample).
pub struct ActionRunner {
    procs: ProcReader,
    pending: Vec<PendingKill>,
    checks: Vec<PendingCheck>,
    answers: Vec<PendingAnswer>,
    /// Per GPU index: uuid and total memory, from the last snapshot seen ([`Self::observe`]).
    gpus: crate::model::FastMap<u32, (String, Option<u64>)>,
    /// Where the companions' sockets are looked for; `None`: [`crate::act::torch::all_runtime_dirs`]
    /// at each action.
    companion_dirs: Option<Vec<std::path::PathBuf>>,
    running: Vec<std::sync::mpsc::Receiver<Activity>>,
    /// The thread that asks the companions (off the tick).
    companion: super::companion_worker::Worker,
    /// The commands started and not ended (bounded; their groups end with this runner).
    commands: super::command::Commands,
    /// Parks and resumes: the book of parked processes and the jobs under way.
    parks: super::park_action::Parks,
    /// Final replies to commands whose companion answered, until taken.
    concluded: Vec<CommandReply>,
    me: u32,
    parent: u32,
    session_leader: u32,
    my_uid: u32,
    root: bool,
    /// The GPUs are the simulated ones (`--demo`): no GPU-wide action runs.
    simulated_gpus: bool,
}

impl Default for ActionRunner {
    fn default() -> Self {
        Self::new()
    }
}

/// Refuses a process that is not live: a simulated one (said `ahead` when nothing was tried)
/// or one from a recorded session.
fn origin_refusal(origin: Origin, ahead: bool) -> Option<String> {
    match origin {
        Origin::Live => None,
        // Said ahead (the guard's view, a rule test), nothing was tried.
        Origin::Simulated if ahead => Some("a simulated process: the demo acts on nothing".into()),
        Origin::Simulated => Some("simulated process: nothing was sent".into()),
        Origin::Recorded => Some(
            "a process from a recorded session: nothing was sent (its PID may belong to another process now)"
                .into(),
        ),
    }
}

/// `p`'s activity entry at `now`.
fn activity(p: &Planned, now: UnixMs, outcome: Outcome, detail: String, entry: Entry) -> Activity {
    Activity {
        unix_ms: now,
        rule: p.rule.clone(),
        target: p.target.clone(),
        action: p.action.label(),
        outcome,
        detail,
        entry,
    }
}

/// The transport: sends `sig` to the process `key` (just checked), through its pidfd where
/// there is one, else by pid.
fn signal(key: &ProcSeriesKey, pidfd: Option<&Pidfd>, sig: i32) -> Result<(), ActError> {
    let r = match pidfd {
        Some(fd) => pidfd_signal(fd, sig),
        None => {
            // SAFETY: kill(2) with a pid whose identity was just checked.
            if unsafe { libc::kill(key.0.pid as libc::pid_t, sig) } == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        }
    };
    r.map_err(|e| ActError::Failed(format!("{}: {e}", signal_name(sig))))
}

/// What an allowed action is to do, found before the dry run decides whether it happens.
#[derive(Debug)]
enum Effect {
    /// Tell the user.
    Notify,
    /// A signal.
    Signal(i32),
    /// SIGTERM, then SIGKILL after the grace period if the process still holds GPU memory.
    Terminate {
        /// Seconds between the two.
        grace_seconds: f64,
    },
    /// A command, with its arguments expanded.
    Command {
        /// argv.
        args: Vec<String>,
        /// How long it may run.
        timeout: Duration,
    },
    /// Ask the process's PyTorch companion (release the cache, limit the memory).
    Companion,
    /// Park it or resume it through the driver's checkpoint API ([`crate::act::park`]).
    Park(super::park_action::ParkKind),
}

impl Effect {
    /// The effect of `p`, or why it can have none (an unknown signal, a command that cannot be
    /// expanded, a process action on a whole GPU), with the outcome to log.
    fn of(p: &Planned) -> Result<Self, (Outcome, String)> {
        let on_process = matches!(p.target, Target::Process { .. });
        let needs_process = || (Outcome::Failed, "this action needs a process".to_string());
        match &p.action {
            Action::Notify => Ok(Self::Notify),
            Action::Signal { signal } if on_process => parse_signal(signal)
                .map(Self::Signal)
                .ok_or_else(|| (Outcome::Failed, format!("unknown signal {signal}"))),
            Action::Terminate { grace_seconds } if on_process => Ok(Self::Terminate {
                grace_seconds: *grace_seconds,
            }),
            Action::RunCommand {
                argv,
                timeout_seconds,
            } => expand_argv(argv, &p.target)
                .map(|args| Self::Command {
                    args,
                    timeout: Duration::from_secs_f64(timeout_seconds.clamp(0.0, 86_400.0)),
                })
                .map_err(|why| (Outcome::Skipped, why)),
            Action::ReleaseCache | Action::LimitMemory { .. } if on_process => Ok(Self::Companion),
            Action::Park if on_process => Ok(Self::Park(super::park_action::ParkKind::Park)),
            Action::Resume if on_process => Ok(Self::Park(super::park_action::ParkKind::Resume)),
            Action::Signal { .. }
            | Action::Terminate { .. }
            | Action::ReleaseCache
            | Action::LimitMemory { .. }
            | Action::Park
            | Action::Resume => Err(needs_process()),
        }
    }

    /// What it would do to `p`'s target, named `who` (a dry run's words). `gpu_total` is the
    /// target GPU's index and memory where known (a memory limit is said as its fraction);
    /// `park_gib_s` the park rate a park's time is estimated from.
    fn would(
        &self,
        p: &Planned,
        who: &str,
        gpu_total: Option<(u32, u64)>,
        park_gib_s: f64,
    ) -> String {
        match self {
            Self::Notify => format!("would notify: rule {} matched {who}", p.rule),
            Self::Signal(sig) => format!("would send {} to {who}", signal_name(*sig)),
            Self::Terminate { grace_seconds } => format!(
                "would send SIGTERM to {who}, then SIGKILL after {grace_seconds} s if it still holds GPU memory"
            ),
            Self::Command { args, .. } => format!("would run {args:?} for {who}"),
            Self::Park(kind) => kind.would(p, who, park_gib_s),
            Self::Companion => match &p.action {
                Action::LimitMemory { gib } => format!(
                    "would ask the PyTorch companion of {who} to limit it to {gib} GiB{}",
                    gpu_total.map_or(String::new(), |(index, total_bytes)| format!(
                        " (memory fraction {:.4} of GPU {index})",
                        gib * crate::model::GIB as f64 / total_bytes as f64,
                    ))
                ),
                _ => format!(
                    "would ask the PyTorch companion of {who} to release its cached memory"
                ),
            },
        }
    }
}

/// Why an action on a process did not happen.
#[derive(Debug)]
enum ActError {
    /// The PID no longer names the process the rule saw (exited, reused, unknowable).
    NotSame(String),
    /// The signal could not be sent.
    Failed(String),
}

impl ActError {
    fn outcome(&self) -> Outcome {
        match self {
            ActError::NotSame(_) => Outcome::Skipped,
            ActError::Failed(_) => Outcome::Failed,
        }
    }

    fn into_text(self) -> String {
        match self {
            ActError::NotSame(s) | ActError::Failed(s) => s,
        }
    }
}

/// An open pidfd (closed on drop).
struct Pidfd(i32);

impl Drop for Pidfd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn pidfd_open(pid: u32) -> Option<Pidfd> {
    // SAFETY: plain syscall; returns -1 on error.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    (fd >= 0).then_some(Pidfd(fd as i32))
}

fn pidfd_signal(fd: &Pidfd, sig: i32) -> std::io::Result<()> {
    // SAFETY: plain syscall on a descriptor we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.0,
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGUSR1 => "SIGUSR1".into(),
        libc::SIGUSR2 => "SIGUSR2".into(),
        n => format!("signal {n}"),
    }
}

impl ActionRunner {
    /// A runner for this process.
    pub fn new() -> Self {
        // SAFETY: these getters have no preconditions.
        let (me, parent, sid, uid, euid) = unsafe {
            (
                libc::getpid(),
                libc::getppid(),
                libc::getsid(0),
                libc::getuid(),
                libc::geteuid(),
            )
        };
        Self {
            procs: ProcReader::default(),
            pending: Vec::new(),
            checks: Vec::new(),
            answers: Vec::new(),
            gpus: crate::model::FastMap::default(),
            companion_dirs: None,
            companion: super::companion_worker::Worker::default(),
            running: Vec::new(),
            commands: super::command::Commands::default(),
            parks: super::park_action::Parks::default(),
            concluded: Vec::new(),
            me: me as u32,
            parent: parent as u32,
            session_leader: sid.max(0) as u32,
            my_uid: uid,
            root: euid == 0,
            simulated_gpus: false,
        }
    }

    /// The GPUs are the simulated ones (`--demo`): a GPU-wide action (a command) is refused
    /// as a simulated process's is; notifications still go out.
    pub(crate) fn set_simulated_gpus(&mut self, on: bool) {
        self.simulated_gpus = on;
    }

    /// Looks for the `vramwarden_torch` companions' sockets in `dirs` only (instead of
    /// [`crate::act::torch::all_runtime_dirs`]); for tests and front ends with a folder of their own.
    pub fn set_companion_dirs(&mut self, dirs: Vec<std::path::PathBuf>) {
        self.companion_dirs = Some(dirs);
    }

    fn companion_dirs(&self) -> Vec<std::path::PathBuf> {
        self.companion_dirs
            .clone()
            .unwrap_or_else(crate::act::torch::all_runtime_dirs)
    }

    /// Takes in a new snapshot (call once per tick, before running its actions): the GPUs'
    /// uuids and sizes (for [`Action::LimitMemory`]), and, for each cache release done before
    /// this snapshot was taken, an activity entry with the driver's figure for the process
    /// (its GPU memory now against before the release).
    pub fn observe(&mut self, snap: &Snapshot) -> Vec<Activity> {
        self.parks.observe(snap);
        for d in &snap.devices {
            // Written when it changed only (no copy of the UUID on every tick).
            let known = self.gpus.get(&d.index);
            if known.is_none_or(|(uuid, total)| *uuid != d.uuid || *total != d.memory_total_bytes) {
                self.gpus
                    .insert(d.index, (d.uuid.clone(), d.memory_total_bytes));
            }
        }
        let now = snap.taken_at_ms;
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.checks)
            .into_iter()
            .partition(|c| now > c.after_ms);
        self.checks = keep;
        due.into_iter()
            .map(|c| {
                let p = snap
                    .processes
                    .iter()
                    .find(|p| p.key() == c.key.0 && p.device_index == c.key.1);
                let torch_said = format!(
                    "PyTorch said it gave back {:.1} MiB",
                    c.freed_by_torch as f64 / MIB as f64
                );
                let detail = match (p.map(|p| p.used_bytes), c.before) {
                    (None, _) => format!(
                        "the driver no longer lists {} on GPU {} ({torch_said})",
                        c.target.describe(),
                        c.key.1
                    ),
                    (Some(Some(after)), Some(before)) => format!(
                        "the driver (NVML) saw PID {} on GPU {} go from {:.1} MiB before the release to {:.1} MiB now: {:.1} MiB freed ({torch_said})",
                        c.key.0.pid,
                        c.key.1,
                        before as f64 / MIB as f64,
                        after as f64 / MIB as f64,
                        (before as f64 - after as f64) / MIB as f64
                    ),
                    _ => format!(
                        "the driver gives no memory figure for PID {} on GPU {}, so only PyTorch's stands ({torch_said})",
                        c.key.0.pid, c.key.1
                    ),
                };
                Activity {
                    unix_ms: now,
                    rule: c.rule,
                    target: c.target,
                    action: format!("{}{DRIVER_FIGURE_SUFFIX}", Action::ReleaseCache.label()),
                    outcome: Outcome::Acted,
                    detail,
                    entry: Entry::FollowUp,
                }
            })
            .collect()
    }

    /// Why the planned action would not be carried out (protected, another user's, simulated,
    /// recorded, vramwarden itself, no PyTorch companion for a PyTorch action), if so: the
    /// policy alone, no signal, no identity check. Said ahead (the guard's view): the host's
    /// available memory is the one read at this sample.
    pub fn would_refuse(&self, p: &Planned, safety: &Safety) -> Option<String> {
        self.refusal(p, safety, true)
    }

    /// Why `target` may not be touched, if so (`ahead`: for the guard's view, not for an
    /// action about to run).
    fn refusal(&self, p: &Planned, safety: &Safety, ahead: bool) -> Option<String> {
        let (name, uid) = (p.target.name(), p.target.uid());
        // A notification touches nothing: any process or GPU a rule matches may be told of.
        if p.action == Action::Notify {
            return None;
        }
        let Target::Process { key, origin, .. } = &p.target else {
            return self
                .simulated_gpus
                .then(|| "simulated GPU: the command was not run".into());
        };
        if let Some(why) = origin_refusal(*origin, ahead) {
            return Some(why);
        }
        let pid = key.0.pid;
        self.own_refusal(pid)
            // By name and executable or owner: a job that calls itself Xorg is not protected.
            .or_else(|| super::protect::protected(&safety.protected, pid, name, uid))
            .or_else(|| self.owner_refusal(p, uid))
            .or_else(|| self.parks.refusal(p, key, ahead))
            .or_else(|| self.companion_refusal(p, pid))
    }

    /// Refuses PID 1 and vramwarden itself, its parent and its session.
    fn own_refusal(&self, pid: u32) -> Option<String> {
        if pid <= 1 {
            return Some("PID 1 is never signalled".into());
        }
        let own = pid == self.me
            || pid == self.parent
            || (self.session_leader > 1 && pid == self.session_leader);
        own.then(|| "vramwarden never signals itself, its parent or its session".into())
    }

    /// Refuses another user's process (`uid`'s) unless vramwarden is root and `p` allows it.
    fn owner_refusal(&self, p: &Planned, uid: u32) -> Option<String> {
        if uid == self.my_uid || (self.root && p.allow_other_users) {
            return None;
        }
        Some(if self.root && p.rule == "manual" {
            "another user's process: actions of your own on other users' processes are off (Settings → Rules, `cleanup.manual_other_users`)".into()
        } else if self.root {
            "another user's process, and the rule does not allow other users".into()
        } else {
            "another user's process (vramwarden is not root)".into()
        })
    }

    /// Refuses an action through the PyTorch companion where `pid` has no companion's socket.
    fn companion_refusal(&self, p: &Planned, pid: u32) -> Option<String> {
        if !p.action.uses_companion() {
            return None;
        }
        let dirs = self.companion_dirs();
        crate::act::torch::release::socket_of(&dirs, pid)
            .is_none()
            .then_some(())?;
        Some(format!(
            "{NO_COMPANION} (no socket {} in {})",
            crate::act::torch::socket_name(pid),
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// Checks that `key` still names the same process; returns a pidfd for it when the kernel
    /// has them (None with Ok: no pidfd support, identity checked by start time only).
    fn verify(&self, key: &ProcSeriesKey) -> Result<Option<Pidfd>, ActError> {
        let pid = key.0.pid;
        let fd = pidfd_open(pid);
        if fd.is_none() && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return Err(ActError::NotSame("the process has exited".into()));
        }
        // With the pidfd open, the PID cannot be reused for another process behind our back:
        // the start time read now is the start time of the process the pidfd refers to.
        match self.procs.start_time_ms(pid) {
            None => Err(ActError::NotSame("the process has exited".into())),
            Some(t) if key.0.start_time_ms > 0 && (t - key.0.start_time_ms).abs() > 10 => {
                Err(ActError::NotSame(format!(
                    "PID {pid} now belongs to another process (started {} instead of {})",
                    crate::model::format::rfc3339(t),
                    crate::model::format::rfc3339(key.0.start_time_ms)
                )))
            }
            Some(_) if key.0.start_time_ms <= 0 => Err(ActError::NotSame(
                "the process's start time is unknown, so its identity cannot be checked".into(),
            )),
            Some(_) => Ok(fd),
        }
    }

    /// The identity check, then the signal (the deferred SIGKILL of a process without a
    /// pidfd kept from its SIGTERM).
    fn send(&self, key: &ProcSeriesKey, sig: i32) -> Result<Option<Pidfd>, ActError> {
        let fd = self.verify(key)?;
        signal(key, fd.as_ref(), sig).map(|()| fd)
    }

    /// Carries out `p` (or, in dry run, says what it would do). `now` stamps the activity.
    ///
    /// Every action goes the same way: the policy (`ActionRunner::refusal`: protected, other
    /// users', simulated, recorded, vramwarden itself, no companion); what the action is to do
    /// (`Effect`); a dry run stops there with the words; the identity check of a process
    /// target (pid + start time, through a pidfd where the kernel has them) right before
    /// acting; then the transport (a signal, a command, the PyTorch companion).
    pub fn run(&mut self, p: &Planned, safety: &Safety, now: UnixMs) -> Activity {
        let end = |outcome, detail| activity(p, now, outcome, detail, Entry::Action);
        if let Some(why) = self.refusal(p, safety, false) {
            return end(Outcome::Skipped, why);
        }
        let effect = match Effect::of(p) {
            Ok(e) => e,
            Err((outcome, why)) => return end(outcome, why),
        };
        if p.dry_run || safety.global_dry_run {
            return end(Outcome::WouldAct, self.would(p, &effect));
        }
        // The identity check, right before acting, for every effect on a process.
        let checked = match (&effect, &p.target) {
            (Effect::Notify, _) | (_, Target::Device(_)) => None,
            (_, Target::Process { key, .. }) => match self.verify(key) {
                Ok(fd) => Some((*key, fd)),
                Err(e) => return end(e.outcome(), e.into_text()),
            },
        };
        self.carry_out(p, effect, checked, now)
    }

    /// What `effect` of `p` would do, in words (a dry run).
    fn would(&self, p: &Planned, effect: &Effect) -> String {
        let gpu_total = match &p.target {
            Target::Process { key, .. } => {
                self.gpus.get(&key.1).and_then(|g| g.1.map(|t| (key.1, t)))
            }
            Target::Device(_) => None,
        };
        effect.would(p, &p.target.describe(), gpu_total, self.parks.park_gib_s)
    }

    /// Carries out `effect` of `p` on its target, `checked` (the process and its pidfd)
    /// where it is a process whose identity was just checked.
    fn carry_out(
        &mut self,
        p: &Planned,
        effect: Effect,
        checked: Option<(ProcSeriesKey, Option<Pidfd>)>,
        now: UnixMs,
    ) -> Activity {
        let end = |outcome, detail| activity(p, now, outcome, detail, Entry::Action);
        let who = p.target.describe();
        let (key, pidfd) = checked.map_or((None, None), |(k, fd)| (Some(k), fd));
        match (effect, key) {
            // The engine shows it (status bar, desktop notification where wanted).
            (Effect::Notify, _) => end(
                Outcome::Acted,
                format!("notified: rule {} matched {who}", p.rule),
            ),
            (Effect::Signal(sig), Some(key)) => match signal(&key, pidfd.as_ref(), sig) {
                Ok(()) => end(
                    Outcome::Acted,
                    format!("sent {} to {who}", signal_name(sig)),
                ),
                Err(e) => end(e.outcome(), e.into_text()),
            },
            (Effect::Terminate { grace_seconds }, Some(key)) => {
                let (outcome, detail) = self.terminate(p, (key, pidfd), grace_seconds);
                end(outcome, detail)
            }
            (Effect::Command { args, timeout }, _) => {
                // One run per rule and target at a time, a few over all rules.
                let ticket = match self.commands.claim(super::command::key_of(p)) {
                    Ok(t) => t,
                    Err(why) => return end(Outcome::Skipped, why),
                };
                let done = end(Outcome::Acted, format!("started {args:?}"));
                self.start_command(done, (args, timeout), ticket)
            }
            (Effect::Companion, Some(key)) => {
                let (outcome, detail, kind) = self.run_companion(p, &key);
                activity(p, now, outcome, detail, kind)
            }
            (Effect::Park(kind), Some(key)) => {
                let (outcome, detail, e) = self.parks.start(kind, p, key, now);
                activity(p, now, outcome, detail, e)
            }
            // Effect::of gives process effects only for process targets.
            (_, None) => end(Outcome::Failed, "this action needs a process".into()),
        }
    }

    /// SIGTERM to `key` (its identity just checked, `pidfd` held), and the SIGKILL due after
    /// `grace_seconds` if it still holds GPU memory then.
    fn terminate(
        &mut self,
        p: &Planned,
        (key, pidfd): (ProcSeriesKey, Option<Pidfd>),
        grace_seconds: f64,
    ) -> (Outcome, String) {
        if let Err(e) = signal(&key, pidfd.as_ref(), libc::SIGTERM) {
            return (e.outcome(), e.into_text());
        }
        self.pending.push(PendingKill {
            key,
            deadline: Instant::now() + Duration::from_secs_f64(grace_seconds.clamp(0.0, 86_400.0)),
            rule: p.rule.clone(),
            target: p.target.clone(),
            pidfd,
        });
        (
            Outcome::Acted,
            format!(
                "sent SIGTERM to {}; SIGKILL in {grace_seconds} s if it still holds GPU memory",
                p.target.describe()
            ),
        )
    }

    /// Runs a rule's command on a thread of its own under `ticket`; `done` is its entry, sent
    /// back with the command's outcome when it ends. Returns the start's entry (the action is
    /// counted once, by its end).
    fn start_command(
        &mut self,
        mut done: Activity,
        (args, timeout): (Vec<String>, Duration),
        ticket: super::command::Ticket,
    ) -> Activity {
        let started = Activity {
            entry: Entry::Asked,
            ..done.clone()
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("vramwarden-command".into())
            .spawn(move || {
                let (outcome, detail) = super::command::run(&args, timeout, Some(&ticket));
                drop(ticket);
                done.outcome = outcome;
                done.detail = detail;
                let _ = tx.send(done);
            });
        match spawned {
            Ok(_) => {
                self.running.push(rx);
                started
            }
            Err(e) => Activity {
                outcome: Outcome::Failed,
                detail: format!("could not start a thread for the command: {e}"),
                entry: Entry::Action,
                ..started
            },
        }
    }

    /// A PyTorch action on the process `key`, whose identity was just checked: the companion
    /// (which checks its peer against the same pid and start time before anything is sent).
    /// The entry is [`Entry::Asked`] when its answer follows later.
    fn run_companion(&mut self, p: &Planned, key: &ProcSeriesKey) -> (Outcome, String, Entry) {
        let who = p.target.describe();
        let gpu = {
            let (uuid, total) = self.gpus.get(&key.1).cloned().unwrap_or_default();
            total.map(|total_bytes| LimitGpu {
                index: key.1,
                uuid,
                total_bytes,
            })
        };
        let (pid, start) = (key.0.pid, key.0.start_time_ms);
        if let (Action::LimitMemory { .. }, None) = (&p.action, &gpu) {
            return (
                Outcome::Failed,
                format!(
                    "GPU {}'s total memory is not known yet, so a limit cannot be turned into a memory fraction",
                    key.1
                ),
                Entry::Action,
            );
        }
        // The companion is asked on the companion thread, never on the tick: its answer
        // follows in the activity log from `poll` (a stats-sized answer on the next tick; a
        // release of a large cache takes seconds).
        let (tx, rx) = std::sync::mpsc::channel();
        let job = super::companion_worker::Job {
            dirs: self.companion_dirs(),
            pid,
            start_time_ms: start,
            action: p.action.clone(),
            gpu,
            who: who.clone(),
            answer: tx,
        };
        if let Err(e) = self.companion.send(job) {
            return (Outcome::Failed, e, Entry::Action);
        }
        let before = match &p.target {
            Target::Process { used_bytes, .. } => *used_bytes,
            Target::Device(_) => None,
        };
        self.answers.push(PendingAnswer {
            rx,
            key: *key,
            rule: p.rule.clone(),
            target: p.target.clone(),
            action: format!("{}{ANSWER_SUFFIX}", p.action.label()),
            before,
            command: None,
            asked: Instant::now(),
        });
        (
            Outcome::Acted,
            format!("asked the PyTorch companion of {who}; {ANSWER_FOLLOWS}"),
            Entry::Asked,
        )
    }

    /// After a release that went through: the driver's figure follows with the next sample.
    fn follow_release(
        &mut self,
        key: &ProcSeriesKey,
        rule: &str,
        target: &Target,
        before: Option<u64>,
        answer: &companion_action::Answer,
        now: UnixMs,
    ) {
        if let (Some(freed), Outcome::Acted) = (answer.freed_bytes, answer.outcome) {
            self.checks.push(PendingCheck {
                key: *key,
                rule: rule.to_string(),
                target: target.clone(),
                after_ms: now,
                before,
                freed_by_torch: freed,
            });
        }
    }

    /// Follow-ups due now: SIGKILL for terminated processes still holding GPU memory after
    /// their grace period, and results of finished commands. `holds_memory(key)` says whether
    /// the process is still listed on its GPU.
    pub fn poll(
        &mut self,
        holds_memory: &dyn Fn(&ProcSeriesKey) -> bool,
        now: UnixMs,
    ) -> Vec<Activity> {
        let t = Instant::now();
        let due: Vec<PendingKill> = {
            let (due, keep) = std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|p| p.deadline <= t);
            self.pending = keep;
            due
        };
        let mut out: Vec<Activity> = due
            .into_iter()
            .map(|p| self.kill_after_grace(&p, holds_memory, now))
            .collect();
        self.take_companion_answers(now, &mut out);
        out.extend(self.parks.poll(now));
        self.running.retain(|rx| match rx.try_recv() {
            Ok(a) => {
                out.push(Activity { unix_ms: now, ..a });
                false
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => true,
            Err(_) => false,
        });
        out
    }

    /// The SIGKILL of a terminate whose grace period ran out: sent only to the same process,
    /// still alive and still holding GPU memory; else the terminate's follow-up (a SIGKILL not
    /// needed is not an action skipped: the agent's counter of actions counts only those sent).
    fn kill_after_grace(
        &self,
        p: &PendingKill,
        holds_memory: &dyn Fn(&ProcSeriesKey) -> bool,
        now: UnixMs,
    ) -> Activity {
        let mut act = Activity {
            unix_ms: now,
            rule: p.rule.clone(),
            target: p.target.clone(),
            action: "SIGKILL after grace period".into(),
            outcome: Outcome::Acted,
            detail: String::new(),
            entry: Entry::Action,
        };
        let not_needed = match self.verify(&p.key) {
            Err(e) => Some(format!("not needed: {}", e.into_text())),
            Ok(_) if !holds_memory(&p.key) => {
                Some("not needed: it no longer holds GPU memory".into())
            }
            Ok(_) => None,
        };
        if let Some(why) = not_needed {
            act.outcome = Outcome::Skipped;
            act.detail = why;
            act.entry = Entry::FollowUp;
            return act;
        }
        let r = match &p.pidfd {
            Some(fd) => pidfd_signal(fd, libc::SIGKILL).map_err(|e| e.to_string()),
            None => self
                .send(&p.key, libc::SIGKILL)
                .map(|_| ())
                .map_err(ActError::into_text),
        };
        match r {
            Ok(()) => {
                act.detail = format!(
                    "sent SIGKILL to {}: it ignored SIGTERM",
                    p.target.describe()
                )
            }
            Err(e) => {
                act.outcome = Outcome::Failed;
                act.detail = e;
            }
        }
        act
    }

    /// The companions' answers that came (a release's follow-up and its command's reply);
    /// the others wait.
    fn take_companion_answers(&mut self, now: UnixMs, out: &mut Vec<Activity>) {
        for a in std::mem::take(&mut self.answers) {
            match a.rx.try_recv() {
                Ok(answer) => {
                    self.follow_release(&a.key, &a.rule, &a.target, a.before, &answer, now);
                    if let Some((id, what)) = &a.command {
                        self.concluded.push(CommandReply {
                            id: *id,
                            what: what.clone(),
                            answer: crate::model::reply::Answer::new(
                                answer.outcome,
                                answer.detail.clone(),
                            )
                            .with_figures(
                                answer.freed_bytes,
                                Some(a.asked.elapsed().as_secs_f64()),
                            ),
                        });
                    }
                    out.push(Activity {
                        unix_ms: now,
                        rule: a.rule,
                        target: a.target,
                        action: a.action,
                        outcome: answer.outcome,
                        detail: answer.detail,
                        entry: Entry::Action,
                    });
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => self.answers.push(a),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    let detail = "the companion's thread ended without an answer";
                    if let Some((id, what)) = &a.command {
                        self.concluded.push(CommandReply {
                            id: *id,
                            what: what.clone(),
                            answer: crate::model::reply::Answer::new(Outcome::Failed, detail),
                        });
                    }
                    out.push(Activity {
                        unix_ms: now,
                        rule: a.rule,
                        target: a.target,
                        action: a.action,
                        outcome: Outcome::Failed,
                        detail: detail.into(),
                        entry: Entry::Action,
                    })
                }
            }
        }
    }

    /// Shows parked processes (and those being parked or resumed) in `snap`: see
    /// [`crate::act::park::Parker::annotate`]. Call before the snapshot is enriched.
    pub fn annotate_parked(&self, snap: &mut Snapshot) {
        self.parks.annotate(snap);
    }

    /// The `action` just started on `key` by [`ActionRunner::run`] (an [`Entry::Asked`]
    /// entry: a park, a resume, a question to the companion) answers the front end's command
    /// `id` when it ends: its final reply, under `id`, is then among
    /// [`ActionRunner::take_concluded`]. False when no such work on `key` waits for its end.
    pub(crate) fn answer_under(
        &mut self,
        action: &Action,
        key: &ProcSeriesKey,
        id: CommandId,
    ) -> bool {
        if matches!(action, Action::Park | Action::Resume) {
            return self.parks.answer_under(key, id);
        }
        match self
            .answers
            .iter_mut()
            .rev()
            .find(|a| a.key == *key && a.command.is_none())
        {
            Some(a) => {
                a.command = Some((id, action.label()));
                true
            }
            None => false,
        }
    }

    /// The final replies to commands whose work ended since the last call (see
    /// [`ActionRunner::answer_under`]), with their figures.
    pub(crate) fn take_concluded(&mut self) -> Vec<CommandReply> {
        let mut out = std::mem::take(&mut self.concluded);
        out.extend(self.parks.take_concluded());
        out
    }

    /// Parks and resumes that ended since the last call, with their figures (for the
    /// session log).
    pub fn take_park_records(&mut self) -> Vec<super::park_action::ParkRecord> {
        self.parks.take_records()
    }

    /// The park rate a park's time is said at (GiB/s; 0: none measured, the default rate).
    pub(crate) fn set_park_rate(&mut self, gib_s: f64) {
        self.parks.park_gib_s = gib_s;
    }
}

/// `argv` with the placeholders replaced for `t`: `{pid}`, `{start_time}` (the process's start,
/// ms since the epoch: with the pid, its identity), `{gpu}`, `{user}`, `{name}`.
///
/// # Errors
/// Refuses (with the reason) a rule that could hand a value to a program as code or a path
/// ([`super::shell::placeholder_problem`]: any placeholder in the program, `{name}` or `{user}`
/// inside a longer argument, after an option or as a shell's first argument); a `{name}` or
/// `{user}` whose value holds a `/` or starts with `.` ([`super::shell::value_problem`]); and
/// a replaced value that would make an argument start with `-` that did not start with one
/// in the rule (a process named `-rf` must not become an option), unless it follows `--`.
pub fn expand_argv(argv: &[String], t: &Target) -> Result<Vec<String>, String> {
    if let Some(why) = super::shell::placeholder_problem(argv) {
        return Err(format!("not run: {why}"));
    }
    let (pid, start, user, name) = match t {
        Target::Process { key, .. } => (
            key.0.pid.to_string(),
            key.0.start_time_ms.to_string(),
            t.user().to_string(),
            t.name().to_string(),
        ),
        Target::Device(_) => Default::default(),
    };
    let gpu = t.device_index().to_string();
    // Arguments after a `--` are operands for every getopt-style tool.
    let operands_from = argv
        .iter()
        .position(|a| a == "--")
        .map_or(usize::MAX, |i| i + 1);
    argv.iter()
        .enumerate()
        .map(|(i, a)| {
            // `{name}` and `{user}` are whole arguments here (checked above).
            let out = match a.as_str() {
                "{name}" | "{user}" => {
                    let v = if a == "{name}" { &name } else { &user };
                    if let Some(why) = super::shell::value_problem(a, v) {
                        return Err(why);
                    }
                    v.clone()
                }
                _ => a
                    .replace("{pid}", &pid)
                    .replace("{start_time}", &start)
                    .replace("{gpu}", &gpu),
            };
            if i > 0 && i < operands_from && out.starts_with('-') && !a.starts_with('-') {
                return Err(format!(
                    "not run: argument {i} ({a:?}) would become the option {out:?}; put the placeholder after `--`"
                ));
            }
            Ok(out)
        })
        .collect()
}

pub use super::command::{run_command, OUTPUT_TAIL};

#[cfg(test)]
mod release_follow_up_tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{DeviceSample, ProcInfo, ProcessKey, ProcessSample};

    fn snap(t: UnixMs, used_mib: Option<Option<u64>>) -> Snapshot {
        Snapshot {
            taken_at_ms: t,
            devices: vec![DeviceSample {
                uuid: "GPU-a".into(),
                memory_total_bytes: Some(81_920 * MIB),
                ..DeviceSample::default()
            }],
            processes: used_mib
                .map(|u| ProcessSample {
                    pid: 454,
                    used_bytes: u.map(|m| m * MIB),
                    info: Some(Arc::new(ProcInfo {
                        start_time_ms: 9,
                        ..ProcInfo::default()
                    })),
                    ..ProcessSample::default()
                })
                .into_iter()
                .collect(),
        }
    }

    fn check(r: &mut ActionRunner, at: UnixMs) {
        let key = (
            ProcessKey {
                pid: 454,
                start_time_ms: 9,
            },
            0,
        );
        r.checks.push(PendingCheck {
            key,
            rule: "release".into(),
            target: Target::Process {
                key,
                info: Some(Arc::new(ProcInfo {
                    name: "bloat".into(),
                    user: "u".into(),
                    uid: 0,
                    ..Default::default()
                })),
                used_bytes: Some(71_784 * MIB),
                origin: Origin::Live,
            },
            after_ms: at,
            before: Some(71_784 * MIB),
            freed_by_torch: 69_212 * MIB,
        });
    }

    #[test]
    fn the_driver_figure_follows_a_release_on_the_next_sample() {
        let mut r = ActionRunner::new();
        check(&mut r, 1_000);
        // A snapshot taken at the release's moment or before tells nothing yet.
        assert!(r.observe(&snap(1_000, Some(Some(6_604)))).is_empty());
        let a = r.observe(&snap(2_000, Some(Some(6_604))));
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].outcome, Outcome::Acted);
        assert_eq!(a[0].action, "release cached memory: the driver's figure");
        assert!(
            a[0].detail.contains(
                "saw PID 454 on GPU 0 go from 71784.0 MiB before the release to 6604.0 MiB now: 65180.0 MiB freed (PyTorch said it gave back 69212.0 MiB)"
            ),
            "{}",
            a[0].detail
        );
        // Reported once.
        assert!(r.observe(&snap(3_000, Some(Some(6_604)))).is_empty());
        // The GPU's size is known for limits.
        assert_eq!(r.gpus.get(&0), Some(&("GPU-a".into(), Some(81_920 * MIB))));
        // Gone, or no per-process figure: said so, with PyTorch's figure.
        check(&mut r, 3_000);
        let a = r.observe(&snap(4_000, None));
        assert!(
            a[0].detail.starts_with("the driver no longer lists"),
            "{:?}",
            a
        );
        check(&mut r, 4_000);
        let a = r.observe(&snap(5_000, Some(None)));
        assert!(
            a[0].detail
                .contains("so only PyTorch's stands (PyTorch said it gave back 69212.0 MiB)"),
            "{:?}",
            a
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ProcInfo, ProcessKey};

    /// A process of `uid`, from `origin`.
    fn owned_by(uid: u32, origin: Origin) -> Target {
        let info = ProcInfo {
            name: "python".into(),
            uid,
            ..ProcInfo::default()
        };
        let key = (
            ProcessKey {
                pid: 4242,
                start_time_ms: 7,
            },
            0,
        );
        Target::process(key, Some(std::sync::Arc::new(info)), None, origin)
    }

    #[test]
    fn the_remote_policy_refuses_other_users_unless_allowed_dry_run_or_not() {
        let me = nix::unistd::geteuid().as_raw();
        let other = me.wrapping_add(1);
        let mut s = Safety {
            global_dry_run: true,
            protected: Vec::new(),
            remote: RemotePolicy { other_users: false },
        };
        // The dry run is no verdict of its own: the runner says what it would do; another
        // user's process is refused in a dry run as out of one.
        assert_eq!(s.remote_verdict(&owned_by(me, Origin::Live)), None);
        assert!(s
            .remote_verdict(&owned_by(other, Origin::Live))
            .is_some_and(|(o, _)| o == Outcome::Skipped));
        s.global_dry_run = false;
        let refused = s.remote_verdict(&owned_by(other, Origin::Live));
        assert!(
            refused.as_ref().is_some_and(|(o, d)| *o == Outcome::Skipped
                && d.starts_with("another user's process: this agent takes remote actions only")),
            "{refused:?}"
        );
        assert_eq!(s.remote_verdict(&owned_by(me, Origin::Live)), None);
        // A simulated process goes on to the runner, which refuses it in its own words.
        assert_eq!(s.remote_verdict(&owned_by(other, Origin::Simulated)), None);
        s.remote.other_users = true;
        assert_eq!(s.remote_verdict(&owned_by(other, Origin::Live)), None);
    }

    #[test]
    fn a_notification_is_given_for_another_users_process_and_a_signal_is_not() {
        let other = nix::unistd::geteuid().as_raw().wrapping_add(1);
        let planned = |action| crate::act::rules::eval::Planned {
            rule: "big".into(),
            action,
            dry_run: false,
            allow_other_users: false,
            target: owned_by(other, Origin::Live),
        };
        let safety = Safety {
            global_dry_run: false,
            protected: Vec::new(),
            remote: RemotePolicy { other_users: false },
        };
        let mut r = ActionRunner::new();
        let told = r.run(&planned(Action::Notify), &safety, 1_000);
        assert_eq!(told.outcome, Outcome::Acted, "{}", told.detail);
        let term = Action::Signal {
            signal: "SIGTERM".into(),
        };
        let refused = r.run(&planned(term), &safety, 1_000);
        assert_eq!(refused.outcome, Outcome::Skipped, "{}", refused.detail);
        assert!(
            refused.detail.contains("another user's process"),
            "{}",
            refused.detail
        );
    }
}
