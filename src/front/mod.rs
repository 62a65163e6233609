//! The front ends: the command line, the headless agent and the window. None imports another;
//! what they share lives below them (the engine, the link, the session log), the words all of
//! them say for the problems the engine reports in [`report_words`], and what the two headless
//! ones share (their errors and exit codes) in [`headless`].

pub mod agent;
pub mod cli;
#[cfg(feature = "gui")]
pub mod gui;
pub(crate) mod headless;
pub mod report_words;
