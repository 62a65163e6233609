"""The companion's socket server and the allocator queries (standard library only)."""

import atexit
import json
import os
import select
import socket
import stat
import struct
import sys
import threading
import time

__version__ = "0.3.0"
PROTOCOL_VERSION = 1

#: Longest request line accepted; a longer one gets an error reply and the connection closes.
MAX_REQUEST = 64 * 1024
#: Most segments a ``segments`` reply carries.
MAX_SEGMENTS = 4096
#: Connections served at once; more get a "busy" reply.
MAX_CONNECTIONS = 8
#: A connection with no request for this long is closed (and a subscriber that reads nothing
#: for this long loses its subscription).
IDLE_TIMEOUT_S = 60.0
#: Shortest and longest interval of a subscription's pushed figures.
MIN_PUSH_MS = 200
MAX_PUSH_MS = 60_000

_lock = threading.Lock()
_state = {"sock": None, "path": None, "pid": None, "thread": None}
_fractions = {}  # device -> fraction set through this companion
_slots = threading.BoundedSemaphore(MAX_CONNECTIONS)


# ---------------------------------------------------------------- where the socket lives


def _own_dir(path, create):
    """Make ``path`` a 0700 folder of ours; refuse a symlink or another user's folder."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise
        os.mkdir(path, 0o700)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise PermissionError(f"{path} is not a plain folder")
    if st.st_uid != os.geteuid():
        raise PermissionError(f"{path} belongs to uid {st.st_uid}, not to us ({os.geteuid()})")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def runtime_dir():
    """The folder of the companions' sockets: ``$XDG_RUNTIME_DIR/vramwarden``, else
    ``/tmp/vramwarden-<uid>``."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "vramwarden")
    return f"/tmp/vramwarden-{os.geteuid()}"


def socket_path(pid=None):
    """This process's socket path (or ``pid``'s)."""
    return os.path.join(runtime_dir(), f"torch-{os.getpid() if pid is None else pid}.sock")


def _drop_stale(folder):
    """Remove sockets of processes that no longer exist (and an old one with our own pid)."""
    me = os.getpid()
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not (name.startswith("torch-") and name.endswith(".sock")):
            continue
        try:
            pid = int(name[6:-5])
        except ValueError:
            continue
        if pid == me or not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


# ---------------------------------------------------------------- process identity


def _start_ticks(pid="self"):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return int(s[s.rindex(")") + 1 :].split()[19])


def _boot_time_s():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    return None


def start_time_ms():
    """Start time in ms since the epoch, exactly as vramwarden's procinfo computes it:
    btime * 1000 + starttime_ticks * 1000 // CLK_TCK."""
    ticks = _start_ticks()
    btime = _boot_time_s()
    hz = os.sysconf("SC_CLK_TCK") or 100
    if btime is None:
        return None
    return btime * 1000 + ticks * 1000 // hz


# ---------------------------------------------------------------- torch queries


def _torch():
    """torch if this process imported it (never imports it)."""
    return sys.modules.get("torch")


def _cuda(torch):
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not hasattr(cuda, "is_initialized"):
        raise RuntimeError("this torch has no torch.cuda")
    return cuda


def _used_devices(torch):
    """Devices the allocator has touched (a context exists); never creates one on a new device."""
    cuda = _cuda(torch)
    if not cuda.is_initialized():
        return []
    out = []
    for dev in range(cuda.device_count()):
        s = cuda.memory_stats(dev)
        if s.get("reserved_bytes.all.peak", 0) > 0 or s.get("allocation.all.allocated", 0) > 0:
            out.append(dev)
    return out


def _alloc_conf():
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF")
    expandable = None
    if conf:
        for part in conf.split(","):
            k, _, v = part.partition(":")
            if k.strip() == "expandable_segments":
                expandable = v.strip().lower() == "true"
        if expandable is None:
            expandable = False
    return conf, expandable


def _fraction(cuda, dev):
    get = getattr(cuda, "get_per_process_memory_fraction", None)
    if get is not None:
        try:
            f = float(get(dev))
            return None if f >= 1.0 else f
        except Exception:
            pass
    return _fractions.get(dev)


def _uuid(cuda, dev):
    """The device's UUID as NVML spells it ("GPU-…"), to map torch's index (which
    CUDA_VISIBLE_DEVICES renumbers) to NVML's; None when this torch does not say."""
    try:
        u = str(cuda.get_device_properties(dev).uuid)
    except Exception:
        return None
    return u if u.startswith(("GPU-", "MIG-")) else "GPU-" + u


