#!/usr/bin/env python3
"""A GPU job with no framework: the CUDA driver API through ctypes (libcuda.so.1 only).

Prints one JSON line per event ({"t": unix s, "pid": ..., "event": ...}).

  hold --gib 10                 allocates --gib in 256 MiB chunks, each filled with its own
                                32-bit pattern; holds them. SIGUSR1 (and the end) checks that
                                every chunk still holds its pattern ("check" with same: true).
  grow --gib 40 --rate-gib 0.4  grows to --gib at --rate-gib/s, holds --hold s, exits 0 (3 on OOM)
  restore-oom PID               the driver's own behaviour after a restore that ran out of
                                memory: for a process PID parked (checkpointed) by vramwarden
                                and a GPU filled by another job, tries cuCheckpointProcessRestore
                                (expects CUresult 2) and prints each later call's CUresult once
                                the GPU is freed (SIGUSR1 says it is).
"""
import ctypes, json, os, signal, sys, time

CHUNK = 256 << 20
cuda = ctypes.CDLL("libcuda.so.1")


def say(event, **kw):
    print(json.dumps({"t": time.time(), "pid": os.getpid(), "event": event, **kw}), flush=True)


def ok(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")


def context():
    ok(cuda.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ok(cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    return ctx


def alloc_chunk(i):
    p = ctypes.c_uint64()
    r = cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(CHUNK))
    if r == 2:
        say("oom", chunk=i)
        sys.exit(3)
    ok(r, "cuMemAlloc")
    ok(cuda.cuMemsetD32_v2(p, ctypes.c_uint(0x5A000000 + i), ctypes.c_size_t(CHUNK // 4)), "cuMemsetD32")
    return p


def check(chunks):
    buf = (ctypes.c_uint32 * 1024)()
    bad = 0
    for i, p in enumerate(chunks):
        for off in (0, CHUNK // 2, CHUNK - 4096):
            ok(cuda.cuMemcpyDtoH_v2(buf, ctypes.c_uint64(p.value + off), ctypes.c_size_t(4096)), "cuMemcpyDtoH")
            bad += sum(1 for v in buf if v != 0x5A000000 + i)
    say("check", chunks=len(chunks), same=(bad == 0), bad_words=bad)


def hold(gib, seconds):
    context()
    chunks = [alloc_chunk(i) for i in range(int(gib * 4))]
    ok(cuda.cuCtxSynchronize(), "sync")
    say("hold", held_mib=len(chunks) * 256)
    want = {"check": False}
    signal.signal(signal.SIGUSR1, lambda *_: want.__setitem__("check", True))
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.5)
        if want["check"]:
            want["check"] = False
            check(chunks)
    check(chunks)


def grow(gib, rate, hold_s):
    context()
    chunks, n = [], int(gib * 4)
    for i in range(n):
        chunks.append(alloc_chunk(i))
        say("grow", held_mib=len(chunks) * 256)
        time.sleep(0.25 / rate)
    say("reached", held_mib=len(chunks) * 256)
    time.sleep(hold_s)
    check(chunks)


def restore_oom(pid):
    api = {n: getattr(cuda, n) for n in ("cuCheckpointProcessRestore", "cuCheckpointProcessUnlock",
                                         "cuCheckpointProcessGetState")}
    def state():
        s = ctypes.c_int(-1)
        r = api["cuCheckpointProcessGetState"](pid, ctypes.byref(s))
        return r, s.value
    say("before", state=state())
    say("restore", result=api["cuCheckpointProcessRestore"](pid, None), state=state())
    freed = {"yes": False}
    signal.signal(signal.SIGUSR1, lambda *_: freed.__setitem__("yes", True))
    say("waiting_for_room")
    while not freed["yes"]:
        time.sleep(0.2)
    time.sleep(2)
    for i in range(3):
        say("restore_again", i=i, result=api["cuCheckpointProcessRestore"](pid, None), state=state())
        time.sleep(1)
    say("unlock", result=api["cuCheckpointProcessUnlock"](pid, None), state=state())


def main():
    mode = sys.argv[1]
    arg = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    say("start", mode=mode, args=arg)
    if mode == "hold":
        hold(float(arg.get("--gib", 10)), float(arg.get("--seconds", 3600)))
    elif mode == "grow":
        grow(float(arg["--gib"]), float(arg.get("--rate-gib", 0.4)), float(arg.get("--hold", 10)))
    elif mode == "restore-oom":
        restore_oom(int(sys.argv[2]))
    say("end")


if __name__ == "__main__":
    main()
