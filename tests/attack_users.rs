//! The attack suite, other users (security v2, items 9–12): what one user can plant for another
//! (root above all) — a companion socket that speaks for someone else's job, an interpreter or
//! symlinks in an environment root is asked to enable, a settings file in the current folder,
//! a token file, escape sequences. Real processes, real sockets, real files; the uid tests run
//! processes as uid 65534 (or a uid with no passwd entry) with `setpriv` and need root, as CI
//! runs them. Each test failed on the code before it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use vramwarden::act::torch::{self, Client, TorchError};

const NOBODY: u32 = 65534;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_vramwarden")
}

fn pkg_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/python")
}

fn assert_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (CI runs as root)"
    );
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(uid)).expect("chown");
}

/// A child process, killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(Instant::now() < deadline, "no {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A real companion (root) in `xdg`, running `after` (Python) when a line arrives on stdin,
/// then waiting for the next line; prints "ok" after each step.
fn companion(xdg: &Path, after: &str) -> (Proc, PathBuf) {
    let code = format!(
        "import os, sys, vramwarden_torch\nsys.stdin.readline()\n{after}\nprint('ok', flush=True)\nsys.stdin.read()"
    );
    let child = Command::new("python3")
        .args(["-c", &code])
        .env("PYTHONPATH", pkg_dir())
        .env("XDG_RUNTIME_DIR", xdg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let sock = xdg.join("vramwarden").join(torch::socket_name(child.id()));
    wait_for(&sock);
    (Proc(child), sock)
}

/// Sends the companion its step and waits for it to be done.
fn step(p: &mut Proc) {
    let stdin = p.0.stdin.as_mut().expect("stdin");
    stdin.write_all(b"go\n").expect("write");
    stdin.flush().expect("flush");
    let mut line = String::new();
    BufReader::new(p.0.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    assert_eq!(line.trim(), "ok");
}

const DROP_TO_NOBODY: &str =
    "os.setresgid(65534, 65534, 65534); os.setgroups([]); os.setresuid(65534, 65534, 65534)";

/// Item 9: the socket's peer (credentials taken when it listened) is uid 0 while the process
/// now belongs to uid 65534 — what a reused pid looks like to root: another user's job behind
/// a socket made by someone else. Root no longer skips the uid check: refused at connect.
#[test]
fn root_refuses_a_socket_whose_process_belongs_to_another_uid() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let (mut py, sock) = companion(tmp.path(), DROP_TO_NOBODY);
    let pid = py.0.id();
    assert!(Client::connect_at(&sock, pid, None, torch::DEFAULT_TIMEOUT).is_ok());
    step(&mut py);
    let r = Client::connect_at(&sock, pid, None, torch::DEFAULT_TIMEOUT);
    assert!(
        matches!(&r, Err(TorchError::Untrusted { detail, .. }) if detail.contains(&format!("process {pid} belongs to uid {NOBODY}, but its socket is served as uid 0"))),
        "{r:?}"
    );
}

/// Item 9, "again right before acting": a connection made while all was well is checked
/// again before a cache release is asked for.
#[test]
fn a_release_is_refused_when_the_process_changed_owner_after_connect() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let (mut py, sock) = companion(tmp.path(), DROP_TO_NOBODY);
    let pid = py.0.id();
    let mut c = Client::connect_at(&sock, pid, None, torch::DEFAULT_TIMEOUT).expect("connect");
    step(&mut py);
    let r = c.release_cache();
    assert!(
        matches!(&r, Err(TorchError::Untrusted { detail, .. }) if detail.contains("belongs to uid 65534")),
        "{r:?}"
    );
}

/// Item 9: a folder named for one uid (`vramwarden-4242`) that belongs to another is not
/// trusted, whoever serves the socket in it.
#[test]
fn a_companion_folder_named_for_another_uid_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let xdg = tmp.path().join("run");
    std::fs::create_dir(&xdg).expect("mkdir");
    let (py, sock) = companion(&xdg, "");
    let pid = py.0.id();
    let claimed = tmp.path().join("vramwarden-4242");
    std::fs::rename(xdg.join("vramwarden"), &claimed).expect("rename");
    let moved = claimed.join(sock.file_name().expect("name"));
    let me = nix::unistd::geteuid().as_raw();
    let r = Client::connect_at(&moved, pid, None, torch::DEFAULT_TIMEOUT);
    assert!(
        matches!(&r, Err(TorchError::Untrusted { detail, .. }) if detail.contains(&format!("is named for uid 4242 but belongs to uid {me}"))),
        "{r:?}"
    );
    // A folder others can write to is not trusted either.
    std::fs::rename(&claimed, xdg.join("vramwarden")).expect("rename back");
    chmod(&xdg.join("vramwarden"), 0o777);
    let r = Client::connect_at(&sock, pid, None, torch::DEFAULT_TIMEOUT);
    assert!(
        matches!(&r, Err(TorchError::Untrusted { detail, .. }) if detail.contains("can be written by others")),
        "{r:?}"
    );
    chmod(&xdg.join("vramwarden"), 0o700);
    assert!(Client::connect_at(&sock, pid, None, torch::DEFAULT_TIMEOUT).is_ok());
}