def _not_imported():
    return {"ok": False, "torch_imported": False, "error": "torch not imported"}


def cmd_hello(_req):
    torch = _torch()
    cuda_version = None
    if torch is not None:
        cuda_version = getattr(getattr(torch, "version", None), "cuda", None)
    return {
        "ok": True,
        "protocol": PROTOCOL_VERSION,
        "companion_version": __version__,
        "pid": os.getpid(),
        "uid": os.geteuid(),
        "start_ticks": _start_ticks(),
        "start_time_ms": start_time_ms(),
        "python_version": sys.version.split()[0],
        "executable": sys.executable,
        "torch_imported": torch is not None,
        "torch_version": None if torch is None else str(getattr(torch, "__version__", "?")),
        "cuda_version": cuda_version,
    }


def cmd_stats(_req):
    torch = _torch()
    if torch is None:
        return _not_imported()
    cuda = _cuda(torch)
    conf, expandable = _alloc_conf()
    devices = []
    for dev in _used_devices(torch):
        s = cuda.memory_stats(dev)
        devices.append(
            {
                "device": dev,
                "allocated_bytes": s.get("allocated_bytes.all.current", 0),
                "reserved_bytes": s.get("reserved_bytes.all.current", 0),
                "active_bytes": s.get("active_bytes.all.current", 0),
                "inactive_split_bytes": s.get("inactive_split_bytes.all.current", 0),
                "peak_allocated_bytes": s.get("allocated_bytes.all.peak", 0),
                "peak_reserved_bytes": s.get("reserved_bytes.all.peak", 0),
                "num_alloc_retries": s.get("num_alloc_retries", 0),
                "num_ooms": s.get("num_ooms", 0),
                "memory_fraction": _fraction(cuda, dev),
                "uuid": _uuid(cuda, dev),
            }
        )
    return {
        "ok": True,
        "torch_imported": True,
        "cuda_initialized": bool(cuda.is_initialized()),
        "alloc_conf": conf,
        "expandable_segments": expandable,
        "devices": devices,
    }


def _driver_free(cuda, dev):
    """cudaMemGetInfo's free bytes on `dev` (None when it fails)."""
    try:
        return int(cuda.mem_get_info(dev)[0])
    except Exception:  # noqa: BLE001 - a figure for a report, never a failed release
        return None


def cmd_release_cache(_req):
    torch = _torch()
    if torch is None:
        return _not_imported()
    cuda = _cuda(torch)
    devices = []
    for dev in _used_devices(torch):
        with cuda.device(dev):
            # The driver's free memory on the device right before and after (what NVML
            # reports too), so the app can say what the GPU really got back.
            free_before = _driver_free(cuda, dev)
            before = cuda.memory_reserved(dev)
            allocated_before = cuda.memory_allocated(dev)
            cuda.empty_cache()
            after = cuda.memory_reserved(dev)
            free_after = _driver_free(cuda, dev)
        devices.append(
            {
                "device": dev,
                "reserved_before_bytes": before,
                "reserved_after_bytes": after,
                "allocated_before_bytes": allocated_before,
                "allocated_bytes": cuda.memory_allocated(dev),
                "device_free_before_bytes": free_before,
                "device_free_after_bytes": free_after,
            }
        )
    return {"ok": True, "torch_imported": True, "devices": devices}


def cmd_summary(_req):
    torch = _torch()
    if torch is None:
        return _not_imported()
    cuda = _cuda(torch)
    parts = []
    for dev in _used_devices(torch):
        parts.append(cuda.memory_summary(device=dev, abbreviated=False))
    return {"ok": True, "torch_imported": True, "text": "\n".join(parts)}


def cmd_set_fraction(req):
    torch = _torch()
    if torch is None:
        return _not_imported()
    dev, frac = req.get("device"), req.get("fraction")
    if not isinstance(dev, int) or isinstance(dev, bool) or dev < 0:
        return {"ok": False, "error": "`device` must be a device index (an integer >= 0)"}
    if not isinstance(frac, (int, float)) or isinstance(frac, bool) or not 0.0 < frac <= 1.0:
        return {"ok": False, "error": "`fraction` must be a number in (0, 1]"}
    cuda = _cuda(torch)
    if dev not in _used_devices(torch):
        return {"ok": False, "error": f"device {dev} is not in use by this process"}
    cuda.set_per_process_memory_fraction(float(frac), dev)
    _fractions[dev] = float(frac)
    return {"ok": True, "torch_imported": True, "device": dev, "fraction": float(frac)}


