//! The embedded companion and the `.pth` hook that `vramwarden torch enable` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::error::TorchError;

/// The companion's files, relative to a site-packages folder.
pub const FILES: &[(&str, &str)] = &[
    (
        "vramwarden_torch/__init__.py",
        include_str!("../../../packaging/python/vramwarden_torch/__init__.py"),
    ),
    (
        "vramwarden_torch/__main__.py",
        include_str!("../../../packaging/python/vramwarden_torch/__main__.py"),
    ),
    (
        "vramwarden_torch/_server.py",
        include_str!("../../../packaging/python/vramwarden_torch/_server.py"),
    ),
    (
        "_vramwarden_torch_hook.py",
        include_str!("../../../packaging/python/_vramwarden_torch_hook.py"),
    ),
];

/// The hook's `.pth` file name.
pub const PTH_NAME: &str = "vramwarden_torch.pth";
/// Its one line: Python runs `import` lines of `.pth` files at start-up; the module only
/// installs a meta-path finder (it does not import torch nor the companion).
pub const PTH_LINE: &str = "import _vramwarden_torch_hook\n";

/// What an interpreter says about its site-packages.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SiteInfo {
    /// Whether it runs in a virtual environment.
    pub venv: bool,
    /// The environment's site-packages (`sysconfig` purelib).
    pub purelib: PathBuf,
    /// The user site-packages.
    pub user_site: PathBuf,
    /// Whether the user site is enabled.
    pub enable_user_site: bool,
    /// e.g. "3.11.7".
    pub version: String,
}

impl SiteInfo {
    /// Where the hook goes: the venv's site-packages, else the user site.
    ///
    /// # Errors
    /// When the user site is disabled outside a venv.
    pub(crate) fn target(&self) -> Result<&Path, TorchError> {
        if self.venv {
            Ok(&self.purelib)
        } else if self.enable_user_site {
            Ok(&self.user_site)
        } else {
            Err(TorchError::Hook(
                "this interpreter has its user site disabled and is not in a venv".into(),
            ))
        }
    }
}

/// The query, for `python -I -S`: isolated (no current folder, user site or `PYTHON*`
/// variables on its path) and without `site`'s start-up (no `.pth` file of any site runs).
/// What `site` would have done for a venv (its `pyvenv.cfg` sets the prefix) is done here by
/// hand, without reading any site-packages.
const QUERY: &str = "import json,os,sys\n\
d=os.path.dirname(os.path.abspath(sys.executable))\n\
cfg=[p for p in (os.path.join(d,'pyvenv.cfg'),os.path.join(os.path.dirname(d),'pyvenv.cfg')) if os.path.isfile(p)]\n\
if cfg: sys.prefix=sys.exec_prefix=os.path.dirname(d)\n\
import site,sysconfig\n\
print(json.dumps({'venv': sys.prefix != getattr(sys, 'base_prefix', sys.prefix), \
'purelib': sysconfig.get_paths()['purelib'], 'user_site': site.getusersitepackages(), \
'enable_user_site': not cfg and not os.environ.get('PYTHONNOUSERSITE') and os.getuid()==os.geteuid() and os.getgid()==os.getegid(), \
'version': sys.version.split()[0]}))";

/// Asks `python` where its site-packages are, isolated (`-I -S -c`): nothing of the current
/// folder, of a user site or of any `.pth` file runs (as root, another user's code would run
/// as root).
///
/// # Errors
/// When it cannot be run or answers nonsense.
pub fn site_info(python: &Path) -> Result<SiteInfo, TorchError> {
    let out = Command::new(python)
        .args(["-I", "-S", "-c", QUERY])
        .env_remove("PYTHONPATH")
        .output()
        .map_err(|e| TorchError::Hook(format!("could not run {}: {e}", python.display())))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(TorchError::Hook(format!(
            "{} failed ({}){}",
            python.display(),
            out.status,
            match said.trim() {
                "" => String::new(),
                s => format!(": {s}"),
            }
        )));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        TorchError::Hook(format!(
            "{} gave no site information: {e}",
            python.display()
        ))
    })
}

/// The `*.dist-info` folder in `site` through which pip owns the companion's files
/// (`pip install vramwarden-torch`): its `RECORD` lists `vramwarden_torch/__init__.py`. Those
/// files have one owner: `enable` and `disable` leave them to pip.
pub(crate) fn pip_owner(site: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(site).ok()?;
    entries.flatten().map(|e| e.path()).find(|p| {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        name.starts_with("vramwarden_torch-")
            && name.ends_with(".dist-info")
            && std::fs::read_to_string(p.join("RECORD")).is_ok_and(|r| {
                r.lines()
                    .any(|l| l.starts_with("vramwarden_torch/__init__.py,"))
            })
    })
}

/// Writes the companion and the hook into `site`; returns the files written. Where pip owns
/// the companion ([`pip_owner`]) only the hook's `.pth` is written (pip's package carries the
/// modules, and pip keeps its own list of them). Never through a symlink (see
/// [`super::nofollow`]): a file's name is replaced, a symlinked package folder refused.
///
/// # Errors
/// When a file cannot be written, or the package folder is a symlink.
pub fn install(site: &Path) -> Result<Vec<PathBuf>, TorchError> {
    let dirs = super::nofollow::SiteDirs::open(site, "vramwarden_torch")?;
    let mut written = Vec::new();
    if pip_owner(site).is_some() {
        written.push(dirs.write(PTH_NAME, PTH_LINE)?);
        return Ok(written);
    }
    for (rel, text) in FILES {
        written.push(dirs.write(rel, text)?);
    }
    // The .pth last: the hook never runs without the files it imports.
    written.push(dirs.write(PTH_NAME, PTH_LINE)?);
    Ok(written)
}

