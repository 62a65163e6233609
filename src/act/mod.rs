//! What vramwarden does to processes: cleanup rules and their executor, the PyTorch companion
//! (release caches, limit memory) and park/resume through the driver's checkpoint API. Every
//! action checks identity (pid + start time) right before acting.

pub mod guard;
pub mod park;
pub mod rules;
pub mod torch;