def cmd_segments(_req):
    torch = _torch()
    if torch is None:
        return _not_imported()
    _cuda(torch)
    snap = torch.cuda.memory._snapshot()
    segs = snap.get("segments", []) if isinstance(snap, dict) else []
    out = []
    for seg in segs[:MAX_SEGMENTS]:
        out.append(
            {
                k: seg.get(k)
                for k in (
                    "address",
                    "total_size",
                    "allocated_size",
                    "active_size",
                    "device",
                    "stream",
                    "segment_type",
                )
            }
        )
    return {
        "ok": True,
        "torch_imported": True,
        "segments": out,
        "total_segments": len(segs),
        "truncated": len(segs) > MAX_SEGMENTS,
    }


def cmd_subscribe(req):
    """The connection turns into a feed: the figures of ``stats`` are sent every
    ``interval_ms`` (first at once) until the client closes it. A poller then only reads: no
    request to write, no wake-up of this process by the app (see ``_push_loop``).

    With ``"changes_only": true`` a push the same as the last one sent is skipped, except
    once every ``heartbeat_ms`` (default 5 intervals; between the interval and 60 s), so an
    idle job costs its reader nothing but the heartbeat."""
    ms = req.get("interval_ms", 1000)
    if isinstance(ms, bool) or not isinstance(ms, int):
        return {"ok": False, "error": "interval_ms is a whole number of milliseconds"}
    ms = min(max(ms, MIN_PUSH_MS), MAX_PUSH_MS)
    changes_only = req.get("changes_only", False)
    if not isinstance(changes_only, bool):
        return {"ok": False, "error": "changes_only is true or false"}
    reply = {"ok": True, "subscribed": True, "interval_ms": ms, "changes_only": changes_only}
    if changes_only:
        hb = req.get("heartbeat_ms", 5 * ms)
        if isinstance(hb, bool) or not isinstance(hb, int):
            return {"ok": False, "error": "heartbeat_ms is a whole number of milliseconds"}
        reply["heartbeat_ms"] = min(max(hb, ms), MAX_PUSH_MS)
    return reply


COMMANDS = {
    "hello": cmd_hello,
    "subscribe": cmd_subscribe,
    "stats": cmd_stats,
    "release_cache": cmd_release_cache,
    "summary": cmd_summary,
    "set_fraction": cmd_set_fraction,
    "segments": cmd_segments,
}


def handle_line(line):
    """One request line (bytes) to one reply dict. Never raises."""
    try:
        req = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return {"ok": False, "error": f"malformed request: {type(e).__name__}: {e}"}
    if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
        return {"ok": False, "error": 'a request is a JSON object with a "cmd" string'}
    fn = COMMANDS.get(req["cmd"])
    if fn is None:
        return {"ok": False, "error": f"unknown cmd {req['cmd']!r}", "commands": sorted(COMMANDS)}
    return _call(fn, req)


def _call(fn, req):
    try:
        return fn(req)
    except Exception as e:  # the job must never die of a request
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


# ---------------------------------------------------------------- headroom