/// Removes what [`install`] wrote (and Python's caches of it) from `site`; returns what was
/// removed. Where pip owns the companion ([`pip_owner`]) only the hook's `.pth` goes: the
/// modules are pip's to remove (`pip uninstall vramwarden-torch`).
///
/// # Errors
/// When a file exists but cannot be removed.
pub(crate) fn uninstall(site: &Path) -> Result<Vec<PathBuf>, TorchError> {
    if pip_owner(site).is_some() {
        let pth = site.join(PTH_NAME);
        return match std::fs::remove_file(&pth) {
            Ok(()) => Ok(vec![pth]),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(TorchError::Hook(format!("{}: {e}", pth.display()))),
        };
    }
    let mut removed = Vec::new();
    let mut rm = |rel: &str| -> Result<(), TorchError> {
        if super::nofollow::remove(site, rel)? {
            removed.push(site.join(rel));
        }
        Ok(())
    };
    // The .pth first: no interpreter starts the hook once its files are half gone.
    rm(PTH_NAME)?;
    for (rel, _) in FILES {
        rm(rel)?;
    }
    let caches = [
        site.join("vramwarden_torch").join("__pycache__"),
        site.join("__pycache__"),
    ];
    for dir in &caches {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let ours = dir.ends_with("vramwarden_torch/__pycache__")
                    || name.starts_with("_vramwarden_torch_hook.");
                if ours && name.ends_with(".pyc") && !e.file_type().is_ok_and(|t| t.is_symlink()) {
                    let _ = std::fs::remove_file(e.path());
                    removed.push(e.path());
                }
            }
        }
    }
    // Empty folders only: a folder with other files in it is left as it is.
    let _ = std::fs::remove_dir(&caches[0]);
    let _ = std::fs::remove_dir(site.join("vramwarden_torch"));
    Ok(removed)
}

/// Where `enable`/`disable` act for `python` (default `python3`). As root, an interpreter or
/// site-packages that another user owns or can write to is refused, before it is run.
///
/// # Errors
/// See [`site_info`] and [`SiteInfo::target`]; the refusal says why and what to run instead.
pub(crate) fn target_for(python: Option<&Path>) -> Result<(SiteInfo, PathBuf), TorchError> {
    let python = python.unwrap_or(Path::new("python3"));
    // As root, another user's interpreter is never run (its .pth files would run as root),
    // and another user's site-packages never written to.
    super::nofollow::refuse_foreign(python, python)?;
    let info = site_info(python)?;
    let target = info.target()?.to_path_buf();
    super::nofollow::refuse_foreign(&target, python)?;
    Ok((info, target))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A site-packages folder as `pip install vramwarden-torch` leaves it: the modules and a
    /// dist-info folder whose RECORD lists them (the wheel format's list of installed files).
    fn pip_site() -> (tempfile::TempDir, Vec<(PathBuf, &'static str)>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let site = dir.path();
        let info = site.join("vramwarden_torch-0.3.0.dist-info");
        std::fs::create_dir_all(&info).expect("dist-info");
        std::fs::create_dir_all(site.join("vramwarden_torch")).expect("pkg");
        let mut record = String::new();
        let mut files = Vec::new();
        for (rel, text) in FILES {
            std::fs::write(site.join(rel), text).expect("module");
            record.push_str(&format!("{rel},sha256=x,{}\n", text.len()));
            files.push((site.join(rel), *text));
        }
        record.push_str("vramwarden_torch-0.3.0.dist-info/RECORD,,\n");
        std::fs::write(info.join("RECORD"), record).expect("RECORD");
        (dir, files)
    }

    #[test]
    fn enable_and_disable_leave_pips_files_to_pip() {
        let (dir, files) = pip_site();
        let site = dir.path();
        assert!(pip_owner(site).is_some());
        let written = install(site).expect("enable");
        assert_eq!(written, vec![site.join(PTH_NAME)]);
        let removed = uninstall(site).expect("disable");
        assert_eq!(removed, vec![site.join(PTH_NAME)]);
        for (path, text) in &files {
            let now = std::fs::read_to_string(path).expect("pip's file is still there");
            assert_eq!(now, *text, "{}", path.display());
        }
        // A second disable has nothing left to remove, and still leaves pip's files.
        assert!(uninstall(site).expect("disable again").is_empty());
        assert!(files.iter().all(|(p, _)| p.is_file()));
    }

    #[test]
    fn without_pip_enable_writes_everything_and_disable_removes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let site = dir.path();
        // A dist-info of another package names none of our files: not an owner.
        let other = site.join("vramwarden_torch_extras-1.0.dist-info");
        std::fs::create_dir_all(&other).expect("dir");
        std::fs::write(other.join("RECORD"), "extras/__init__.py,,\n").expect("RECORD");
        assert_eq!(pip_owner(site), None);
        let written = install(site).expect("enable");
        assert_eq!(written.len(), FILES.len() + 1);
        let removed = uninstall(site).expect("disable");
        assert_eq!(removed.len(), FILES.len() + 1);
        assert!(!site.join("vramwarden_torch").exists());
    }
}
