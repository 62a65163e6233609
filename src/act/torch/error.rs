//! What can go wrong talking to a companion.

use std::path::PathBuf;

use crate::model::UnixMs;

/// An error of the companion client, discovery or the hook installer.
#[derive(Debug, thiserror::Error)]
pub enum TorchError {
    /// Neither XDG_RUNTIME_DIR nor a uid to build the /tmp fallback.
    #[error("no runtime folder for the companions' sockets")]
    NoRuntimeDir,
    /// No socket for this pid, or nobody listens on it.
    #[error("process {pid} has no vramwarden_torch companion ({path}: {reason})")]
    NoCompanion {
        /// The pid asked for.
        pid: u32,
        /// Where its socket would be.
        path: PathBuf,
        /// What connecting said.
        reason: String,
    },
    /// The companion's listen queue is full (it may be hung).
    #[error("the companion of process {0} is not accepting connections (busy or hung)")]
    Busy(u32),
    /// A read or write ran past the timeout.
    #[error("the companion of process {0} did not answer in time")]
    Timeout(u32),
    /// The socket's peer is another process than its name claims.
    #[error("refused: the socket for pid {claimed} is served by pid {peer}")]
    PidMismatch {
        /// The pid in the socket's name.
        claimed: u32,
        /// The pid the kernel reports for the peer.
        peer: u32,
    },
    /// The peer runs as another user (and we are not root).
    #[error(
        "refused: the companion of pid {pid} runs as uid {peer_uid}, not as us (uid {our_uid})"
    )]
    ForeignUser {
        /// The peer's pid.
        pid: u32,
        /// The peer's uid.
        peer_uid: u32,
        /// Our effective uid.
        our_uid: u32,
    },
    /// The peer process started at another time than expected (a reused pid).
    #[error("refused: process {pid} started at {actual:?} ms, not at the expected {expected} ms (a reused pid?)")]
    StartTimeMismatch {
        /// The pid.
        pid: u32,
        /// The start time the caller expected.
        expected: UnixMs,
        /// What /proc says now (None: it is gone).
        actual: Option<UnixMs>,
    },
    /// The socket may not speak for the process (see [`super::trust`]): its folder is not its
    /// user's, the process belongs to another user, or the socket's maker is gone.
    #[error("refused: the socket for pid {pid} is not trusted: {detail}")]
    Untrusted {
        /// The pid the socket claims.
        pid: u32,
        /// Why.
        detail: String,
    },
    /// The peer's hello does not match what the kernel says about it.
    #[error("refused: the companion's hello does not match process {pid}: {detail}")]
    HelloMismatch {
        /// The pid.
        pid: u32,
        /// What differs.
        detail: String,
    },
    /// The process has not imported torch.
    #[error(
        "process {0} has not imported torch (the companion runs, but there is no allocator to ask)"
    )]
    TorchNotImported(u32),
    /// The companion answered with an error.
    #[error("the companion of process {pid} says: {error}")]
    Companion {
        /// The pid.
        pid: u32,
        /// Its message.
        error: String,
    },
    /// The reply was not what the protocol says.
    #[error("bad reply from the companion of process {pid}: {detail}")]
    Protocol {
        /// The pid.
        pid: u32,
        /// What was wrong.
        detail: String,
    },
    /// An I/O error on the socket.
    #[error("talking to the companion of process {pid}: {source}")]
    Io {
        /// The pid.
        pid: u32,
        /// The error.
        source: std::io::Error,
    },
    /// Installing or removing the hook failed.
    #[error("{0}")]
    Hook(String),
}
