#!/usr/bin/env python3
"""What nvmlDeviceGetProcessUtilization answers: how it averages and how far back it reaches.

Starts a PyTorch job on GPU 0 that is busy in bursts (3.7 s at t=5 s, shorter ones at 60 s
and 100 s) and idle between, and reads the driver's per-process utilisation every 2 s with
windows of 2 s, 10 s, 60 s and "since 0". Each line shows, for the job's PID, the age of the
entry's time stamp and its SM figure.

    python3 tests/workloads/nvml_util_window.py          # needs an NVIDIA GPU and PyTorch

Needs only the driver's libnvidia-ml.so.1 (through ctypes) besides PyTorch for the job.
"""
import ctypes as C
import sys
import time

from nvml_probe import ProcSample, gpu0, start_job

BURSTS = ((5, 3), (60, 1), (100, 0.3))
RUN_S = 130


def job():
    import torch

    x = torch.randn(4096, 4096, device="cuda")
    t0 = time.time()
    print("start", t0, flush=True)
    for start, burst in BURSTS:
        while time.time() - t0 < start:
            time.sleep(0.05)
        print(f"burst at t={time.time() - t0:.1f}", flush=True)
        while time.time() - t0 < start + burst:
            x @ x
        torch.cuda.synchronize()
        print(f"burst end t={time.time() - t0:.1f}", flush=True)
    while time.time() - t0 < RUN_S:
        time.sleep(0.5)


def probe():
    nv, h = gpu0()
    buf = (ProcSample * 4096)()
    child, t0 = start_job(__file__)

    def read(since_us):
        n = C.c_uint(len(buf))
        cpu = time.thread_time_ns()
        r = nv.nvmlDeviceGetProcessUtilization(h, buf, C.byref(n), C.c_ulonglong(since_us))
        cpu = (time.thread_time_ns() - cpu) / 1000
        if r != 0:
            return f"rc {r}", cpu
        now = time.time()
        mine = [f"age {now - buf[i].ts / 1e6:.1f}s sm {buf[i].sm}"
                for i in range(n.value) if buf[i].pid == child.pid]
        return (", ".join(mine) or "none"), cpu

    costs = []
    while time.time() - t0 < RUN_S - 2:
        now = int(time.time() * 1e6)
        cols = []
        for name, since in (("2s", now - 2_000_000), ("10s", now - 10_000_000),
                            ("60s", now - 60_000_000), ("since 0", 0)):
            text, cpu = read(since)
            costs.append(cpu)
            cols.append(f"{name}: {text}")
        print(f"t={time.time() - t0:5.1f}  " + " | ".join(cols), flush=True)
        time.sleep(2)
    for line in child.stdout:
        print("job:", line.strip())
    child.wait()
    costs.sort()
    print(f"CPU per read: median {costs[len(costs) // 2]:.0f} µs, "
          f"min {costs[0]:.0f}, max {costs[-1]:.0f} ({len(costs)} reads)")


if __name__ == "__main__":
    job() if sys.argv[1:] == ["job"] else probe()
