//! `vramwarden park PID` and `vramwarden resume PID`: the executor's park and resume actions
//! for one process, from a shell. The process is found in a fresh sample (park) or by its
//! pid in `/proc` (resume: a parked process is not listed by the driver); the policy, the
//! identity check and the driver calls are the executor's, as for a rule or a click. The
//! protected list is the settings file's (`--config`), as the engine's; a protected process
//! is refused before the driver is loaded; another user's process is refused unless the
//! file's `cleanup.manual_other_users` allows it (where vramwarden runs as root).

use std::io::Write;
use std::time::{Duration, Instant};

use crate::act::park::cuda::{CudaCheckpoint, CudaError};
use crate::act::rules::action::{ActionRunner, Activity, Entry, Outcome, Safety};
use crate::act::rules::eval::{Planned, Target};
use crate::act::rules::Action;
use crate::front::headless::CliError;
use crate::host::procinfo::ProcReader;
use crate::model::{now_ms, ProcessKey};
use crate::source::SourceError;

/// The longest a park or resume is waited for (a park of 140 GB takes about 100 s).
const WAIT: Duration = Duration::from_secs(900);

/// `vramwarden park PID [--start-time-ms MS] [--dry-run]`.
///
/// # Errors
/// No driver (exit 3), a process the driver does not list, a refusal or a failed park.
pub fn park(
    source: crate::source::SourceKind,
    config: Option<&std::path::Path>,
    pid: u32,
    start_time_ms: Option<i64>,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut source = source.open()?;
    let mut snap = source.sample(now_ms())?;
    crate::host::procinfo::enrich(&mut snap, &mut ProcReader::default());
    let found: Vec<_> = snap.processes.iter().filter(|p| p.pid == pid).collect();
    let Some(p) = found.first() else {
        return Err(CliError::Failed(format!(
            "PID {pid} is not listed by the NVIDIA driver as holding GPU memory (not a CUDA process, exited, or parked already: `vramwarden snapshot` shows its state)"
        )));
    };
    if let Some(want) = start_time_ms {
        if p.key().start_time_ms != want {
            return Err(CliError::Failed(format!(
                "PID {pid} started at {} ms, not {want}: it is another process; nothing was done",
                p.key().start_time_ms
            )));
        }
    }
    let policy = manual_policy(config)?;
    if let Some(info) = p.info.as_deref() {
        refuse_protected(&policy.protected, pid, info)?;
    }
    let target = crate::act::rules::eval::process_target(p);
    let mut runner = ActionRunner::new();
    runner.observe(&snap);
    act(&mut runner, Action::Park, target, dry_run, policy, out)
}

/// What the settings file (`--config`, else the usual one) says of manual actions: its
/// protected list, and whether they may touch other users' processes.
struct ManualPolicy {
    protected: Vec<String>,
    other_users: bool,
}

fn manual_policy(config: Option<&std::path::Path>) -> Result<ManualPolicy, CliError> {
    let c = crate::front::headless::load_settings(config)?.cleanup;
    Ok(ManualPolicy {
        protected: c.protected,
        other_users: c.manual_other_users,
    })
}

/// Refuses a process the protected list protects (as the executor would, but before the
/// driver is loaded).
fn refuse_protected(
    list: &[String],
    pid: u32,
    info: &crate::model::ProcInfo,
) -> Result<(), CliError> {
    match crate::act::rules::protect::protected(list, pid, &info.name, info.uid) {
        Some(why) => Err(CliError::Failed(format!("skipped: {why}"))),
        None => Ok(()),
    }
}

/// `vramwarden resume PID`.
///
/// # Errors
/// No libcuda (exit 3), a process that is gone, a refusal or a failed resume.
pub fn resume(
    source: crate::source::SourceKind,
    config: Option<&std::path::Path>,
    pid: u32,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let policy = manual_policy(config)?;
    let target = if source.is_simulated() {
        simulated_target(source, pid)?
    } else {
        live_target(&policy.protected, pid)?
    };
    act(
        &mut ActionRunner::new(),
        Action::Resume,
        target,
        false,
        policy,
        out,
    )
}

/// The simulated process `pid` (never parked: the executor refuses it in its words, as `park`).
fn simulated_target(source: crate::source::SourceKind, pid: u32) -> Result<Target, CliError> {
    let snap = source.open()?.sample(now_ms())?;
    let Some(p) = snap.processes.iter().find(|p| p.pid == pid) else {
        return Err(CliError::Failed(format!(
            "PID {pid} is not one of the simulated processes (`vramwarden --demo snapshot` lists them)"
        )));
    };
    Ok(crate::act::rules::eval::process_target(p))
}

/// The live process `pid`, unless protected, once libcuda (which resumes it) loads.
fn live_target(protected: &[String], pid: u32) -> Result<Target, CliError> {
    if let Some(info) = ProcReader::default().read(pid) {
        refuse_protected(protected, pid, &info)?;
    }
    if let Err(e) = CudaCheckpoint::load() {
        return Err(match e {
            CudaError::NoLibrary(_) => CliError::Source(SourceError::Unavailable(e.to_string())),
            e => CliError::Failed(e.to_string()),
        });
    }
    let info = ProcReader::default()
        .read(pid)
        .ok_or_else(|| CliError::Failed(format!("PID {pid}: no such process")))?;
    let key = ProcessKey {
        pid,
        start_time_ms: info.start_time_ms,
    };
    // The GPU it was parked from, as noted when it was parked (the driver no longer lists
    // it): the room is checked there. Not noted: its size is not known either, and the
    // executor refuses the restore before reading any GPU.
    let gpu = crate::act::park::ledger::gpu_of(&key).unwrap_or(0);
    Ok(Target::process(
        (key, gpu),
        Some(info),
        None,
        crate::model::Origin::Live,
    ))
}

/// Runs `action` on `target` through the executor and waits for its answer.
fn act(
    runner: &mut ActionRunner,
    action: Action,
    target: Target,
    dry_run: bool,
    policy: ManualPolicy,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let plan = Planned {
        rule: "manual".into(),
        action,
        dry_run,
        allow_other_users: policy.other_users,
        target,
    };
    let safety = Safety {
        global_dry_run: dry_run,
        protected: policy.protected,
        remote: Default::default(),
    };
    let first = runner.run(&plan, &safety, now_ms());
    if first.entry != Entry::Asked {
        return end(&first, out);
    }
    writeln!(out, "{}", first.detail)?;
    let started = Instant::now();
    while started.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(a) = runner
            .poll(&|_| true, now_ms())
            .into_iter()
            .find(|a| a.entry == Entry::Action)
        {
            return end(&a, out);
        }
    }
    Err(CliError::Failed(format!(
        "no answer from the driver after {} s; `vramwarden snapshot` shows the process's state",
        WAIT.as_secs()
    )))
}

/// The answer: its words on `out` when it acted (or would have), else the error that says them
/// (once, on stderr).
fn end(a: &Activity, out: &mut dyn Write) -> Result<(), CliError> {
    match a.outcome {
        Outcome::Acted | Outcome::WouldAct => Ok(writeln!(out, "{}", a.detail)?),
        Outcome::Skipped | Outcome::Failed => Err(CliError::Failed(format!(
            "{}: {}",
            a.outcome.label(),
            a.detail
        ))),
    }
}
