//! What vramwarden reads from and does to this computer apart from the GPU: process facts from
//! `/proc` and NSS, containers, CPU and memory use, the data and config folders, the log,
//! terminal output, the run's own CPU per part, and the checks on a file that decides what vramwarden does.

pub mod container;
pub mod cost;
pub mod logging;
pub mod paths;
pub(crate) mod pid_namespace;
pub mod proc_usage;
pub mod procinfo;
pub mod signals;
pub mod term;
pub(crate) mod trusted_file;
pub(crate) mod user_names;
