//! A command from a remote window to an agent: [`WireCommand`], the body of
//! `POST /api/v1/command`, versioned with the View and the replies
//! ([`super::wire::API_VERSION`]). The window writes it from its [`EngineCommand`]
//! ([`WireCommand::of`]); the agent reads it ([`WireCommand::parse`]) and hands the engine the
//! [`Action`] it names ([`WireCommand::action`]). Its JSON is flat, as docs/agent-api.md
//! gives it: `{"action": "terminate", "pid": 42, "start_time": 1700000000000, "gpu": 0,
//! "grace_seconds": 10}` (`start_time_ms` is read as `start_time`; an unknown field is refused).
//! `tests/fixtures/wire_command.json` pins the body of every action.

use serde::{Deserialize, Serialize};

use crate::act::rules::model::{
    parse_signal, DEFAULT_GRACE_SECONDS, MAX_ACTION_SECONDS, MAX_LIMIT_GIB,
};
use crate::act::rules::Action;
use crate::engine::EngineCommand;
use crate::model::UnixMs;

/// A command on one process, as a window posts it and an agent reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "FlatCommand", into = "FlatCommand")]
pub struct WireCommand {
    /// The process id.
    pub pid: u32,
    /// The process's start time (ms since the epoch), as the snapshot gives it: with the pid,
    /// what the agent finds the process by.
    pub start_time: UnixMs,
    /// The GPU, when the process is on several (None: its first listing).
    pub gpu: Option<u32>,
    /// What to do.
    pub action: WireAction,
}

/// What a [`WireCommand`] asks, tagged by its `action` field in the JSON (`terminate`, `kill`,
/// `signal`, `release_cache`, `park`, `resume`, `limit_memory`), with its parameters beside.
#[derive(Debug, Clone, PartialEq)]
pub enum WireAction {
    /// SIGTERM, then SIGKILL after `grace_seconds` (absent: 10; 0 to 3600).
    Terminate {
        /// Seconds between the two signals.
        grace_seconds: f64,
    },
    /// SIGKILL.
    Kill,
    /// One signal, by name or number.
    Signal {
        /// The signal.
        signal: String,
    },
    /// Release PyTorch's cached memory through the process's companion.
    ReleaseCache,
    /// Park the process (GPU memory to host memory).
    Park,
    /// Resume a parked process.
    Resume,
    /// Limit the process's PyTorch memory to `gib` GiB.
    LimitMemory {
        /// The limit, GiB (more than 0, at most the largest GPU's size).
        gib: f64,
    },
}

/// The actions [`WireAction`] names, in the words of a refused one.
const ACTIONS: &str = "terminate, kill, signal, release_cache, limit_memory, park or resume";

/// The JSON of a [`WireCommand`]: one flat object, the action's name in `action` and its
/// parameters beside it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlatCommand {
    action: String,
    pid: u32,
    #[serde(alias = "start_time_ms")]
    start_time: UnixMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gpu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grace_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gib: Option<f64>,
}

impl TryFrom<FlatCommand> for WireCommand {
    type Error = String;

    /// The command `f` names; a parameter an action needs and lacks, or an action not known,
    /// is refused in a sentence for the client (any other field is ignored).
    fn try_from(f: FlatCommand) -> Result<Self, String> {
        let action = match f.action.as_str() {
            "terminate" => WireAction::Terminate {
                grace_seconds: f.grace_seconds.unwrap_or(DEFAULT_GRACE_SECONDS),
            },
            "kill" => WireAction::Kill,
            "signal" => WireAction::Signal {
                signal: f.signal.ok_or("a signal command needs \"signal\"")?,
            },
            "release_cache" => WireAction::ReleaseCache,
            "park" => WireAction::Park,
            "resume" => WireAction::Resume,
            "limit_memory" => WireAction::LimitMemory {
                gib: f.gib.ok_or_else(limit_needs_gib)?,
            },
            other => return Err(format!("unknown action {other:?} ({ACTIONS})")),
        };
        Ok(Self {
            pid: f.pid,
            start_time: f.start_time,
            gpu: f.gpu,
            action,
        })
    }
}

impl From<WireCommand> for FlatCommand {
    fn from(c: WireCommand) -> Self {
        let mut f = FlatCommand {
            action: c.action.name().into(),
            pid: c.pid,
            start_time: c.start_time,
            gpu: c.gpu,
            ..Self::default()
        };
        match c.action {
            WireAction::Terminate { grace_seconds } => f.grace_seconds = Some(grace_seconds),
            WireAction::Signal { signal } => f.signal = Some(signal),
            WireAction::LimitMemory { gib } => f.gib = Some(gib),
            WireAction::Kill | WireAction::ReleaseCache | WireAction::Park | WireAction::Resume => {
            }
        }
        f
    }
}

