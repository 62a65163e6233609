//! Writing and removing the hook's files without following symlinks: every file is made
//! beside its final name (`O_CREAT | O_EXCL | O_NOFOLLOW`, relative to a folder opened with
//! `O_NOFOLLOW`) and renamed over it, so a symlink or hard link planted at a file's name is
//! replaced, never written through; a symlink planted at the package's folder is refused.
//! And, as root, an interpreter or environment another user can change is refused before it
//! is run or written to (running it would run that user's `.pth` files as root).

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::TorchError;

fn cstr(s: &str) -> Result<CString, TorchError> {
    CString::new(s).map_err(|_| TorchError::Hook(format!("{s:?}: a NUL byte in a name")))
}

fn last_err(what: &Path) -> TorchError {
    TorchError::Hook(format!(
        "{}: {}",
        what.display(),
        std::io::Error::last_os_error()
    ))
}

/// Opens the folder `name` in `dir` (or `dir` itself with `None`), refusing a symlink.
fn open_dir(dir: Option<&OwnedFd>, path: &Path, name: &str) -> Result<OwnedFd, TorchError> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = match dir {
        Some(d) => {
            let n = cstr(name)?;
            // SAFETY: plain syscall with a valid folder descriptor and a NUL-terminated name.
            unsafe { libc::openat(d.as_raw_fd(), n.as_ptr(), flags) }
        }
        None => {
            let p = CString::new(path.as_os_str().as_bytes())
                .map_err(|_| TorchError::Hook(format!("{}: a NUL byte", path.display())))?;
            // SAFETY: plain syscall with a NUL-terminated path.
            unsafe { libc::open(p.as_ptr(), flags) }
        }
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                "is a symlink or not a folder; refusing to write through it".to_string()
            }
            _ => e.to_string(),
        };
        return Err(TorchError::Hook(format!("{}: {why}", path.display())));
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The site folder, opened, and the package folder in it (made 0755 when missing).
pub(crate) struct SiteDirs {
    site: OwnedFd,
    pkg: OwnedFd,
    site_path: PathBuf,
}

impl SiteDirs {
    /// Opens `site` and its `pkg` folder, creating that one.
    ///
    /// # Errors
    /// A folder that cannot be opened or made, or a symlink where the package folder goes.
    pub(crate) fn open(site: &Path, pkg: &str) -> Result<Self, TorchError> {
        std::fs::create_dir_all(site)
            .map_err(|e| TorchError::Hook(format!("{}: {e}", site.display())))?;
        let site_fd = open_dir(None, site, "")?;
        let n = cstr(pkg)?;
        // SAFETY: plain syscall with a valid folder descriptor and a NUL-terminated name.
        let rc = unsafe { libc::mkdirat(site_fd.as_raw_fd(), n.as_ptr(), 0o755) };
        if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(last_err(&site.join(pkg)));
        }
        let pkg_fd = open_dir(Some(&site_fd), &site.join(pkg), pkg)?;
        Ok(Self {
            site: site_fd,
            pkg: pkg_fd,
            site_path: site.to_path_buf(),
        })
    }

    /// The folder a relative name (`pkg/file` or `file`) lives in, and its last part.
    fn split<'a>(&self, rel: &'a str) -> (&OwnedFd, &'a str) {
        match rel.rsplit_once('/') {
            Some((_, file)) => (&self.pkg, file),
            None => (&self.site, rel),
        }
    }

    /// Writes `text` to `rel` (0644): a new file beside it, renamed over it.
    ///
    /// # Errors
    /// When the file cannot be made, written or renamed.
    pub(crate) fn write(&self, rel: &str, text: &str) -> Result<PathBuf, TorchError> {
        let path = self.site_path.join(rel);
        let (dir, name) = self.split(rel);
        let tmp = format!(".{name}.vramwarden-{}", std::process::id());
        let (t, n) = (cstr(&tmp)?, cstr(name)?);
        // SAFETY: unlinkat of a name of ours in a folder we opened (a leftover of a crash).
        unsafe { libc::unlinkat(dir.as_raw_fd(), t.as_ptr(), 0) };
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: plain syscall with a valid folder descriptor and a NUL-terminated name.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), t.as_ptr(), flags, 0o644) };
        if fd < 0 {
            return Err(last_err(&path));
        }
        // SAFETY: a new descriptor we own.
        let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| TorchError::Hook(format!("{}: {e}", path.display())))?;
        // SAFETY: renameat within one folder we opened; both names NUL-terminated.
        let rc =
            unsafe { libc::renameat(dir.as_raw_fd(), t.as_ptr(), dir.as_raw_fd(), n.as_ptr()) };
        if rc != 0 {
            let e = last_err(&path);
            // SAFETY: as above.
            unsafe { libc::unlinkat(dir.as_raw_fd(), t.as_ptr(), 0) };
            return Err(e);
        }
        Ok(path)
    }
}