/// A fake companion that passes every identity check but answers with escape sequences.
const ESCAPING_COMPANION: &str = r#"
import json, os, socket, sys
d = os.path.join(sys.argv[1], "vramwarden")
os.makedirs(d, mode=0o700, exist_ok=True)
p = os.path.join(d, "torch-%d.sock" % os.getpid())
s = socket.socket(socket.AF_UNIX)
s.bind(p)
s.listen(8)
st = open("/proc/self/stat").read()
ticks = int(st[st.rindex(")") + 2:].split()[19])
while True:
    c, _ = s.accept()
    f = c.makefile("rwb")
    for line in f:
        if json.loads(line)["cmd"] == "hello":
            r = {"ok": True, "protocol": 1, "pid": os.getpid(), "uid": os.geteuid(),
                 "start_ticks": ticks, "python_version": "3\x1b]0;pwned\x07",
                 "torch_imported": True, "torch_version": "2\x1b[31m"}
        else:
            r = {"ok": False, "error": "evil\x1b[2J\x9b1m"}
        f.write((json.dumps(r) + "\n").encode())
        f.flush()
"#;

/// Item 12: what a companion says reaches the terminal escaped.
#[test]
fn torch_ls_escapes_what_a_companion_says() {
    let tmp = tempfile::tempdir().expect("tmp");
    let child = Command::new("python3")
        .args(["-c", ESCAPING_COMPANION])
        .arg(tmp.path())
        .spawn()
        .expect("python3");
    let sock = tmp
        .path()
        .join("vramwarden")
        .join(torch::socket_name(child.id()));
    let _py = Proc(child);
    wait_for(&sock);
    let out = Command::new(bin())
        .args(["torch", "ls"])
        .env("XDG_RUNTIME_DIR", tmp.path())
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !stdout.contains('\x1b') && !stdout.contains('\u{9b}'),
        "{stdout:?}"
    );
    assert!(stdout.contains("3\\x1b]0;pwned\\x07"), "{stdout}");
    assert!(stdout.contains("evil\\x1b[2J\\u{9b}1m"), "{stdout}");
}

/// Item 12: root's `torch ls` does not read a companions' folder that is not root's (another
/// user's `/tmp/vramwarden-0`), and says why.
#[test]
fn root_torch_ls_refuses_a_folder_it_does_not_own() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let planted = tmp.path().join("vramwarden");
    std::fs::create_dir(&planted).expect("mkdir");
    chown(&planted, NOBODY);
    // A socket in it, as the planting user would leave one (nobody listens: refused anyway).
    std::fs::write(planted.join("torch-1.sock"), "").expect("write");
    let out = Command::new(bin())
        .args(["torch", "ls", "--format", "json"])
        .env("XDG_RUNTIME_DIR", tmp.path())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "not reading the companions' folder: {} belongs to uid {NOBODY}, not to uid 0",
            planted.display()
        )),
        "{err}"
    );
}

/// Item 12: a token file another user planted (or can write to) is refused.
#[test]
fn a_token_file_of_another_user_is_refused() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    let p = tmp.path().join("agent.token");
    std::fs::write(&p, "0123456789abcdef0123456789abcdef\n").expect("write");
    chmod(&p, 0o600);
    chown(&p, NOBODY);
    let r = vramwarden::link::token::load_or_create(&p);
    assert!(
        r.as_ref()
            .is_err_and(|e| e.contains(&format!("belongs to uid {NOBODY}, not to us"))),
        "{r:?}"
    );
    chown(&p, 0);
    chmod(&p, 0o620);
    let r = vramwarden::link::token::load_or_create(&p);
    assert!(
        r.as_ref()
            .is_err_and(|e| e.contains("read or written by others")),
        "{r:?}"
    );
    chmod(&p, 0o600);
    assert!(vramwarden::link::token::load_or_create(&p).is_ok());
}

/// A fake interpreter: says where its site-packages are, and leaves a mark saying which uid
/// ran it.
fn fake_python(path: &Path, site: &Path, mark_dir: &Path) {
    let script = format!(
        "#!/bin/sh\ntouch {}/ran-as-$(id -u)\necho '{{\"venv\": true, \"purelib\": \"{}\", \"user_site\": \"/nonexistent\", \"enable_user_site\": false, \"version\": \"3.99\"}}'\n",
        mark_dir.display(),
        site.display()
    );
    std::fs::write(path, script).expect("write");
    chmod(path, 0o755);
}

