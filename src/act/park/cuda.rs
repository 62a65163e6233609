//! The CUDA driver's checkpoint API (`cuCheckpointProcess*`, driver r570 and later), loaded
//! from `libcuda.so.1` at run time like NVML: the binary starts without a driver.
//!
//! Only this file calls into libcuda. Every call names another process by pid; none creates a
//! CUDA context in vramwarden (no `cuInit`).

use std::os::raw::{c_int, c_uint};

/// The oldest CUDA driver API version with the checkpoint calls (12.8, driver r570).
const MIN_DRIVER_API: i32 = 12_080;

/// `CUresult` values named in messages.
const CUDA_SUCCESS: c_int = 0;

/// A process's state as the driver's checkpoint API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CudaState {
    /// Running normally.
    Running,
    /// Locked: its CUDA calls block (between lock and checkpoint, or restore and unlock).
    Locked,
    /// Checkpointed: its GPU memory is in host memory and the GPU holds nothing of it.
    Checkpointed,
    /// A checkpoint or restore failed; the process cannot use CUDA until it is restored.
    Failed,
    /// A state this build does not know (the driver's number).
    Other(i32),
}

impl CudaState {
    fn from_raw(v: c_int) -> Self {
        match v {
            0 => Self::Running,
            1 => Self::Locked,
            2 => Self::Checkpointed,
            3 => Self::Failed,
            n => Self::Other(n),
        }
    }

    /// One word for tables and logs.
    pub(crate) fn label(self) -> String {
        match self {
            Self::Running => "running".into(),
            Self::Locked => "locked".into(),
            Self::Checkpointed => "checkpointed".into(),
            Self::Failed => "failed".into(),
            Self::Other(n) => format!("state {n}"),
        }
    }
}

/// `CUcheckpointLockArgs`: the timeout first, then reserved words that must be zero.
#[repr(C)]
struct LockArgs {
    timeout_ms: c_uint,
    reserved0: c_uint,
    reserved1: [u64; 7],
}

type GetStateFn = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
type LockFn = unsafe extern "C" fn(c_int, *mut LockArgs) -> c_int;
type PlainFn = unsafe extern "C" fn(c_int, *mut std::ffi::c_void) -> c_int;
type VersionFn = unsafe extern "C" fn(*mut c_int) -> c_int;

/// A driver call that failed: which one and the `CUresult`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CudaError {
    /// libcuda could not be loaded.
    #[error("the NVIDIA CUDA driver library (libcuda.so.1) could not be loaded: {0}")]
    NoLibrary(String),
    /// The driver is too old for the checkpoint API.
    #[error("park and resume need the CUDA driver API 12.8 or later (NVIDIA driver r570 or later); this driver offers {0}")]
    TooOld(String),
    /// A call returned an error.
    #[error("{call} failed: {}", describe(*.code))]
    Call {
        /// The function.
        call: &'static str,
        /// Its `CUresult`.
        code: i32,
    },
}

/// The words for a `CUresult` of the checkpoint calls.
fn describe(code: i32) -> String {
    let what = match code {
        1 => "invalid value (the process has no CUDA context, or is not in the state this step needs)",
        3 => "the process has not initialised CUDA (it is not a CUDA process)",
        4 => "the CUDA driver is shutting down",
        100 => "no CUDA-capable device",
        201 => "invalid context",
        304 => "an operating-system call failed (permission, or the process is gone)",
        401 => "illegal state (the process is not in the state this step needs)",
        600 => "not ready (the process did not reach a safe point before the lock's timeout)",
        700..=720 => "the process's GPU work failed",
        801 => "not supported (this GPU, driver or process cannot be checkpointed)",
        999 => "unknown driver error",
        _ => "driver error",
    };
    format!("{what} (CUresult {code})")
}

/// The loaded checkpoint entry points.
pub(crate) struct CudaCheckpoint {
    _lib: libloading::Library,
    get_state: GetStateFn,
    lock: LockFn,
    checkpoint: PlainFn,
    restore: PlainFn,
    unlock: PlainFn,
}

fn symbol<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Result<T, CudaError> {
    // SAFETY: the caller names the C signature of `name` as `T` (the CUDA driver API's).
    unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|_| {
        CudaError::TooOld(format!(
            "no {} in libcuda.so.1",
            String::from_utf8_lossy(name.strip_suffix(b"\0").unwrap_or(name))
        ))
    })
}

impl CudaCheckpoint {
    /// Loads libcuda and checks that its driver API is at least [`MIN_DRIVER_API`].
    ///
    /// # Errors
    /// No library, no checkpoint symbols, or a driver API older than 12.8.
    pub(crate) fn load() -> Result<Self, CudaError> {
        // SAFETY: loading the NVIDIA driver's library runs its initialisers, as NVML's does.
        let lib = unsafe { libloading::Library::new("libcuda.so.1") }
            .map_err(|e| CudaError::NoLibrary(e.to_string()))?;
        let version_fn: VersionFn = symbol(&lib, b"cuDriverGetVersion\0")?;
        let mut version: c_int = 0;
        // SAFETY: cuDriverGetVersion writes one int; it needs no cuInit.
        let r = unsafe { version_fn(&mut version) };
        if r != CUDA_SUCCESS {
            return Err(CudaError::Call {
                call: "cuDriverGetVersion",
                code: r,
            });
        }
        if version < MIN_DRIVER_API {
            return Err(CudaError::TooOld(version_text(version)));
        }
        LOADED.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(Self {
            get_state: symbol(&lib, b"cuCheckpointProcessGetState\0")?,
            lock: symbol(&lib, b"cuCheckpointProcessLock\0")?,
            checkpoint: symbol(&lib, b"cuCheckpointProcessCheckpoint\0")?,
            restore: symbol(&lib, b"cuCheckpointProcessRestore\0")?,
            unlock: symbol(&lib, b"cuCheckpointProcessUnlock\0")?,
            _lib: lib,
        })
    }

