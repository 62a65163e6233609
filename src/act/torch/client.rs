//! One peer-checked connection to a companion, with timeouts on every step.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::error::TorchError;
use super::protocol::{FractionSet, Hello, Release, Segments, Stats, Summary, TorchFacts};
use super::sockets::{runtime_dir, socket_name};
use crate::host::procinfo::{parse_stat_start_ticks, ProcReader};
use crate::model::UnixMs;

/// Each connect, request and reply gets at most this long by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest reply line accepted (a summary or a segment list is well under this).
const MAX_REPLY: usize = 16 << 20;

/// The kernel's word on the other end of a Unix socket (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// The peer's pid (in our pid namespace).
    pub pid: u32,
    /// Its effective uid.
    pub uid: u32,
    /// Its effective gid.
    pub gid: u32,
}

/// `SO_PEERCRED` of a connected Unix socket.
///
/// # Errors
/// The getsockopt error.
pub fn peer_cred(stream: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is valid for the borrow; cred and len are valid out-pointers of the right size.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCred {
        pid: cred.pid as u32,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// The socket at `path` (claimed by `pid`) connected, with `timeout` on each read and write.
fn open_stream(path: &Path, pid: u32, timeout: Duration) -> Result<UnixStream, TorchError> {
    let stream = connect_nonblocking(path).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => TorchError::Busy(pid),
        _ => TorchError::NoCompanion {
            pid,
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    })?;
    let io_err = |source| TorchError::Io { pid, source };
    stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
    stream.set_write_timeout(Some(timeout)).map_err(io_err)?;
    Ok(stream)
}

/// Who is at the other end of a companion's socket, as the kernel says.
struct Peer {
    uid: u32,
    pidfd: Option<OwnedFd>,
    /// Its start time, from `/proc`.
    start_time_ms: Option<UnixMs>,
}

/// The kernel's word on the socket's peer, checked: it is `pid`, of our uid (unless we are
/// root), in a folder and process that pass [`super::trust::peer_problem`], started at
/// `expected_start_time_ms` when given.
fn check_peer(
    stream: &UnixStream,
    path: &Path,
    pid: u32,
    expected_start_time_ms: Option<UnixMs>,
) -> Result<Peer, TorchError> {
    let cred = peer_cred(stream).map_err(|source| TorchError::Io { pid, source })?;
    if cred.pid != pid {
        return Err(TorchError::PidMismatch {
            claimed: pid,
            peer: cred.pid,
        });
    }
    let our_uid = nix::unistd::geteuid().as_raw();
    if our_uid != 0 && cred.uid != our_uid {
        return Err(TorchError::ForeignUser {
            pid,
            peer_uid: cred.uid,
            our_uid,
        });
    }
    let pidfd = super::trust::peer_pidfd(stream).map_err(|e| TorchError::Untrusted {
        pid,
        detail: format!("the process that made the socket is gone ({e})"),
    })?;
    if let Some(detail) = super::trust::peer_problem(path, pid, cred.uid, pidfd.as_ref()) {
        return Err(TorchError::Untrusted { pid, detail });
    }
    let actual = ProcReader::default().start_time_ms(pid);
    if let Some(expected) = expected_start_time_ms {
        if actual != Some(expected) {
            return Err(TorchError::StartTimeMismatch {
                pid,
                expected,
                actual,
            });
        }
    }
    Ok(Peer {
        uid: cred.uid,
        pidfd,
        start_time_ms: actual,
    })
}

/// Refuses a hello that names another pid, start (`ticks`, from `/proc`) or uid than the
/// kernel's.
fn hello_problem(hello: &Hello, pid: u32, ticks: Option<u64>, uid: u32) -> Result<(), TorchError> {
    let detail = if hello.pid != pid {
        format!("it says it is pid {}", hello.pid)
    } else if Some(hello.start_ticks) != ticks {
        format!(
            "it says it started at tick {}, /proc says {ticks:?}",
            hello.start_ticks
        )
    } else if hello.uid != uid {
        format!(
            "it says it runs as uid {}, the kernel says {uid}",
            hello.uid
        )
    } else {
        return Ok(());
    };
    Err(TorchError::HelloMismatch { pid, detail })
}

/// Connects without blocking: a companion whose listen queue is full (hung) answers
/// `WouldBlock` at once instead of stalling us.
fn connect_nonblocking(path: &Path) -> io::Result<UnixStream> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: plain syscall.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: addr is a valid sockaddr_un and len is within it.
    let rc = unsafe {
        libc::connect(
            owned.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let stream = UnixStream::from(owned);
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// The start ticks (field 22 of `/proc/PID/stat`) of `pid`, read now.
fn start_ticks_of(pid: u32) -> Option<u64> {
    let stat = crate::host::procinfo::read_lossy(Path::new(&format!("/proc/{pid}/stat")))?;
    parse_stat_start_ticks(&stat)
}

/// A reply with `"ok": false`: why.
#[derive(Debug, Default, serde::Deserialize)]
struct Refusal {
    #[serde(default)]
    torch_imported: Option<bool>,
    #[serde(default)]
    error: Option<String>,
}

impl Refusal {
    fn into_error(self, pid: u32) -> TorchError {
        if self.torch_imported == Some(false) {
            return TorchError::TorchNotImported(pid);
        }
        TorchError::Companion {
            pid,
            error: self
                .error
                .unwrap_or_else(|| "an error without a message".into()),
        }
    }
}

/// The reply to `stats`, read in one typed parse.
#[derive(Debug, serde::Deserialize)]
struct StatsReply {
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    torch_imported: Option<bool>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    cuda_initialized: bool,
    #[serde(default)]
    alloc_conf: Option<String>,
    #[serde(default)]
    expandable_segments: Option<bool>,
    #[serde(default)]
    devices: Vec<super::protocol::DeviceStats>,
}

/// What a companion agreed to in [`Client::subscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subscribed {
    /// It cannot push (older than 0.2.0): ask it each time.
    No,
    /// It pushes every interval.
    Every,
    /// It pushes when its figures change, and the same figures again once per `heartbeat`.
    Changes {
        /// The longest time between two pushes.
        heartbeat: Duration,
    },
}

/// What a subscribed connection had waiting ([`Client::poll_pushed`]).
#[derive(Debug)]
pub enum Pushed {
    /// No new push since the last call.
    Nothing,
    /// A push the same as the one before it, byte for byte: the figures did not move.
    Same,
    /// New figures.
    Figures(TorchFacts),
}

/// A connection to one companion whose peer passed the checks of [`Client::connect_at`].
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    buf: Vec<u8>,
    /// Read buffer, allocated on the first read and kept.
    scratch: Vec<u8>,
    /// The last pushed line that parsed (see [`Client::poll_pushed`]).
    last_pushed: Vec<u8>,
    timeout: Duration,
    pid: u32,
    path: PathBuf,
    start_time_ms: Option<UnixMs>,
    /// The peer's uid (`SO_PEERCRED`), checked again before an action.
    peer_uid: u32,
    /// The peer's pidfd where the kernel gives one (`SO_PEERPIDFD`).
    pidfd: Option<OwnedFd>,
    hello: Hello,
}

impl Client {
    /// Connects to the companion of `pid` in the default runtime folder ([`runtime_dir`]).
    /// `expected_start_time_ms` is the start time the caller knows the process by (e.g. from
    /// the sampler's [`crate::model::ProcInfo`]); `None` accepts whatever `/proc` says now.
    ///
    /// # Errors
    /// See [`Client::connect_at`].
    pub fn connect(pid: u32, expected_start_time_ms: Option<UnixMs>) -> Result<Self, TorchError> {
        let dir = runtime_dir().ok_or(TorchError::NoRuntimeDir)?;
        Self::connect_at(
            &dir.join(socket_name(pid)),
            pid,
            expected_start_time_ms,
            DEFAULT_TIMEOUT,
        )
    }

    /// Connects to the socket at `path`, which claims to be `pid`'s, and checks its peer:
    /// the kernel's peer pid is `pid`; its uid is ours (unless we are root); the socket's
    /// folder, the process `pid` and the socket's maker pass [`super::trust::peer_problem`]
    /// (folder and process of the peer's uid, maker alive); its start time is
    /// `expected_start_time_ms` when given; and its hello names the same pid, uid and start
    /// ticks. Each step has `timeout`.
    ///
    /// # Errors
    /// [`TorchError::NoCompanion`], [`TorchError::Busy`], a refusal
    /// ([`TorchError::PidMismatch`], [`TorchError::ForeignUser`],
    /// [`TorchError::StartTimeMismatch`], [`TorchError::HelloMismatch`]) or an I/O error.
    pub fn connect_at(
        path: &Path,
        pid: u32,
        expected_start_time_ms: Option<UnixMs>,
        timeout: Duration,
    ) -> Result<Self, TorchError> {
        let stream = open_stream(path, pid, timeout)?;
        let peer = check_peer(&stream, path, pid, expected_start_time_ms)?;
        let ticks = start_ticks_of(pid);
        let mut client = Client {
            stream,
            buf: Vec::new(),
            scratch: Vec::new(),
            last_pushed: Vec::new(),
            timeout,
            pid,
            path: path.to_path_buf(),
            start_time_ms: peer.start_time_ms,
            peer_uid: peer.uid,
            pidfd: peer.pidfd,
            hello: Hello::unknown(pid, peer.uid),
        };
        let hello: Hello = client.request(&json!({"cmd": "hello"}))?;
        hello_problem(&hello, pid, ticks, peer.uid)?;
        client.hello = hello;
        Ok(client)
    }

    /// The checks of [`Client::connect_at`] again, right before an action: the process still
    /// started when it did at connect, still belongs to the peer's uid, in a folder of that
    /// uid, and the process that made the socket is still alive.
    ///
    /// # Errors
    /// [`TorchError::StartTimeMismatch`] or [`TorchError::Untrusted`].
    fn recheck(&self) -> Result<(), TorchError> {
        let pid = self.pid;
        let now = ProcReader::default().start_time_ms(pid);
        if let Some(expected) = self.start_time_ms {
            if now != Some(expected) {
                return Err(TorchError::StartTimeMismatch {
                    pid,
                    expected,
                    actual: now,
                });
            }
        }
        match super::trust::peer_problem(&self.path, pid, self.peer_uid, self.pidfd.as_ref()) {
            Some(detail) => Err(TorchError::Untrusted { pid, detail }),
            None => Ok(()),
        }
    }

    /// The companion's hello (checked against the kernel's view on connect).
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Changes the timeout of later requests (a cache release may take longer than stats).
    pub(crate) fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        let _ = self.stream.set_write_timeout(Some(timeout));
    }

    /// The pid this client talks to.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends one request and reads one reply line within the timeout; a reply with
    /// `"ok": false` becomes an error.
    ///
    /// # Errors
    /// Timeout, I/O, a bad reply, or the companion's own error.
    pub fn request<T: DeserializeOwned>(&mut self, req: &Value) -> Result<T, TorchError> {
        let value = self.raw_request(req)?;
        serde_json::from_value(value).map_err(|e| TorchError::Protocol {
            pid: self.pid,
            detail: e.to_string(),
        })
    }

    fn raw_request(&mut self, req: &Value) -> Result<Value, TorchError> {
        self.send(req)?;
        self.receive()
    }

    /// Writes one request line (its reply is read by [`Client::receive`]); a poller sends to
    /// every companion first and then reads, so most replies are waiting when read.
    fn send(&mut self, req: &Value) -> Result<(), TorchError> {
        let mut line = req.to_string().into_bytes();
        line.push(b'\n');
        self.send_bytes(&line)
    }

    fn send_bytes(&mut self, line: &[u8]) -> Result<(), TorchError> {
        let pid = self.pid;
        self.stream.write_all(line).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => TorchError::Timeout(pid),
            _ => TorchError::Io { pid, source: e },
        })
    }

    /// Reads one reply line within the timeout (without its newline). A reply already
    /// waiting is taken without blocking (no timeout to set: one `recv` per reply).
    fn receive_line(&mut self) -> Result<Vec<u8>, TorchError> {
        let pid = self.pid;
        let map_io = |e: io::Error| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => TorchError::Timeout(pid),
            _ => TorchError::Io { pid, source: e },
        };
        let mut deadline: Option<Instant> = None;
        loop {
            if let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
                let rest = self.buf.split_off(nl + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.pop();
                return Ok(line);
            }
            if self.buf.len() > MAX_REPLY {
                return Err(TorchError::Protocol {
                    pid,
                    detail: format!("reply longer than {MAX_REPLY} bytes"),
                });
            }
            // First without waiting: the reply is usually there already.
            let n = match self.recv_now() {
                Ok(n) => n,
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock
                        && e.kind() != io::ErrorKind::Interrupted
                    {
                        return Err(map_io(e));
                    }
                    let end = *deadline.get_or_insert_with(|| Instant::now() + self.timeout);
                    let left = end.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(TorchError::Timeout(pid));
                    }
                    self.stream
                        .set_read_timeout(Some(left))
                        .map_err(|source| TorchError::Io { pid, source })?;
                    self.stream.read(&mut self.scratch).map_err(map_io)?
                }
            };
            self.keep_read(n)?;
        }
    }

    /// Appends the `n` bytes just read into the read buffer to the pending text; 0 bytes
    /// means the companion closed the connection.
    fn keep_read(&mut self, n: usize) -> Result<(), TorchError> {
        if n == 0 {
            return Err(TorchError::Protocol {
                pid: self.pid,
                detail: "the companion closed the connection".into(),
            });
        }
        self.buf.extend_from_slice(&self.scratch[..n]);
        Ok(())
    }

    /// One `recv` that does not wait, into the read buffer (allocated on first use): the
    /// bytes read (0: the companion closed the connection), or the error (`WouldBlock` when
    /// nothing is waiting).
    fn recv_now(&mut self) -> io::Result<usize> {
        if self.scratch.is_empty() {
            self.scratch = vec![0u8; 64 << 10];
        }
        // SAFETY: the fd is valid for the borrow; scratch is a writable buffer of its length.
        let n = unsafe {
            libc::recv(
                self.stream.as_raw_fd(),
                self.scratch.as_mut_ptr().cast(),
                self.scratch.len(),
                libc::MSG_DONTWAIT,
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Reads one reply line within the timeout; `"ok": false` becomes an error.
    fn receive(&mut self) -> Result<Value, TorchError> {
        let line = self.receive_line()?;
        let value: Value = serde_json::from_slice(&line).map_err(|e| TorchError::Protocol {
            pid: self.pid,
            detail: e.to_string(),
        })?;
        if value.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(value);
        }
        let reply: Refusal = serde_json::from_value(value).unwrap_or_default();
        Err(reply.into_error(self.pid))
    }

    /// The allocator's figures per device.
    ///
    /// # Errors
    /// [`TorchError::TorchNotImported`], or see [`Client::request`].
    pub fn stats(&mut self) -> Result<Stats, TorchError> {
        self.request(&json!({"cmd": "stats"}))
    }

    /// `torch.cuda.empty_cache()` on each device in use; reserved before and after.
    ///
    /// # Errors
    /// [`TorchError::TorchNotImported`], or see [`Client::request`].
    pub fn release_cache(&mut self) -> Result<Release, TorchError> {
        self.recheck()?;
        self.request(&json!({"cmd": "release_cache"}))
    }

    /// `torch.cuda.memory_summary()` text.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn summary(&mut self) -> Result<Summary, TorchError> {
        self.request(&json!({"cmd": "summary"}))
    }

    /// `torch.cuda.set_per_process_memory_fraction(fraction, device)`.
    ///
    /// # Errors
    /// See [`Client::request`] (a fraction outside (0, 1] is the companion's error).
    pub fn set_fraction(&mut self, device: u32, fraction: f64) -> Result<FractionSet, TorchError> {
        self.recheck()?;
        self.request(&json!({"cmd": "set_fraction", "device": device, "fraction": fraction}))
    }

    /// The allocator's segments, without stack traces.
    ///
    /// # Errors
    /// See [`Client::request`].
    pub fn segments(&mut self) -> Result<Segments, TorchError> {
        self.request(&json!({"cmd": "segments"}))
    }

    /// Hello plus stats as one plain [`TorchFacts`]; a process without torch gives facts
    /// with `error: "torch not imported"`.
    ///
    /// # Errors
    /// Errors other than "torch not imported" or a companion error.
    pub fn facts(&mut self) -> Result<TorchFacts, TorchError> {
        self.ask_facts()?;
        self.read_facts()
    }

    /// The first half of [`Client::facts`]: sends the stats request.
    ///
    /// # Errors
    /// The socket refuses the write.
    pub(crate) fn ask_facts(&mut self) -> Result<(), TorchError> {
        self.send_bytes(b"{\"cmd\":\"stats\"}\n")
    }

    /// The second half of [`Client::facts`]: reads the stats reply.
    ///
    /// # Errors
    /// As [`Client::facts`].
    pub(crate) fn read_facts(&mut self) -> Result<TorchFacts, TorchError> {
        let line = self.receive_line()?;
        self.facts_from_line(&line)
    }

    /// Turns this connection into a feed of the companion's figures, pushed every `interval`
    /// (see [`Client::read_pushed`]); with a `heartbeat`, pushes of unchanged figures are left
    /// out except once per heartbeat (companions from 0.3.0). What the companion agreed to:
    /// [`Subscribed::No`] from one too old to push (ask with [`Client::ask_facts`] then).
    ///
    /// # Errors
    /// I/O, a timeout, or a bad reply.
    pub fn subscribe(
        &mut self,
        interval: Duration,
        heartbeat: Option<Duration>,
    ) -> Result<Subscribed, TorchError> {
        let ms = |d: Duration| d.as_millis().min(u128::from(u32::MAX)) as u64;
        let line = match heartbeat {
            None => format!("{{\"cmd\":\"subscribe\",\"interval_ms\":{}}}\n", ms(interval)),
            Some(h) => format!(
                "{{\"cmd\":\"subscribe\",\"interval_ms\":{},\"changes_only\":true,\"heartbeat_ms\":{}}}\n",
                ms(interval),
                ms(h)
            ),
        };
        self.send_bytes(line.as_bytes())?;
        match self.receive() {
            Ok(v) if v.get("subscribed").and_then(Value::as_bool) == Some(true) => {
                // An older companion ignores "changes_only" and pushes every interval.
                let hb = v
                    .get("heartbeat_ms")
                    .and_then(Value::as_u64)
                    .filter(|_| v.get("changes_only").and_then(Value::as_bool) == Some(true));
                Ok(match hb {
                    Some(h) => Subscribed::Changes {
                        heartbeat: Duration::from_millis(h),
                    },
                    None => Subscribed::Every,
                })
            }
            Ok(_) => Ok(Subscribed::No),
            Err(TorchError::Companion { error, .. }) if error.starts_with("unknown cmd") => {
                Ok(Subscribed::No)
            }
            Err(e) => Err(e),
        }
    }

    /// The connection's file descriptor, for `poll(2)` over many connections.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.stream.as_raw_fd()
    }

    /// The newest figures a subscribed companion pushed since the last call, read without
    /// waiting: None when none arrived yet; older pushes still unread are dropped unparsed.
    ///
    /// # Errors
    /// The companion closed the connection, I/O, or a bad reply.
    pub fn read_pushed(&mut self) -> Result<Option<TorchFacts>, TorchError> {
        match self.poll_pushed()? {
            Pushed::Nothing => Ok(None),
            Pushed::Same => self.last_pushed_facts().map(Some),
            Pushed::Figures(f) => Ok(Some(f)),
        }
    }

    /// Like [`Client::read_pushed`], without parsing a push that is the same, byte for byte,
    /// as the one before it (an idle job's figures do not move): [`Pushed::Same`] then, and
    /// the caller keeps the figures it has (or asks [`Client::last_pushed_facts`]).
    ///
    /// # Errors
    /// As [`Client::read_pushed`].
    pub fn poll_pushed(&mut self) -> Result<Pushed, TorchError> {
        let pid = self.pid;
        loop {
            let n = match self.recv_now() {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(TorchError::Io { pid, source: e }),
            };
            self.keep_read(n)?;
            if self.buf.len() > MAX_REPLY {
                return Err(TorchError::Protocol {
                    pid,
                    detail: format!("reply longer than {MAX_REPLY} bytes"),
                });
            }
            if n < self.scratch.len() {
                break; // all there was
            }
        }
        let Some(end) = self.buf.iter().rposition(|b| *b == b'\n') else {
            return Ok(Pushed::Nothing);
        };
        let start = self.buf[..end]
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let line = &self.buf[start..end];
        let got = if line == self.last_pushed.as_slice() {
            Ok(Pushed::Same)
        } else {
            let facts = self.facts_from_line(line);
            self.last_pushed.clear();
            if facts.is_ok() {
                self.last_pushed.extend_from_slice(line);
            }
            facts.map(Pushed::Figures)
        };
        self.buf.drain(..=end);
        got
    }

    /// True when a whole line was read and not taken yet (it arrived with an earlier reply):
    /// [`Client::poll_pushed`] has something to give even if the socket has nothing new.
    pub(crate) fn has_buffered_line(&self) -> bool {
        self.buf.contains(&b'\n')
    }

    /// The figures of the last push [`Client::poll_pushed`] parsed, parsed again.
    ///
    /// # Errors
    /// [`TorchError::Protocol`] when there was none.
    pub fn last_pushed_facts(&self) -> Result<TorchFacts, TorchError> {
        self.facts_from_line(&self.last_pushed)
    }

    /// One stats reply line as facts (see [`Client::facts`]).
    fn facts_from_line(&self, line: &[u8]) -> Result<TorchFacts, TorchError> {
        // One typed parse of the reply (no intermediate `Value`): this runs for every
        // companion once a second.
        let stats = serde_json::from_slice::<StatsReply>(line)
            .map_err(|e| TorchError::Protocol {
                pid: self.pid,
                detail: e.to_string(),
            })
            .and_then(|r| {
                if r.ok {
                    Ok(Stats {
                        cuda_initialized: r.cuda_initialized,
                        alloc_conf: r.alloc_conf,
                        expandable_segments: r.expandable_segments,
                        devices: r.devices,
                    })
                } else {
                    Err(Refusal {
                        torch_imported: r.torch_imported,
                        error: r.error,
                    }
                    .into_error(self.pid))
                }
            });
        let h = &self.hello;
        let mut facts = TorchFacts {
            pid: self.pid,
            start_time_ms: self.start_time_ms,
            python_version: h.python_version.clone(),
            companion_version: h.companion_version.clone(),
            torch_imported: h.torch_imported,
            torch_version: h.torch_version.clone(),
            cuda_version: h.cuda_version.clone(),
            ..TorchFacts::default()
        };
        match stats {
            Ok(s) => {
                facts.torch_imported = true;
                facts.alloc_conf = s.alloc_conf;
                facts.expandable_segments = s.expandable_segments;
                facts.devices = s.devices;
            }
            Err(TorchError::TorchNotImported(_)) => {
                facts.torch_imported = false;
                facts.error = Some("torch not imported".into());
            }
            Err(TorchError::Companion { error, .. }) => facts.error = Some(error),
            Err(e) => return Err(e),
        }
        Ok(facts)
    }
}