def compute_headroom(free, total, reserved, allocated, fraction=None, margin=None):
    """Bytes an allocation may still take: free + (reserved - allocated) - margin, and within
    ``fraction * total - allocated`` when a fraction is set; never below 0. The default margin
    is 2 % of the device, at least 256 MiB."""
    if margin is None:
        margin = max(256 << 20, total // 50)
    avail = free + max(0, reserved - allocated)
    if fraction is not None:
        avail = min(avail, int(fraction * total) - allocated)
    return max(0, int(avail - margin))


def headroom(device=None, margin=None):
    """Bytes this process can still take on ``device`` (default: the current one); see
    :func:`compute_headroom`. Raises RuntimeError when torch is not imported."""
    torch = _torch()
    if torch is None:
        raise RuntimeError("vramwarden_torch.headroom(): torch is not imported")
    cuda = _cuda(torch)
    dev = cuda.current_device() if device is None else int(device)
    with cuda.device(dev):
        free, total = cuda.mem_get_info(dev)
    return compute_headroom(
        free,
        total,
        cuda.memory_reserved(dev),
        cuda.memory_allocated(dev),
        _fraction(cuda, dev),
        margin,
    )


# ---------------------------------------------------------------- the server

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def _peer_uid(conn):
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    return _CRED.unpack(raw)[1]


def _line(obj):
    # default=str: a figure torch gives as an odd type is sent as text, never an exception.
    return json.dumps(obj, separators=(",", ":"), default=str).encode() + b"\n"


def _send(conn, obj):
    conn.sendall(_line(obj))


def _serve_conn(conn):
    try:
        uid = _peer_uid(conn)
        if uid != os.geteuid() and uid != 0:
            _send(conn, {"ok": False, "error": f"peer uid {uid} is not allowed"})
            return
        conn.settimeout(IDLE_TIMEOUT_S)
        buf = b""
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                if len(buf) > MAX_REQUEST:
                    _send(conn, {"ok": False, "error": f"request longer than {MAX_REQUEST} bytes"})
                    return
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                continue
            line, buf = buf[:nl], buf[nl + 1 :]
            if len(line) > MAX_REQUEST:
                _send(conn, {"ok": False, "error": f"request longer than {MAX_REQUEST} bytes"})
                return
            if line.strip():
                reply = handle_line(line)
                _send(conn, reply)
                if reply.get("subscribed"):
                    hb = reply.get("heartbeat_ms")
                    _push_loop(conn, reply["interval_ms"] / 1000.0, None if hb is None else hb / 1000.0)
                    return
    except Exception:  # a broken connection (or a bug here) never reaches the job
        pass
    finally:
        try:
            conn.close()
        finally:
            _slots.release()


def _push_loop(conn, interval, heartbeat=None):
    """A subscription: ``stats`` every ``interval`` seconds on this connection's own thread,
    woken by its own timer; with a ``heartbeat`` (changes only), a line the same as the last
    one sent is sent again only once ``heartbeat`` seconds have passed. Anything the client
    sends is read and dropped; the loop ends when the client closes the connection, or when a
    push cannot be written for IDLE_TIMEOUT_S (a client that stopped reading: the kernel's
    socket buffer bounds what waits for it)."""
    due = time.monotonic()
    last, sent_at = None, 0.0
    while True:
        now = time.monotonic()
        if now >= due:
            line = _line(_call(cmd_stats, {}))
            if heartbeat is None or line != last or now - sent_at >= heartbeat:
                conn.sendall(line)
                last, sent_at = line, now
            due += interval
            if due <= now:  # late (a long GIL hold in the job): no burst to catch up
                due = now + interval
            continue
        readable, _, _ = select.select([conn], [], [], due - now)
        if readable and not conn.recv(4096):
            return


def _accept_loop(sock):
    while True:
        try:
            conn, _ = sock.accept()  # blocks: no polling
        except OSError:
            if _state["sock"] is not sock:
                return  # stopped
            continue
        if not _slots.acquire(blocking=False):
            try:
                conn.settimeout(1.0)
                _send(conn, {"ok": False, "error": "busy: too many connections"})
            except OSError:
                pass
            conn.close()
            continue
        threading.Thread(target=_serve_conn, args=(conn,), daemon=True, name="vramwarden-conn").start()


def start():
    """Start serving (idempotent). Returns the socket path, or None when it could not (the
    reason is printed once on stderr; the process carries on) or VRAMWARDEN_TORCH=0."""
    if os.environ.get("VRAMWARDEN_TORCH", "1") == "0":
        return None
    with _lock:
        if _state["sock"] is not None and _state["pid"] == os.getpid():
            return _state["path"]
        try:
            folder = runtime_dir()
            # Ours, 0700, not a symlink: in XDG_RUNTIME_DIR and in the /tmp fallback alike.
            _own_dir(folder, create=True)
            _drop_stale(folder)
            path = socket_path()
            # Bound and listening under a temporary name, then renamed into place: the socket
            # appears only when it accepts connections.
            tmp = os.path.join(folder, f".torch-{os.getpid()}.tmp")
            for p in (tmp, path):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(tmp)
                os.chmod(tmp, 0o600)
                sock.listen(16)
                os.rename(tmp, path)
            except BaseException:
                sock.close()
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as e:
            print(f"vramwarden_torch: companion not started: {e}", file=sys.stderr)
            return None
        _state.update(sock=sock, path=path, pid=os.getpid())
        t = threading.Thread(target=_accept_loop, args=(sock,), daemon=True, name="vramwarden-torch")
        _state["thread"] = t
        t.start()
        return path


def stop():
    """Stop serving and remove the socket (only the process that created it does)."""
    with _lock:
        sock, path, pid = _state["sock"], _state["path"], _state["pid"]
        _state.update(sock=None, path=None, pid=None, thread=None)
    if sock is None or pid != os.getpid():
        return
    try:
        os.unlink(path)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _after_fork_in_child():
    # A forked child (a DataLoader worker) inherits the listening socket but not the thread:
    # it neither serves nor removes the parent's socket.
    sock = _state["sock"]
    _state.update(sock=None, path=None, pid=None, thread=None)
    if sock is not None:
        try:
            sock.close()
        except OSError:
            pass


atexit.register(stop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
