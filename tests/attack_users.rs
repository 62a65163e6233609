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

/// Security v4, item 5: a missing token file is not created in a folder others can write to
/// (one it would then refuse to read): the same refusal, and no file.
#[test]
fn a_token_file_is_not_created_where_it_would_be_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ww = tmp.path().join("ww");
    std::fs::create_dir(&ww).expect("mkdir");
    chmod(&ww, 0o777);
    let p = ww.join("agent.token");
    let r = vramwarden::link::token::load_or_create(&p);
    assert!(
        r.as_ref()
            .is_err_and(|e| e.contains("a folder others can write to (mode 777)")),
        "{r:?}"
    );
    assert!(!p.exists(), "the token file was created");
    chmod(&ww, 0o1777);
    let (_, created) = vramwarden::link::token::load_or_create(&p).expect("sticky");
    assert!(created);
}

/// `link` → `target`, owned by `uid`.
fn link_as(target: &Path, link: &Path, uid: u32) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
    chown(link, uid);
}

/// `vramwarden --config CFG rules check`: its output.
fn rules_check(cfg: &Path) -> Output {
    let c = cfg.to_str().expect("utf-8");
    let (out, ended) = run_within(&["--config", c, "rules", "check"], &[]);
    assert!(ended, "{out:?}");
    out
}

/// Security v4, item 4: a symlink in the middle of the chain to a settings or token file,
/// in another user's folder (or theirs in a sticky one), is refused, naming it: they could
/// repoint it at any file of root's. Root's own chain of links is followed.
#[test]
fn a_symlink_another_user_could_repoint_is_refused_anywhere_on_the_way() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let sc = tmp.path().join("sc");
    let mallory = tmp.path().join("mallory");
    let sticky = tmp.path().join("sticky");
    for d in [&sc, &mallory, &sticky] {
        std::fs::create_dir(d).expect("mkdir");
    }
    chown(&mallory, NOBODY);
    chmod(&sticky, 0o1777);
    let cfg = sc.join("c.toml");
    std::fs::write(&cfg, "[cleanup]\ndry_run = true\n").expect("write");
    // Root's own chain: read.
    link_as(&cfg, &sc.join("direct.toml"), 0);
    link_as(&sc.join("direct.toml"), &sc.join("twice.toml"), 0);
    let out = rules_check(&sc.join("twice.toml"));
    assert!(out.status.success(), "{out:?}");
    // Through a link in mallory's folder.
    let hers = mallory.join("l");
    link_as(&cfg, &hers, NOBODY);
    link_as(&hers, &sc.join("chain.toml"), 0);
    let out = rules_check(&sc.join("chain.toml"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    let says = format!(
        "the symlink {} on the way to the settings file",
        hers.display()
    );
    assert!(
        err.contains(&says) && err.contains("a folder of uid 65534"),
        "{err}"
    );
    // Through a folder reached by a link in her folder.
    link_as(&sc, &mallory.join("d"), NOBODY);
    link_as(&mallory.join("d"), &sc.join("via"), 0);
    let out = rules_check(&sc.join("via").join("c.toml"));
    assert!(!out.status.success(), "{out:?}");
    // Her link in a sticky folder (she may replace her own links there).
    link_as(&cfg, &sticky.join("l"), NOBODY);
    link_as(&sticky.join("l"), &sc.join("sticky.toml"), 0);
    let out = rules_check(&sc.join("sticky.toml"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        err.contains("belongs to uid 65534, who could repoint it"),
        "{err}"
    );
    // The token file, through her link.
    let token = sc.join("agent.token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").expect("write");
    chmod(&token, 0o600);
    link_as(&token, &mallory.join("t"), NOBODY);
    link_as(&mallory.join("t"), &sc.join("token.link"), 0);
    let r = vramwarden::link::token::load_or_create(&sc.join("token.link"));
    assert!(
        r.as_ref().is_err_and(|e| e.contains("the symlink")),
        "{r:?}"
    );
    assert!(vramwarden::link::token::load_or_create(&token).is_ok());
}

/// The security review: a folder of root's inside another user's was trusted with the
/// settings and the token (only the file's own folder was checked), though she can rename it
/// away and put her own in its place. Every folder above the file is checked; root's own
/// branch, and one under a sticky folder others can write to (as /tmp), are still read.
#[test]
fn a_file_in_a_branch_another_user_could_swap_is_refused() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let mallory = tmp.path().join("mallory");
    let cfg_dir = mallory.join("cfg");
    std::fs::create_dir_all(&cfg_dir).expect("mkdir");
    chown(&mallory, NOBODY);
    let cfg = cfg_dir.join("c.toml");
    std::fs::write(&cfg, "[cleanup]\ndry_run = true\n").expect("write");
    let out = rules_check(&cfg);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        err.contains(&format!(
            "is in {}, a folder of uid 65534",
            mallory.display()
        )),
        "{err}"
    );
    let token = cfg_dir.join("agent.token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").expect("write");
    chmod(&token, 0o600);
    let r = vramwarden::link::token::load_or_create(&token);
    assert!(r.as_ref().is_err_and(|e| e.contains("uid 65534")), "{r:?}");
    // The same branch given to root: read (tempdir is under the sticky /tmp).
    chown(&mallory, 0);
    assert!(rules_check(&cfg).status.success());
    assert!(vramwarden::link::token::load_or_create(&token).is_ok());
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

/// A FIFO at `path`.
fn mkfifo(path: &Path, mode: u32) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), mode) }, 0, "mkfifo");
}