    /// Runs `call` (the checkpoint calls need no `cuInit` in the calling process: a
    /// "not initialised" answer is about the target process).
    fn with_init(
        &self,
        name: &'static str,
        mut call: impl FnMut() -> c_int,
    ) -> Result<(), CudaError> {
        match call() {
            CUDA_SUCCESS => Ok(()),
            code => Err(CudaError::Call { call: name, code }),
        }
    }

    /// The process's state.
    ///
    /// # Errors
    /// The driver's, e.g. for a process without CUDA.
    pub(crate) fn state(&self, pid: u32) -> Result<CudaState, CudaError> {
        let mut raw: c_int = -1;
        // SAFETY: writes one int for a pid; any pid is a valid argument.
        self.with_init("cuCheckpointProcessGetState", || unsafe {
            (self.get_state)(pid as c_int, &mut raw)
        })?;
        Ok(CudaState::from_raw(raw))
    }

    /// Locks the process: waits at most `timeout_ms` for its CUDA work to reach a safe point.
    ///
    /// # Errors
    /// The driver's (a timeout is "not ready").
    pub(crate) fn lock(&self, pid: u32, timeout_ms: u32) -> Result<(), CudaError> {
        let mut args = LockArgs {
            timeout_ms,
            reserved0: 0,
            reserved1: [0; 7],
        };
        // SAFETY: the argument struct has the driver's layout and zeroed reserved words.
        self.with_init("cuCheckpointProcessLock", || unsafe {
            (self.lock)(pid as c_int, &mut args)
        })
    }

    /// Moves the locked process's GPU memory to host memory and releases the GPU.
    ///
    /// # Errors
    /// The driver's.
    pub(crate) fn checkpoint(&self, pid: u32) -> Result<(), CudaError> {
        self.plain("cuCheckpointProcessCheckpoint", self.checkpoint, pid)
    }

    /// Moves a checkpointed process's memory back to the GPU (it stays locked).
    ///
    /// # Errors
    /// The driver's (e.g. not enough free GPU memory).
    pub(crate) fn restore(&self, pid: u32) -> Result<(), CudaError> {
        self.plain("cuCheckpointProcessRestore", self.restore, pid)
    }

    /// Lets a locked process's CUDA calls go on.
    ///
    /// # Errors
    /// The driver's.
    pub(crate) fn unlock(&self, pid: u32) -> Result<(), CudaError> {
        self.plain("cuCheckpointProcessUnlock", self.unlock, pid)
    }

    fn plain(&self, name: &'static str, f: PlainFn, pid: u32) -> Result<(), CudaError> {
        // SAFETY: NULL arguments are the documented defaults of these calls.
        self.with_init(name, || unsafe { f(pid as c_int, std::ptr::null_mut()) })
    }
}

/// Set once libcuda has been loaded in this process (see [`exit_if_loaded`]).
static LOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ends the process with `code` at once when libcuda was loaded in it: its exit handlers can
/// crash while its own threads are still running (seen on the H200 after a resume, signal 11
/// at exit). Call it last, with everything written; stdout and stderr are flushed first.
/// Returns when libcuda was never loaded.
pub fn exit_if_loaded(code: u8) {
    if LOADED.load(std::sync::atomic::Ordering::SeqCst) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: _exit ends the process without running exit handlers; nothing is left to
        // write (the caller's work is done and the standard streams are flushed).
        unsafe { libc::_exit(i32::from(code)) };
    }
}

/// "12.8" from 12080.
fn version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_args_have_the_drivers_layout() {
        assert_eq!(std::mem::size_of::<LockArgs>(), 64);
        assert_eq!(std::mem::offset_of!(LockArgs, timeout_ms), 0);
        assert_eq!(std::mem::offset_of!(LockArgs, reserved1), 8);
    }

    #[test]
    fn versions_and_states_in_words() {
        assert_eq!(version_text(12_080), "12.8");
        assert_eq!(version_text(13_000), "13.0");
        assert_eq!(CudaState::from_raw(2), CudaState::Checkpointed);
        assert_eq!(CudaState::from_raw(9).label(), "state 9");
        assert!(describe(600).contains("not ready"));
    }

    #[test]
    fn without_a_driver_load_says_which_library_is_missing() {
        // This machine has no NVIDIA driver in CI: the error names the library. Where a
        // driver is installed the load succeeds (it refuses a driver older than 12.8 itself).
        match CudaCheckpoint::load() {
            Err(CudaError::NoLibrary(_)) | Ok(_) => {}
            Err(e) => assert!(e.to_string().contains("12.8"), "{e}"),
        }
    }
}
