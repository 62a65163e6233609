//! The activity log's lines: what an action did, to whom, and how it ended.

use super::eval::Target;
use crate::model::outcome::Outcome;
use crate::model::UnixMs;

/// One line of the activity log.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Activity {
    /// When.
    pub unix_ms: UnixMs,
    /// Rule name ("manual" for the user's own actions).
    pub rule: String,
    /// The target.
    pub target: Target,
    /// What was (or would have been) done.
    pub action: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Details: the reason for a skip, the error, the command's output.
    pub detail: String,
    /// Which entry of an action this is (counters count each action once).
    pub entry: Entry,
}

/// Which entry of an action an activity line is: an action has one entry that stands for it
/// and its outcome, and may have one before it (asked, its answer follows) and one after it
/// (the driver's figure after a release).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Entry {
    /// The action and how it ended (a late answer is this one).
    #[default]
    Action,
    /// The action was started; its answer follows in a later entry.
    Asked,
    /// A figure that follows an action already counted.
    FollowUp,
}

/// The label suffix of the entry that carries a companion's late answer.
pub const ANSWER_SUFFIX: &str = ": the companion's answer";
/// The label suffix of the entry with the driver's figure after a release.
pub const DRIVER_FIGURE_SUFFIX: &str = ": the driver's figure";
/// How the entry of a companion action ends when its answer comes later.
pub const ANSWER_FOLLOWS: &str = "its answer follows";

impl Activity {
    /// True for the one entry that stands for an action and its outcome: a companion's
    /// late answer counts, the "asked, its answer follows" entry before it and the driver's
    /// figure after a release do not (counters count each action once, with how it ended).
    pub(crate) fn counts_as_action(&self) -> bool {
        self.entry == Entry::Action
    }
}