/// Runs `vramwarden ARGS` with `env`, killed after 20 s (a hang is a failure, not a stuck
/// suite): its output, and whether it ended on its own.
fn run_within(args: &[&str], env: &[(&str, &Path)]) -> (Output, bool) {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut ended = true;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            ended = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().expect("output"), ended)
}

/// A settings file whose GPU-wide rule (no dry run) touches `mark`.
fn rule_settings(path: &Path, mark: &Path) {
    std::fs::write(
        path,
        format!(
            "[cleanup]\ndry_run = false\n[[cleanup.rules]]\nname = \"planted\"\nconditions = {{ device_used_min_pct = 0.0 }}\naction = {{ kind = \"run_command\", argv = [\"/usr/bin/touch\", \"{}\"], timeout_seconds = 5.0 }}\n",
            mark.display()
        ),
    )
    .expect("write");
}

/// Security v3, item 7: a settings file another user owns or can write (the file or its
/// folder), reached through `XDG_CONFIG_HOME` or a shared `--config`, is refused with a
/// clear message — also with `--demo` — and its command never runs as root.
#[test]
fn settings_another_user_owns_or_can_write_are_refused() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let mark = tmp.path().join("RAN");
    // Through XDG_CONFIG_HOME: a folder and file of uid 65534, mode 0666.
    let xdg = tmp.path().join("xdg");
    let dir = xdg.join("vramwarden");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let cfg = dir.join("config.toml");
    rule_settings(&cfg, &mark);
    for p in [&xdg, &dir, &cfg] {
        chown(p, NOBODY);
    }
    chmod(&cfg, 0o666);
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    let env = [("XDG_CONFIG_HOME", xdg.as_path()), ("HOME", home.as_path())];
    let (out, ended) = run_within(&["rules", "check"], &env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(ended && !out.status.success(), "{out:?}");
    assert!(err.contains("belongs to uid 65534"), "{err}");
    let session = tmp.path().join("s.vwsess");
    let s = session.to_str().expect("utf-8");
    let (out, ended) = run_within(
        &[
            "record",
            "--demo",
            "--speed",
            "max",
            "--duration",
            "5s",
            "--out",
            s,
        ],
        &env,
    );
    assert!(ended && !out.status.success(), "{out:?}");
    assert!(!mark.exists(), "another user's command ran as root");
    // A shared --config of root's, but writable by others (the file, then its folder).
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    let cfg = shared.join("config.toml");
    rule_settings(&cfg, &mark);
    chmod(&cfg, 0o666);
    let c = cfg.to_str().expect("utf-8");
    let (out, _) = run_within(&["--config", c, "rules", "check"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains("can be written by others (mode 666)"), "{err}");
    chmod(&cfg, 0o644);
    chmod(&shared, 0o777);
    let (out, _) = run_within(&["--config", c, "rules", "check"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains("a folder others can write to"), "{err}");
    // Root's own file in root's folder is read.
    chmod(&shared, 0o755);
    let (out, _) = run_within(&["--config", c, "rules", "check"], &[]);
    assert!(out.status.success(), "{out:?}");
}

/// Security v3, partial: `--config /dev/zero` and a FIFO as `--config` or `--token-file`
/// are refused at once (no read until memory runs out, no hang).
#[test]
fn a_device_or_a_fifo_as_config_or_token_is_refused_at_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let fifo = tmp.path().join("fifo");
    mkfifo(&fifo, 0o600);
    let f = fifo.to_str().expect("utf-8");
    for args in [
        &["--config", "/dev/zero", "rules", "check"][..],
        &["--config", f, "rules", "check"],
        &[
            "--demo",
            "agent",
            "--no-record",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            f,
        ],
    ] {
        let (out, ended) = run_within(args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(ended, "{args:?} hung: {err}");
        assert!(!out.status.success(), "{args:?}: {out:?}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
}

/// Security v3, item 6: in a folder another user can write (sticky, as /tmp), root's export
/// never writes through a link that user planted — dangling (no `--force`) or to a file
/// outside (with `--force`) — and a FIFO as the output is refused at once, not waited on.
/// `--force` over a regular file replaces it with a new 0600 file and leaves no temporary.
#[test]
fn export_never_writes_through_a_planted_link_nor_waits_on_a_fifo() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let log = tmp.path().join("t.vwlog");
    let l = log.to_str().expect("utf-8");
    let (o, _) = run_within(
        &[
            "record",
            "--demo",
            "--speed",
            "max",
            "--duration",
            "1min",
            "--out",
            l,
        ],
        &[],
    );
    assert!(o.status.success(), "{o:?}");
    let shared = tmp.path().join("shared");
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::create_dir(&outside).expect("mkdir");
    chmod(&shared, 0o1777);
    let export = |out: &Path, extra: &[&str]| {
        let mut args = vec!["export", l, "--csv", out.to_str().expect("utf-8")];
        args.extend_from_slice(extra);
        run_within(&args, &[])
    };
    // A dangling link for one of the three tables' names.
    let planted = outside.join("planted");
    let dang = shared.join("dang-devices.csv");
    std::os::unix::fs::symlink(&planted, &dang).expect("symlink");
    chown(&dang, NOBODY);
    let (o, ended) = export(&shared.join("dang.csv"), &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(ended && !o.status.success(), "{o:?}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!planted.exists(), "root created the link's target");
    // With --force, a link to an existing file outside the folder.
    let keep = outside.join("keep");
    std::fs::write(&keep, "keep\n").expect("write");
    chmod(&keep, 0o644);
    let link = shared.join("f.csv");
    std::os::unix::fs::symlink(&keep, &link).expect("symlink");
    chown(&link, NOBODY);
    let (o, _) = export(&link, &["--table", "devices", "--force"]);
    assert!(!o.status.success(), "{o:?}");
    assert_eq!(std::fs::read_to_string(&keep).expect("read"), "keep\n");
    assert_eq!(
        std::fs::metadata(&keep).expect("meta").permissions().mode() & 0o777,
        0o644
    );
    // A FIFO, with and without --force.
    let fifo = shared.join("p.csv");
    mkfifo(&fifo, 0o666);
    chown(&fifo, NOBODY);
    for extra in [
        &["--table", "devices"][..],
        &["--table", "devices", "--force"],
    ] {
        let (o, ended) = export(&fifo, extra);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(ended, "{extra:?}: the export waited on the FIFO");
        assert!(
            !o.status.success() && err.contains("FIFO"),
            "{extra:?}: {err}"
        );
    }
    // --force over root's own regular file: a new file, 0600, nothing else left behind.
    let own = shared.join("own.csv");
    std::fs::write(&own, "old\n").expect("write");
    chmod(&own, 0o644);
    let before = std::fs::metadata(&own).expect("meta").ino();
    let (o, _) = export(&own, &["--table", "devices", "--force"]);
    assert!(o.status.success(), "{o:?}");
    let md = std::fs::metadata(&own).expect("meta");
    assert_ne!(md.ino(), before, "replaced by a new file");
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
    assert!(std::fs::read_to_string(&own)
        .expect("read")
        .starts_with("timestamp,"));
    let names: Vec<String> = std::fs::read_dir(&shared)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".part")),
        "a temporary file was left: {names:?}"
    );
}

/// `/usr/bin/python3`'s `pythonX.Y`.
fn python_xy() -> String {
    let o = Command::new("/usr/bin/python3")
        .args([
            "-I",
            "-c",
            "import sys; print(f'python{sys.version_info[0]}.{sys.version_info[1]}')",
        ])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Security v3, item 5: root's `torch enable` runs nothing of others before it decides: a
/// `json.py` another user left in the current folder, and a `.pth` in another user's user
/// site (root's `HOME` pointing at their home), never run as root — the interpreter is asked
/// isolated (`-I -S`) — and that home's site is then refused.
#[test]
fn root_torch_enable_runs_no_code_of_the_folder_or_another_users_site() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let marks = tmp.path().join("marks");
    std::fs::create_dir(&marks).expect("mkdir");
    chmod(&marks, 0o777);
    // A folder of another user's, with a json.py.
    let cwd = tmp.path().join("shared");
    std::fs::create_dir(&cwd).expect("mkdir");
    let json = cwd.join("json.py");
    std::fs::write(
        &json,
        format!(
            "import os\nopen('{}/json-ran-as-%d' % os.getuid(), 'w').close()\nfrom _json import *\ndumps = lambda x: '{{}}'\n",
            marks.display()
        ),
    )
    .expect("write");
    chown(&cwd, NOBODY);
    chown(&json, NOBODY);
    let home = tmp.path().join("roothome");
    std::fs::create_dir(&home).expect("mkdir");
    chmod(&home, 0o700);
    let out = Command::new(bin())
        .args(["torch", "enable", "--python", "/usr/bin/python3"])
        .current_dir(&cwd)
        .env("HOME", &home)
        .env_remove("PYTHONNOUSERSITE")
        .output()
        .expect("run");
    assert!(
        !marks.join("json-ran-as-0").exists(),
        "the folder's json.py ran as root"
    );
    assert!(out.status.success(), "{out:?}");
    assert!(home
        .join(".local/lib")
        .join(python_xy())
        .join("site-packages/vramwarden_torch.pth")
        .exists());
    // HOME at another user's home, whose user site has a .pth.
    let alice = tmp.path().join("alice");
    let site = alice
        .join(".local/lib")
        .join(python_xy())
        .join("site-packages");
    std::fs::create_dir_all(&site).expect("mkdir");
    std::fs::write(
        site.join("evil.pth"),
        format!(
            "import os; open('{}/pth-ran-as-%d' % os.getuid(), 'w').close()\n",
            marks.display()
        ),
    )
    .expect("write");
    for p in [
        alice.clone(),
        alice.join(".local"),
        alice.join(".local/lib"),
        alice.join(".local/lib").join(python_xy()),
        site.clone(),
        site.join("evil.pth"),
    ] {
        chown(&p, NOBODY);
    }
    let out = Command::new(bin())
        .args(["torch", "enable", "--python", "/usr/bin/python3"])
        .current_dir(tmp.path())
        .env("HOME", &alice)
        .env_remove("PYTHONNOUSERSITE")
        .output()
        .expect("run");
    assert!(
        !marks.join("pth-ran-as-0").exists(),
        "another user's .pth ran as root"
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refusing as root"),
        "{out:?}"
    );
    assert!(!site.join("vramwarden_torch.pth").exists());
}

/// `n` companions of uid 65534 in `dir` (made 0700 for them) that answer a byte every 0.3 s
/// and never a whole line: one Python process forks them. Their pids; killed on drop.
struct Drippers(Vec<i32>, #[allow(dead_code)] Proc);

impl Drop for Drippers {
    fn drop(&mut self) {
        for pid in &self.0 {
            // SAFETY: kill(2) on a pid this test started.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
    }
}

fn drippers(dir: &Path, n: usize) -> Drippers {
    std::fs::create_dir_all(dir).expect("mkdir");
    chown(dir, NOBODY);
    chmod(dir, 0o700);
    let code = format!(
        r#"
import os, socket, sys, threading, time
def drip(c):
    try:
        while True:
            c.send(b"{{")
            time.sleep(0.3)
    except OSError:
        pass
for _ in range({n}):
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join("{dir}", "torch-%d.sock" % os.getpid()))
        s.listen(64)
        while True:
            c, _ = s.accept()
            threading.Thread(target=drip, args=(c,), daemon=True).start()
    print(pid, flush=True)
sys.stdin.read()
"#,
        dir = dir.display()
    );
    let mut child = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &code,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("setpriv python3");
    let mut pids = Vec::new();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    for _ in 0..n {
        let mut line = String::new();
        out.read_line(&mut line).expect("pid");
        pids.push(line.trim().parse().expect("a pid"));
    }
    let d = Drippers(pids, Proc(child));
    for pid in &d.0 {
        wait_for(&dir.join(format!("torch-{pid}.sock")));
    }
    d
}

/// Security v3, item 9: one user's slow companions (24 that answer a byte every 0.3 s) do not
/// blind root's poller to another user's: a companion that starts while they are polled has
/// its figures within 5 s (it took 0.5 s per slow companion, per poll, before: they are now
/// connected to in parallel, and one that failed waits before it is tried again).
#[test]
fn slow_companions_of_one_user_do_not_delay_anothers() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let slow_dir = tmp.path().join("slow").join("vramwarden");
    std::fs::create_dir_all(tmp.path().join("slow")).expect("mkdir");
    let slow = drippers(&slow_dir, 24);
    let xdg = tmp.path().join("victim");
    std::fs::create_dir(&xdg).expect("mkdir");
    let watch = torch::Watch::spawn(
        vec![slow_dir.clone(), xdg.join("vramwarden")],
        Duration::from_millis(500),
    )
    .expect("spawn");
    // The slow ones are being polled …
    let deadline = Instant::now() + Duration::from_secs(30);
    while watch.state().refused.len() < slow.0.len() / 2 {
        assert!(Instant::now() < deadline, "{:?}", watch.state());
        std::thread::sleep(Duration::from_millis(50));
    }
    // … when another user's job starts its companion.
    let (py, _sock) = companion(&xdg, "");
    let pid = py.0.id();
    let start = vramwarden::host::procinfo::ProcReader::default()
        .start_time_ms(pid)
        .expect("start");
    let t = Instant::now();
    while watch.get(pid, start).is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "no figures after {:?}: {:?}",
            t.elapsed(),
            watch.state().refused.get(&pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("figures after {:?}", t.elapsed());
    drop(watch);
    drop(py);
    drop(slow);
}

/// Security v3, partial: a socket another user names for someone else's pid, in a folder that
/// comes first, hides nothing: the poller and the release path try every folder's socket
/// until one passes the checks.
#[test]
fn a_socket_planted_for_anothers_pid_in_an_earlier_folder_hides_nothing() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    chmod(tmp.path(), 0o755);
    let xdg = tmp.path().join("b");
    std::fs::create_dir(&xdg).expect("mkdir");
    let (py, _sock) = companion(&xdg, "");
    let pid = py.0.id();
    let planted_dir = tmp.path().join("a").join("vramwarden");
    std::fs::create_dir_all(&planted_dir).expect("mkdir");
    chown(&planted_dir, NOBODY);
    chmod(&planted_dir, 0o700);
    let planted = planted_dir.join(torch::socket_name(pid));
    let code = format!(
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.bind({:?})\ns.listen(8)\nprint('up', flush=True)\nsys.stdin.read()",
        planted.display().to_string()
    );
    let mut squatter = Proc(
        Command::new("setpriv")
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "/usr/bin/python3",
                "-c",
                &code,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv"),
    );
    let mut line = String::new();
    BufReader::new(squatter.0.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("up");
    assert_eq!(line.trim(), "up");
    let dirs = vec![planted_dir.clone(), xdg.join("vramwarden")];
    let start = vramwarden::host::procinfo::ProcReader::default()
        .start_time_ms(pid)
        .expect("start");
    let c = torch::release::connect(&dirs, pid, Some(start));
    assert!(c.is_ok(), "{:?}", c.err());
    let watch = torch::Watch::spawn(dirs, Duration::from_millis(100)).expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while watch.get(pid, start).is_none() {
        assert!(Instant::now() < deadline, "hidden: {:?}", watch.state());
        std::thread::sleep(Duration::from_millis(20));
    }
}