/// Why a `limit_memory` command is refused: no `gib`, or one out of range.
fn limit_needs_gib() -> String {
    "a limit_memory command needs \"gib\" (more than 0, at most the GPU's size)".into()
}

impl WireAction {
    /// Its name on the wire (the `action` field).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Terminate { .. } => "terminate",
            Self::Kill => "kill",
            Self::Signal { .. } => "signal",
            Self::ReleaseCache => "release_cache",
            Self::Park => "park",
            Self::Resume => "resume",
            Self::LimitMemory { .. } => "limit_memory",
        }
    }

    /// The wire's name for `a`, or why an agent is not asked it (a program to run, a
    /// notification: a rule's actions on the agent's own configuration).
    ///
    /// # Errors
    /// A sentence for the command's reply.
    pub(crate) fn of(a: &Action) -> Result<Self, String> {
        Ok(match a {
            Action::Terminate { grace_seconds } => Self::Terminate {
                grace_seconds: *grace_seconds,
            },
            Action::Signal { signal } if signal == "SIGKILL" => Self::Kill,
            Action::Signal { signal } => Self::Signal {
                signal: signal.clone(),
            },
            Action::ReleaseCache => Self::ReleaseCache,
            Action::Park => Self::Park,
            Action::Resume => Self::Resume,
            Action::LimitMemory { gib } => Self::LimitMemory { gib: *gib },
            Action::Notify | Action::RunCommand { .. } => {
                return Err(format!("{} is not offered by the agent's API", a.label()))
            }
        })
    }

    /// The engine's action, its parameters checked: a grace period from 0 to 3600 s, a
    /// signal by a known name or number, a limit above 0 and at most the largest GPU's size.
    ///
    /// # Errors
    /// A sentence for the client (the agent answers it with a 400).
    pub(crate) fn action(&self) -> Result<Action, String> {
        Ok(match self {
            Self::Terminate { grace_seconds: g } => {
                if !(0.0..=MAX_ACTION_SECONDS).contains(g) {
                    return Err("grace_seconds is from 0 to 3600".into());
                }
                Action::Terminate { grace_seconds: *g }
            }
            Self::Kill => Action::Signal {
                signal: "SIGKILL".into(),
            },
            Self::Signal { signal } => {
                if parse_signal(signal).is_none() {
                    return Err(format!("unknown signal {signal}"));
                }
                Action::Signal {
                    signal: signal.clone(),
                }
            }
            Self::ReleaseCache => Action::ReleaseCache,
            Self::Park => Action::Park,
            Self::Resume => Action::Resume,
            Self::LimitMemory { gib } => {
                if !(gib.is_finite() && *gib > 0.0 && *gib <= MAX_LIMIT_GIB) {
                    return Err(limit_needs_gib());
                }
                Action::LimitMemory { gib: *gib }
            }
        })
    }
}

impl WireCommand {
    /// The body a window posts for `c`: a manual action on a process, or why an agent is not
    /// asked it (its settings and recording are its own configuration).
    ///
    /// # Errors
    /// A sentence for the command's reply.
    pub fn of(c: &EngineCommand) -> Result<Self, String> {
        let EngineCommand::Manual { key, action, .. } = c else {
            return Err("settings and recording belong to the agent's own configuration; change them on the server".into());
        };
        Ok(Self {
            pid: key.0.pid,
            start_time: key.0.start_time_ms,
            gpu: Some(key.1),
            action: WireAction::of(action)?,
        })
    }

