//! Reading a file that decides what vramwarden does (the settings, with their commands that
//! may run as root; the agent's token): only a regular file of bounded size, opened without
//! blocking (a FIFO or `/dev/zero` given as `--config` is refused, never read until memory
//! runs out or forever), that belongs to us or root and that no one else can write — nor
//! replace: its folder (both the one named and the one the symlinks lead to) must belong to us
//! or root and be writable by no one else, unless it is sticky (`/tmp`). Every symlink on the
//! way (at most [`MAX_LINKS`], followed hop by hop) must be one no one else can repoint: in
//! such a folder, and ours or root's.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrustError {
    /// It could not be opened or read (`NotFound` among them).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It was refused before a byte was read.
    #[error("{0}")]
    Refused(String),
}

/// What a file must be.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// What the file is, for the messages ("the settings file").
    pub what: &'static str,
    /// Most bytes.
    pub max_bytes: u64,
    /// True when no one else may even read it (mode 0600: a secret).
    pub secret: bool,
}

/// The permission bits `m` in octal, for the messages.
fn octal(m: u32) -> String {
    format!("{:o}", m & 0o7777)
}

/// True when `uid` is us or root.
fn ours(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// The write bits that let someone else change a file or folder with `md`: others', and the
/// group's unless the group is its owner's own (a user private group, as umask 002 makes on
/// Debian: named as the user, no other member).
fn foreign_write(md: &std::fs::Metadata) -> u32 {
    let mode = md.mode();
    let private = || {
        use nix::unistd::{Gid, Group, Uid, User};
        let user = User::from_uid(Uid::from_raw(md.uid())).ok().flatten();
        let group = Group::from_gid(Gid::from_raw(md.gid())).ok().flatten();
        matches!((user, group), (Some(u), Some(g)) if u.name == g.name && u.gid == g.gid && g.mem.is_empty())
    };
    if mode & 0o020 != 0 && private() {
        mode & 0o002
    } else {
        mode & 0o022
    }
}

/// Why the folder `dir` lets someone else replace `what` (a file, or a symlink on the way to
/// one) in it, if it does.
fn folder_problem(dir: &Path, what: &str) -> Option<String> {
    let md = std::fs::metadata(dir).ok()?;
    let mode = md.mode();
    if !ours(md.uid()) {
        return Some(format!(
            "{what} is in {}, a folder of uid {}, who could replace it; keep it in a folder of yours or root's",
            dir.display(),
            md.uid()
        ));
    }
    let sticky = mode & 0o1000 != 0;
    (foreign_write(&md) != 0 && !sticky).then(|| {
        format!(
            "{what} is in {}, a folder others can write to (mode {}), so they could replace it; run `chmod go-w {}`",
            dir.display(),
            octal(mode),
            dir.display()
        )
    })
}

/// Why the open file (`md`, at `path`) may not be trusted, if it may not.
fn file_problem(path: &Path, md: &std::fs::Metadata, rules: &Rules) -> Option<String> {
    let kind = md.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a folder"
        } else {
            "not a regular file (a pipe, a device or a socket)"
        };
        return Some(format!("{} {} is {what}", rules.what, path.display()));
    }
    if md.len() > rules.max_bytes {
        return Some(format!(
            "{} {} is {} bytes, more than the {} it may be",
            rules.what,
            path.display(),
            md.len(),
            rules.max_bytes
        ));
    }
    if !ours(md.uid()) {
        return Some(format!(
            "{} {} belongs to uid {}, not to us (uid {}) or root: another user could make vramwarden act for them; remove it, or copy it and pass the copy",
            rules.what,
            path.display(),
            md.uid(),
            nix::unistd::geteuid().as_raw()
        ));
    }
    let mode = md.mode();
    let loose = if rules.secret {
        mode & 0o077
    } else {
        foreign_write(md)
    };
    (loose != 0).then(|| {
        let fix = if rules.secret { "600" } else { "go-w" };
        format!(
            "{} {} can be {} by others (mode {}); run `chmod {fix} {}`",
            rules.what,
            path.display(),
            if rules.secret {
                "read or written"
            } else {
                "written"
            },
            octal(mode),
            path.display()
        )
    })
}

/// Most symlinks followed on the way to a file (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Checks that no one else can replace the file at `path` (there or yet to be made), nor
/// repoint a symlink on the way to it: the folder named, every symlink (see [`resolve`]) and
/// the folder it leads to.
///
/// # Errors
/// [`TrustError::Refused`] with the reason and the fix; [`TrustError::Io`] when a symlink
/// cannot be read.
pub(crate) fn check_place(path: &Path, rules: &Rules) -> Result<(), TrustError> {
    let real = resolve(path, rules)?;
    let named = path.parent().filter(|p| !p.as_os_str().is_empty());
    for dir in [
        named.unwrap_or(Path::new(".")),
        real.parent().unwrap_or(Path::new("/")),
    ] {
        if let Some(why) = folder_problem(dir, rules.what) {
            return Err(TrustError::Refused(why));
        }
    }
    check_ancestors(&real, rules)
}

/// Refuses a file whose folders above its own (up to `/`) let someone else rename the
/// branch it is in and put another in its place: one of another user's, or one others can
/// write to and not sticky (as `/tmp` is). `real` has no symlink left.
fn check_ancestors(real: &Path, rules: &Rules) -> Result<(), TrustError> {
    let Some(own) = real.parent() else {
        return Ok(());
    };
    for (dir, child) in own.ancestors().skip(1).zip(own.ancestors()) {
        let what = format!("{} (under {})", rules.what, child.display());
        if let Some(why) = folder_problem(dir, &what) {
            return Err(TrustError::Refused(why));
        }
    }
    Ok(())
}

