//! The bearer token that guards the agent's API: kept in a file only its owner can read,
//! created with a random value on first start, compared in constant time.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The default token file: `agent.token` beside the settings file.
pub fn default_path(config: Option<&Path>) -> PathBuf {
    let cfg = crate::engine::settings::config_path(config);
    cfg.parent()
        .map_or_else(|| PathBuf::from("agent.token"), |d| d.join("agent.token"))
}

/// [`default_path`] (of the usual settings file) where such a file is: the token of an agent
/// on this computer, which a window offers when it connects.
#[cfg(feature = "gui")]
pub(crate) fn default_path_if_there() -> Option<PathBuf> {
    file_if_there(default_path(None))
}

/// `path` when it is a file.
#[cfg(feature = "gui")]
fn file_if_there(path: PathBuf) -> Option<PathBuf> {
    path.is_file().then_some(path)
}

/// A new random token: 32 bytes from the kernel's generator, as 64 hex digits.
///
/// # Errors
/// When `/dev/urandom` cannot be read.
pub(crate) fn generate() -> std::io::Result<String> {
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Reads the token at `path`, creating the file (0600, its folder 0700) with a random token
/// when it does not exist. Returns the token and whether it was created.
///
/// # Errors
/// A sentence: the file cannot be read or created, is empty, or is readable by others.
pub fn load_or_create(path: &Path) -> Result<(String, bool), String> {
    match read_checked(path) {
        Ok(text) => {
            let t = text.trim().to_string();
            if t.len() < 16 {
                return Err(format!(
                    "{}: the token is empty or shorter than 16 characters",
                    path.display()
                ));
            }
            Ok((t, false))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| format!("{}: cannot create the folder: {e}", dir.display()))?;
            }
            // Where it would be refused when read (a folder others can write to), it is not made.
            crate::host::trusted_file::check_place(path, &RULES)
                .map_err(|e| format!("{}: will not create the token file: {e}", path.display()))?;
            let token = generate().map_err(|e| format!("cannot make a random token: {e}"))?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| format!("{}: cannot create the token file: {e}", path.display()))?;
            f.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(|e| format!("{}: cannot write the token: {e}", path.display()))?;
            Ok((token, true))
        }
        Err(e) => Err(format!(
            "{}: cannot read the token file: {e}",
            path.display()
        )),
    }
}

/// Largest token file read, bytes.
const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// What a token file must be.
const RULES: crate::host::trusted_file::Rules = crate::host::trusted_file::Rules {
    what: "the token file",
    max_bytes: MAX_TOKEN_FILE_BYTES,
    secret: true,
};

/// Reads a token file after checking the file itself (not the path, which may change in
/// between): a regular file of at most [`MAX_TOKEN_FILE_BYTES`], opened without blocking (a
/// FIFO never hangs us), that belongs to us or to root, in a folder no one else can replace
/// it in, and that no one else may read or write (a token another user planted or can read
/// is no secret). See [`crate::host::trusted_file`].
pub(crate) fn read_checked(path: &Path) -> std::io::Result<String> {
    use crate::host::trusted_file::{read, TrustError};
    read(path, &RULES).map_err(|e| match e {
        TrustError::Io(e) => e,
        TrustError::Refused(why) => std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
    })
}

/// Compares in time that depends only on the lengths, never on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    let n = a.len().max(b.len());
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= x ^ y;
    }
    diff == 0
}

/// True when an `Authorization` header value carries `token` as a bearer token.
pub(crate) fn authorized(header: Option<&str>, token: &str) -> bool {
    let Some(h) = header else {
        return false;
    };
    let h = h.trim();
    let Some(given) = h
        .strip_prefix("Bearer ")
        .or_else(|| h.strip_prefix("bearer "))
    else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), token.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "gui")]
    #[test]
    fn a_token_file_is_offered_only_where_it_is() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("agent.token");
        assert_eq!(file_if_there(path.clone()), None);
        std::fs::write(&path, "t").expect("write");
        assert_eq!(file_if_there(path.clone()), Some(path));
        assert_eq!(
            file_if_there(dir.path().to_path_buf()),
            None,
            "a folder is no token file"
        );
    }
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn compare_and_header() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(authorized(Some("Bearer s3cr3t"), "s3cr3t"));
        assert!(!authorized(Some("Basic s3cr3t"), "s3cr3t"));
        assert!(!authorized(Some("Bearer s3cr3"), "s3cr3t"));
        assert!(!authorized(None, "s3cr3t"));
    }

    #[test]
    fn created_0600_then_read_back_and_loose_modes_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sub").join("agent.token");
        let (t, created) = load_or_create(&p).expect("create");
        assert!(created && t.len() == 64);
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create(&p).expect("read"), (t, false));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(load_or_create(&p).is_err_and(|e| e.contains("chmod 600")));
    }
}
