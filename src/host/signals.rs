//! The signals vramwarden changes for itself at start.

/// Ignores `SIGXFSZ`, so that a write past a file-size limit (`ulimit -f`, `RLIMIT_FSIZE`)
/// fails with `EFBIG` — said in the status bar and on stderr as a recording failure, like a
/// full disk — instead of killing the whole program with a core dump, its default action.
pub fn ignore_file_size_limit_signal() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: SIG_IGN installs no handler code, so nothing can run in a signal context;
    // called at start, before any other thread that could race on the disposition.
    if let Err(e) = unsafe { signal(Signal::SIGXFSZ, SigHandler::SigIgn) } {
        tracing::debug!("SIGXFSZ stays at its default action: {e}");
    }
}
