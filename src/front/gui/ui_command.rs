//! What the panes, menus, windows and keys ask of the window: one [`UiCommand`] each, pushed
//! into the frame's queue while drawing and carried out once, after the frame is drawn, in one
//! place (the app's `run_commands`).

use crate::act::rules::Action;
use crate::engine::EngineCommand;
use crate::front::gui::connect::{ConnectRequest, SavedHost};
use crate::model::history::ProcSeriesKey;

/// What the Help window shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Help {
    /// The keyboard shortcuts.
    Shortcuts,
    /// The version and where the project lives.
    About,
}

/// One request of the UI, carried out at the end of the frame it was asked in.
#[derive(Debug, Clone, PartialEq)]
pub enum UiCommand {
    /// File → Settings… (Ctrl+,): the Settings window on the settings in force.
    OpenSettings,
    /// File → Connect to host…, or a saved host without a token file: the connect window
    /// (filled with the host when given).
    OpenConnect(Option<SavedHost>),
    /// Help → Keyboard shortcuts (F1) or About.
    OpenHelp(Help),
    /// Sessions → Browse sessions….
    BrowseSessions,
    /// Sessions → Open file…: the file dialog.
    PickSessionFile,
    /// Sessions → Import nvidia-smi log….
    ImportNvidiaSmi,
    /// Sessions → Export to CSV….
    OpenExport,
    /// Sessions → Sessions on the agent…: its list asked for and its window opened.
    OpenAgentSessions,
    /// The agent's sessions window → Refresh.
    RefreshAgentSessions,
    /// The agent's sessions window → Open: download the log of that name (it opens once
    /// here).
    DownloadAgentSession(String),
    /// Leave the recorded session for the live data.
    BackToLive,
    /// A manual action on a process (detail pane, row menu, Delete): the confirmation
    /// dialog, which sends it on yes.
    AskAction(ProcSeriesKey, Action),
    /// A command to the engine shown (an action confirmed, recording paused or resumed).
    Engine(EngineCommand),
    /// Settings → Rules → Test this rule: the rule's index and the test to send.
    TestRule(usize, EngineCommand),
    /// Settings → Save: the draft written to the settings file (on a worker thread).
    SaveSettings(Box<crate::engine::settings::Settings>),
    /// Saved settings, to apply to this computer's engine.
    ApplySettings(Box<crate::engine::settings::Settings>),
    /// A leak episode clicked in the Leaks tab: its process selected, its session opened.
    GoToLeak(crate::front::gui::leaks::LeakClick),
    /// Start this computer's demo (history cleared).
    StartDemo,
    /// Start this computer's driver again (back from an agent: the source it had).
    RetryDriver,
    /// Ask before switching this computer's source (true: to the demo), history on screen
    /// being cleared.
    AskSwitchSource(bool),
    /// An agent refused the token: the connect window for its host, saying so.
    EnterToken(SavedHost),
    /// Open and attach the host of the connect window.
    Connect(ConnectRequest),
    /// A host chosen in the selector (`None`: this computer; else its index in the saved
    /// list).
    SwitchHost(Option<usize>),
    /// Forget a saved host (shown: back to this computer first).
    ForgetHost(SavedHost),
    /// Leave the agent shown for this computer.
    Disconnect,
    /// Start or cancel a file job (past sessions' leaks, saving the settings, a job's ✖).
    Job(crate::link::jobs::JobCommand),
}