    /// Reads a command's body: the JSON's shape (`bad command: …` when it is not one), then
    /// the action and the parameters it needs.
    ///
    /// # Errors
    /// A sentence for the client (the agent answers it with a 400).
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let f: FlatCommand =
            serde_json::from_slice(body).map_err(|e| format!("bad command: {e}"))?;
        Self::try_from(f)
    }

    /// The engine's action (see [`WireAction::action`]).
    ///
    /// # Errors
    /// A parameter out of its range, in a sentence for the client.
    pub fn action(&self) -> Result<Action, String> {
        self.action.action()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::CommandFrom;
    use crate::model::ProcessKey;

    const FIXTURE: &str = include_str!("../../tests/fixtures/wire_command.json");

    /// Every action the agent's API takes, as the window's menu sends it.
    fn every_action() -> Vec<Action> {
        vec![
            Action::Terminate {
                grace_seconds: 12.5,
            },
            Action::Signal {
                signal: "SIGKILL".into(),
            },
            Action::Signal {
                signal: "SIGUSR1".into(),
            },
            Action::ReleaseCache,
            Action::Park,
            Action::Resume,
            Action::LimitMemory { gib: 8.0 },
        ]
    }

    fn manual(action: Action) -> EngineCommand {
        let key = ProcessKey {
            pid: 4242,
            start_time_ms: 1_796_000_000_123,
        };
        EngineCommand::Manual {
            key: (key, 1),
            action,
            from: CommandFrom::Window,
        }
    }

    /// The window's body for each action, as the agent reads it: the same action, on the same
    /// process and GPU.
    #[test]
    fn every_action_goes_from_the_window_to_the_agent_unchanged() {
        for a in every_action() {
            let body = serde_json::to_vec(&WireCommand::of(&manual(a.clone())).expect("offered"))
                .expect("json");
            let c = WireCommand::parse(&body).expect("read");
            assert_eq!(c.action().as_ref(), Ok(&a));
            assert_eq!(
                (c.pid, c.start_time, c.gpu),
                (4242, 1_796_000_000_123, Some(1))
            );
            // The serde reading is the same one.
            let again: WireCommand = serde_json::from_slice(&body).expect("serde");
            assert_eq!(again, c);
        }
        assert!(WireCommand::of(&EngineCommand::PauseRecording).is_err());
        let e = WireCommand::of(&manual(Action::Notify)).expect_err("not offered");
        assert_eq!(e, "notify is not offered by the agent's API");
    }

    /// The bodies pinned in `tests/fixtures/wire_command.json` are what the window writes, one
    /// per action, and read back as its actions. `UPDATE_GOLDEN=1` writes the file anew.
    #[test]
    fn the_command_bodies_are_pinned() {
        let lines: Vec<String> = every_action()
            .into_iter()
            .map(|a| serde_json::to_string(&WireCommand::of(&manual(a)).expect("offered")))
            .collect::<Result<_, _>>()
            .expect("json");
        let text = format!("[\n{}\n]\n", lines.join(",\n"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/wire_command.json"
            );
            std::fs::write(path, &text).expect("write the fixture");
        }
        assert_eq!(FIXTURE, text, "the window's command bodies changed");
        let bodies: Vec<serde_json::Value> = serde_json::from_str(FIXTURE).expect("a list");
        for (body, a) in bodies.iter().zip(every_action()) {
            let c = WireCommand::parse(body.to_string().as_bytes()).expect("read");
            assert_eq!(c.action(), Ok(a));
        }
    }

    /// The JSON of docs/agent-api.md, and its refusals in the words of the agent's 400.
    #[test]
    fn the_documented_json_is_read_and_bad_commands_say_why() {
        let c = WireCommand::parse(br#"{"action":"terminate","pid":7,"start_time_ms":5}"#)
            .expect("alias");
        assert_eq!((c.pid, c.start_time, c.gpu), (7, 5, None));
        assert_eq!(
            c.action(),
            Ok(Action::Terminate {
                grace_seconds: DEFAULT_GRACE_SECONDS
            })
        );
        // A parameter of another action is ignored, as it always was.
        let c = WireCommand::parse(br#"{"action":"kill","pid":7,"start_time":5,"gib":3}"#)
            .expect("kill");
        assert_eq!(c.action, WireAction::Kill);
        let refused = |body: &str| match WireCommand::parse(body.as_bytes()) {
            Ok(c) => c.action().map(|_| ()).expect_err(body),
            Err(e) => e,
        };
        let cases = [
            (r#"{"action":"kill","pid":7,"start_time":5,"x":1}"#, "bad command: unknown field `x`"),
            (r#"{"action":"kill","pid":7}"#, "bad command: missing field `start_time`"),
            (r#"{"action":"format_disk","pid":1,"start_time":0}"#, "unknown action \"format_disk\" (terminate, kill, signal, release_cache, limit_memory, park or resume)"),
            (r#"{"action":"signal","pid":1,"start_time":0}"#, "a signal command needs \"signal\""),
            (r#"{"action":"signal","signal":"SIGNOPE","pid":1,"start_time":0}"#, "unknown signal SIGNOPE"),
            (r#"{"action":"terminate","grace_seconds":3601,"pid":1,"start_time":0}"#, "grace_seconds is from 0 to 3600"),
            (r#"{"action":"terminate","grace_seconds":-1,"pid":1,"start_time":0}"#, "grace_seconds is from 0 to 3600"),
            (r#"{"action":"limit_memory","pid":1,"start_time":0}"#, "a limit_memory command needs \"gib\" (more than 0, at most the GPU's size)"),
            (r#"{"action":"limit_memory","gib":0,"pid":1,"start_time":0}"#, "a limit_memory command needs \"gib\" (more than 0, at most the GPU's size)"),
        ];
        for (body, why) in cases {
            let e = refused(body);
            assert!(e.starts_with(why), "{body}: {e}");
        }
    }
}