fn enable(python: &Path) -> Output {
    Command::new(bin())
        .args(["torch", "enable", "--python"])
        .arg(python)
        .output()
        .expect("runs")
}

/// Item 10: root asked to enable another user's environment refuses before running its
/// interpreter, and writes nothing through the symlinks planted in it.
#[test]
fn root_refuses_to_enable_another_users_environment() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let marks = tmp.path().join("marks");
    std::fs::create_dir(&marks).expect("mkdir");
    chmod(&marks, 0o777);
    let rootdir = tmp.path().join("root-only");
    std::fs::create_dir(&rootdir).expect("mkdir");
    let alice = tmp.path().join("alice");
    let site = alice.join("site");
    std::fs::create_dir_all(&site).expect("mkdir");
    std::os::unix::fs::symlink(&rootdir, site.join("vramwarden_torch")).expect("symlink");
    let python = alice.join("python");
    fake_python(&python, &site, &marks);
    for p in [&alice, &site, &site.join("vramwarden_torch"), &python] {
        chown(p, NOBODY);
    }
    let out = enable(&python);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing as root")
            && err.contains(&format!("(uid {NOBODY})"))
            && err.contains("vramwarden torch enable --python"),
        "{err}"
    );
    assert!(
        !marks.join("ran-as-0").exists(),
        "the other user's interpreter ran as root"
    );
    assert_eq!(std::fs::read_dir(&rootdir).expect("ls").count(), 0);
}

/// Item 10: files are never written through a symlink at their name, and a symlinked package
/// folder is refused (root's own environment, where the check above passes).
#[test]
fn enable_never_writes_through_symlinks() {
    let tmp = tempfile::tempdir().expect("tmp");
    let site = tmp.path().join("site");
    std::fs::create_dir(&site).expect("mkdir");
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "precious").expect("write");
    std::os::unix::fs::symlink(&victim, site.join("vramwarden_torch.pth")).expect("symlink");
    let python = tmp.path().join("python");
    fake_python(&python, &site, tmp.path());
    let out = enable(&python);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    let pth = site.join("vramwarden_torch.pth");
    let md = std::fs::symlink_metadata(&pth).expect("pth");
    assert!(md.is_file(), "the .pth is a file of its own now");
    assert_eq!(
        std::fs::read_to_string(&pth).expect("read"),
        torch::hook::PTH_LINE
    );
    assert_eq!(md.mode() & 0o777, 0o644);

    // A symlinked package folder: refused, nothing written where it points.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    std::fs::remove_dir_all(site.join("vramwarden_torch")).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, site.join("vramwarden_torch")).expect("symlink");
    let out = enable(&python);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refusing to write through it"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).expect("ls").count(), 0);
}

/// A settings file a command would run if it read the current folder.
fn plant(dir: &Path) {
    let rule = "[cleanup]\ndry_run = false\n[[cleanup.rules]]\nname = \"planted\"\nconditions = { process_memory_min_mib = 1 }\naction = { kind = \"run_command\", argv = [\"/bin/true\"], timeout_seconds = 5.0 }\n";
    std::fs::write(dir.join("vramwarden.toml"), rule).expect("write");
    let cfg = dir.join(".config/vramwarden");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    std::fs::write(cfg.join("config.toml"), rule).expect("write");
}

/// Item 11: with HOME relative (`.`) the settings are not read from the current folder.
#[test]
fn a_relative_home_never_reads_settings_from_the_current_folder() {
    let tmp = tempfile::tempdir().expect("tmp");
    plant(tmp.path());
    let out = Command::new(bin())
        .args(["rules", "check"])
        .env("HOME", ".")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("VRAMWARDEN_CONFIG")
        .current_dir(tmp.path())
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("planted") && !stdout.contains(".config"),
        "{stdout}"
    );
    assert!(stdout.contains("/etc/vramwarden/config.toml"), "{stdout}");
}

/// Item 11: a uid without a passwd entry and no HOME: not the current folder either.
#[test]
fn no_home_and_no_passwd_entry_never_reads_settings_from_the_current_folder() {
    assert_root();
    let uid = (210_000 + std::process::id() % 10_000).to_string();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    plant(tmp.path());
    let exe = tmp.path().join("vramwarden-bin");
    std::fs::copy(bin(), &exe).expect("copy");
    chmod(&exe, 0o755);
    let mut out = None;
    for _ in 0..50 {
        let o = Command::new("setpriv")
            .args(["--reuid", &uid, "--regid", &uid, "--clear-groups"])
            .arg(&exe)
            .args(["rules", "check"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir(tmp.path())
            .output()
            .expect("setpriv runs");
        if !String::from_utf8_lossy(&o.stderr).contains("Text file busy") {
            out = Some(o);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = out.expect("ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!stdout.contains("planted"), "{stdout}");
    assert!(
        stdout.starts_with("/etc/vramwarden/config.toml"),
        "{stdout}"
    );
}
