//! The PyTorch companion (`vramwarden_torch`): a small Python module inside a training process
//! that answers over a private Unix socket with its allocator's figures and can release its
//! cache. This module is the app's side of it, as a library:
//!
//! - [`discover`](mod@discover): the companions' sockets in the runtime folder, each peer-checked, with
//!   their [`TorchFacts`];
//! - [`Client`]: one connection, checked on connect (the peer's pid is the one the socket's
//!   name claims, with the expected start time; its uid is ours unless we are root, and, for
//!   root too, the uid of the socket's folder and of the process: see [`trust`]), then
//!   [`Client::stats`], [`Client::release_cache`], [`Client::set_fraction`], …; every read and
//!   write has a timeout so a hung process never blocks the caller;
//! - [`hook`]: the embedded Python files and the `.pth` hook that `vramwarden torch enable`
//!   writes into an interpreter's site-packages;
//! - [`release`](mod@release): the one path that releases a process's cache;
//! - [`Watch`]: a background poller for the engine (one thread, persistent connections); a tick
//!   reads its map with [`Watch::get`] (pid + start time), never the sockets.

pub mod client;
pub mod discover;
pub mod error;
pub mod hook;
pub(crate) mod nofollow;
pub mod protocol;
pub mod release;
pub mod sockets;
pub(crate) mod trust;
pub mod watch;

pub use client::{peer_cred, Client, PeerCred, Pushed, Subscribed, DEFAULT_TIMEOUT};
pub use discover::{discover, CompanionInfo};
pub use error::TorchError;
pub use protocol::{
    DeviceRelease, DeviceStats, FractionSet, Hello, Release, Segment, Segments, Stats, Summary,
    TorchFacts,
};
pub use release::{release, RELEASE_TIMEOUT};
pub use sockets::{list_sockets, runtime_dir, socket_name};
pub(crate) use watch::all_runtime_dirs;
pub use watch::{Watch, WatchState};