/// Removes `rel` in `site` without following a symlink at the package folder; true when a
/// file was removed.
///
/// # Errors
/// A file that exists but cannot be removed, or a symlink where the package folder is.
pub fn remove(site: &Path, rel: &str) -> Result<bool, TorchError> {
    let path = site.join(rel);
    let site_fd = match open_dir(None, site, "") {
        Ok(fd) => fd,
        Err(_) if !site.exists() => return Ok(false),
        Err(e) => return Err(e),
    };
    let (dir, name) = match rel.rsplit_once('/') {
        Some((pkg, file)) => match open_dir(Some(&site_fd), &site.join(pkg), pkg) {
            Ok(fd) => (fd, file),
            Err(_) if !site.join(pkg).exists() => return Ok(false),
            Err(e) => return Err(e),
        },
        None => (site_fd, rel),
    };
    let n = cstr(name)?;
    // SAFETY: unlinkat (never follows a symlink at the name) in a folder we opened.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), n.as_ptr(), 0) } == 0 {
        return Ok(true);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOENT) => Ok(false),
        _ => Err(last_err(&path)),
    }
}

/// `program` as `Command` would find it: itself when it has a `/`, else the first match on
/// `PATH`.
fn resolve(program: &Path) -> Option<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Some(program.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The first part of `path` (itself or a folder above it; the path as given and its target)
/// that another user than root owns or can write to, with its owner.
fn foreign_part(path: &Path) -> Option<(PathBuf, u32)> {
    let mut paths = vec![path.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(path) {
        paths.push(real);
    }
    for p in &paths {
        for part in p.ancestors().filter(|a| !a.as_os_str().is_empty()) {
            let Ok(md) = std::fs::symlink_metadata(part) else {
                continue;
            };
            let sticky = md.mode() & 0o1000 != 0;
            let writable = md.mode() & 0o022 != 0 && !(md.is_dir() && sticky);
            if md.uid() != 0 || (writable && !md.file_type().is_symlink()) {
                return Some((part.to_path_buf(), md.uid()));
            }
        }
    }
    None
}

/// As root: refuses `what` (an interpreter, a site-packages folder) when any part of it, or
/// of the path it leads to, belongs to or can be changed by another user. Says why and what
/// to run instead. Not root: nothing to check (a user acts on what is theirs).
///
/// # Errors
/// [`TorchError::Hook`] with the reason.
pub(crate) fn refuse_foreign(what: &Path, python: &Path) -> Result<(), TorchError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let Some(path) = resolve(what) else {
        return Ok(());
    };
    let Some((part, uid)) = foreign_part(&path) else {
        return Ok(());
    };
    let user = crate::host::user_names::user_name_of(uid);
    Err(TorchError::Hook(format!(
        "refusing as root: {} is not root's ({} belongs to {user} (uid {uid}) or can be written by others); \
         running that interpreter or writing into its site-packages as root would let that user run code as root. \
         Enable it as its owner instead: sudo -u {user} vramwarden torch enable --python {}",
        path.display(),
        part.display(),
        python.display()
    )))
}
