//! Auto-cleanup rules: the model (serde, in the settings file), pure evaluation, and the
//! actions — the only code that signals or spawns.

pub mod action;
pub mod activity;
pub mod command;
pub mod companion_action;
pub(crate) mod companion_worker;
pub mod eval;
pub mod glob;
pub mod model;
pub(crate) mod park_action;
pub mod protect;
pub mod schedule;
pub mod shell;

pub use model::{Action, Conditions, Rule};
