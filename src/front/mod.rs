//! The front ends: the command line, the headless agent and the window. None imports another;
//! what they share lives below them (the engine, the link, the session log).

pub mod agent;
pub mod cli;
#[cfg(feature = "gui")]
pub mod gui;