/// Refuses the symlink `link` (in the folder `dir`) when someone else could repoint it: its
/// folder lets them replace it, or it is theirs (in a sticky folder they may replace their own).
fn check_link(link: &Path, dir: &Path, rules: &Rules) -> Result<(), TrustError> {
    let what = format!(
        "the symlink {} on the way to {}",
        link.display(),
        rules.what
    );
    if let Some(why) = folder_problem(dir, &what) {
        return Err(TrustError::Refused(why));
    }
    let uid = std::fs::symlink_metadata(link)?.uid();
    if ours(uid) {
        return Ok(());
    }
    Err(TrustError::Refused(format!(
        "{what} belongs to uid {uid}, who could repoint it; use a link of yours or root's, or the file's own path"
    )))
}

/// `path` with every symlink on the way followed hop by hop, as the kernel does, each checked
/// by [`check_link`] first; at most [`MAX_LINKS`]. Parts that do not exist are kept as named.
fn resolve(path: &Path, rules: &Rules) -> Result<PathBuf, TrustError> {
    let mut real = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir()?
    };
    let mut left = Vec::new();
    push_parts(&mut left, path);
    let mut links = 0;
    while let Some(part) = left.pop() {
        match part {
            Part::Root => real = PathBuf::from("/"),
            Part::Up => {
                real.pop();
            }
            Part::Name(name) => {
                let next = real.join(name);
                let is_link = std::fs::symlink_metadata(&next).is_ok_and(|m| m.is_symlink());
                if !is_link {
                    real = next;
                    continue;
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(TrustError::Refused(format!(
                        "{} {} is reached through more than {MAX_LINKS} symlinks",
                        rules.what,
                        path.display()
                    )));
                }
                check_link(&next, &real, rules)?;
                push_parts(&mut left, &std::fs::read_link(&next)?);
            }
        }
    }
    Ok(real)
}

/// A part of a path, as [`resolve`] takes it.
enum Part {
    /// `/`.
    Root,
    /// `..`.
    Up,
    /// A name.
    Name(std::ffi::OsString),
}

/// Pushes `path`'s parts onto `stack` so that its first part is popped first (`.` is left out).
fn push_parts(stack: &mut Vec<Part>, path: &Path) {
    let parts: Vec<Part> = path
        .components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(Part::Root),
            Component::ParentDir => Some(Part::Up),
            Component::Normal(n) => Some(Part::Name(n.to_os_string())),
            Component::CurDir => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

/// Reads `path` (following symlinks) after the checks of the module's documentation.
///
/// # Errors
/// [`TrustError::Io`] when it cannot be opened or read (`NotFound` when there is none),
/// [`TrustError::Refused`] with the reason and the fix otherwise.
pub fn read(path: &Path, rules: &Rules) -> Result<String, TrustError> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let md = f.metadata()?;
    if let Some(why) = file_problem(path, &md, rules) {
        return Err(TrustError::Refused(why));
    }
    check_place(path, rules)?;
    let mut bytes = Vec::with_capacity(md.len() as usize);
    f.by_ref()
        .take(rules.max_bytes + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > rules.max_bytes {
        return Err(TrustError::Refused(format!(
            "{} {} grew past the {} bytes it may be",
            rules.what,
            path.display(),
            rules.max_bytes
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        TrustError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const RULES: Rules = Rules {
        what: "the settings file",
        max_bytes: 64,
        secret: false,
    };

    #[test]
    fn a_plain_file_of_ours_is_read_and_loose_ones_are_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "a = 1\n").expect("write");
        assert_eq!(read(&p, &RULES).expect("read"), "a = 1\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let e = read(&p, &RULES).expect_err("0666").to_string();
        assert!(e.contains("mode 666") && e.contains("chmod go-w"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let secret = Rules {
            secret: true,
            ..RULES
        };
        assert!(read(&p, &secret).is_err());
        std::fs::write(&p, "x".repeat(65)).expect("write");
        let e = read(&p, &RULES).expect_err("large").to_string();
        assert!(e.contains("more than the 64"), "{e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        std::fs::write(&p, "a = 1\n").expect("write");
        let e = read(&p, &RULES).expect_err("folder").to_string();
        assert!(e.contains("a folder others can write to"), "{e}");
        assert!(matches!(
            read(&dir.path().join("none"), &RULES),
            Err(TrustError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound
        ));
    }

    #[test]
    fn our_own_relative_links_are_followed_hop_by_hop() {
        let dir = tempfile::tempdir().expect("tmp");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        std::fs::write(dir.path().join("c.toml"), "a = 1\n").expect("write");
        std::os::unix::fs::symlink("../c.toml", sub.join("up")).expect("symlink");
        std::os::unix::fs::symlink("./sub/up", dir.path().join("l")).expect("symlink");
        let l = dir.path().join("l");
        assert_eq!(read(&l, &RULES).expect("read"), "a = 1\n");
        let real = resolve(&l, &RULES).expect("resolve");
        assert_eq!(real, std::fs::canonicalize(&l).expect("canonical"));
        // A link in a folder others can write to is refused, naming it.
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = read(&l, &RULES).expect_err("loose folder").to_string();
        let up = sub.join("up");
        assert!(e.contains(&format!("the symlink {}", up.display())), "{e}");
        assert!(e.contains("a folder others can write to"), "{e}");
    }
}
