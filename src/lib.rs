/*!
vramwarden watches NVIDIA GPU memory: a background thread samples every GPU and every process
on it (through NVML, or through built-in simulated GPUs), keeps hours of compact history and
serves it to an egui window or to headless commands.

Data flows one way: [`source`] → [`sampler`] → [`monitor`] (history, process table) → [`ui`].
The UI never calls NVML.
*/

pub mod agent;
pub mod cli;
pub mod cli_docs;
pub mod container;
pub mod engine;
pub mod format;
pub mod history;
pub mod import;
pub mod leak;
pub mod leak_watch;
pub mod link;
pub mod logging;
pub mod model;
pub mod monitor;
pub mod notify;
pub mod oom_watch;
pub mod proc_usage;
pub mod procinfo;
pub mod rules;
pub mod sampler;
pub mod session;
pub mod settings;
pub mod snapshot_out;
pub mod source;
pub mod torch;
#[cfg(feature = "gui")]
pub mod ui;
