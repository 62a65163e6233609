#!/usr/bin/env python3
"""Can the GPU's own utilisation samples tell that no process was busy?

The agent reads per-process utilisation (nvmlDeviceGetProcessUtilization, about 2 ms of CPU a
read) every 10 s. This probe checks, on the real driver, whether the device's utilisation
samples since the last read (nvmlDeviceGetSamples, NVML_GPU_UTILIZATION_SAMPLES) being all zero
ever comes with a process that the per-process read finds busy, and what each call costs.

Two PyTorch jobs run on GPU 0: one idle holding memory, one busy in bursts of 3 s, 0.3 s, a
single small kernel, and small kernels every 0.5 s. Every 10 s (and at a few odd offsets) the
probe reads both since its last read and prints what each said.

    python3 tests/workloads/nvml_idle_gate.py          # needs an NVIDIA GPU and PyTorch

Needs only the driver's libnvidia-ml.so.1 (through ctypes) besides PyTorch for the jobs.
"""
import ctypes as C
import sys
import time

from nvml_probe import ProcSample, gpu0, start_job

RUN_S = 150
# (start s, kind, length s): "busy" runs matmuls for the length, "one" launches one small
# kernel, "ticks" launches one small kernel every 0.5 s for the length.
BURSTS = ((12, "busy", 3), (33, "busy", 0.3), (52, "one", 0), (71, "ticks", 10),
          (95, "busy", 1), (118, "one", 0))


def job(kind):
    import torch

    x = torch.randn(4096, 4096, device="cuda")
    y = torch.randn(256, 256, device="cuda")
    torch.cuda.synchronize()
    t0 = time.time()
    print("start", t0, flush=True)
    if kind == "idle":
        while time.time() - t0 < RUN_S:
            time.sleep(0.5)
        return
    for start, what, length in BURSTS:
        while time.time() - t0 < start:
            time.sleep(0.02)
        print(f"{what} {length} at t={time.time() - t0:.1f}", flush=True)
        if what == "busy":
            while time.time() - t0 < start + length:
                x @ x
                torch.cuda.synchronize()
        elif what == "one":
            y @ y
            torch.cuda.synchronize()
        else:
            while time.time() - t0 < start + length:
                y @ y
                torch.cuda.synchronize()
                time.sleep(0.5)
    while time.time() - t0 < RUN_S:
        time.sleep(0.5)


class Value(C.Union):
    _fields_ = [("d", C.c_double), ("ui", C.c_uint), ("ul", C.c_ulong),
                ("ull", C.c_ulonglong), ("sll", C.c_longlong), ("us", C.c_ushort)]


class Sample(C.Structure):
    _fields_ = [("ts", C.c_ulonglong), ("v", Value)]


GPU_UTILIZATION_SAMPLES = 1


def probe():
    nv, h = gpu0()
    pbuf = (ProcSample * 1024)()
    sbuf = (Sample * 4096)()
    idle, _ = start_job(__file__, "idle")
    bursty, t0 = start_job(__file__, "bursty")

    def per_process(since_us):
        n = C.c_uint(len(pbuf))
        cpu = time.thread_time_ns()
        r = nv.nvmlDeviceGetProcessUtilization(h, pbuf, C.byref(n), C.c_ulonglong(since_us))
        cpu = (time.thread_time_ns() - cpu) / 1000
        if r == 6:  # NVML_ERROR_NOT_FOUND: no process had a sample
            return [], cpu
        if r != 0:
            return None, cpu
        return [(pbuf[i].pid, pbuf[i].sm) for i in range(n.value)], cpu

    def device(since_us):
        n = C.c_uint(len(sbuf))
        vt = C.c_int()
        cpu = time.thread_time_ns()
        r = nv.nvmlDeviceGetSamples(h, GPU_UTILIZATION_SAMPLES, C.c_ulonglong(since_us),
                                    C.byref(vt), C.byref(n), sbuf)
        cpu = (time.thread_time_ns() - cpu) / 1000
        if r == 6:
            return [], cpu
        if r != 0:
            return None, cpu
        return [(sbuf[i].ts, sbuf[i].v.ui) for i in range(n.value)], cpu

    last = int(time.time() * 1e6) - 10_000_000
    reads = wrong = 0
    pcost, dcost = [], []
    offsets = (10, 10, 10, 7, 13, 10, 10, 4, 16, 10, 10, 10, 10, 10)
    k = 0
    while time.time() - t0 < RUN_S - 3:
        time.sleep(offsets[k % len(offsets)])
        k += 1
        now = int(time.time() * 1e6)
        samples, dc = device(last)
        procs, pc = per_process(last)
        dcost.append(dc)
        pcost.append(pc)
        reads += 1
        if samples is None or procs is None:
            print(f"t={time.time() - t0:5.1f} read failed: samples {samples} procs {procs}")
            last = now
            continue
        busy_dev = max((v for _, v in samples), default=0)
        busy_procs = [(p, sm) for p, sm in procs if sm > 0]
        span = ""
        if samples:
            span = (f"{len(samples)} samples, first {(samples[0][0] - last) / 1e6:+.2f}s "
                    f"after since, last {(now - samples[-1][0]) / 1e6:.2f}s before now")
        flag = ""
        if busy_dev == 0 and busy_procs:
            wrong += 1
            flag = "  <-- device idle, a process busy"
        print(f"t={time.time() - t0:5.1f} device max {busy_dev:3d} ({span}) | processes "
              f"{procs}{flag}", flush=True)
        last = now
    for child in (idle, bursty):
        for line in child.stdout:
            print("job:", line.strip())
        child.wait()
    for name, costs in (("per-process", pcost), ("device samples", dcost)):
        costs.sort()
        print(f"CPU per {name} read: median {costs[len(costs) // 2]:.0f} µs, "
              f"min {costs[0]:.0f}, max {costs[-1]:.0f} ({len(costs)} reads)")
    print(f"reads where the device samples were all zero but a process was busy: {wrong} "
          f"of {reads}")


if __name__ == "__main__":
    job(sys.argv[2]) if sys.argv[1:2] == ["job"] else probe()
