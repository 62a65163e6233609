//! How an action ended: one word shared by the executor, the session log and every front end.

/// How an action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Dry run: what would have happened is in the detail.
    WouldAct,
    /// Done.
    Acted,
    /// Tried and failed.
    Failed,
    /// Not done: protected, not ours, or no longer the same process.
    Skipped,
}

impl Outcome {
    /// Lower-case label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::WouldAct => "would act",
            Outcome::Acted => "acted",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
        }
    }
}
