#!/usr/bin/env python3
"""What each NVML call the agent makes, or could make instead, costs in CPU on the real driver.

Three PyTorch jobs run on GPU 0, busy with matrix products (as in perf_side_by_side.sh). The
probe then calls each entry point many times, once every SPACING_S (as the agent's 1 Hz
sampler does: the driver's caches are cold again by the next call) and back to back, and prints
the CPU time of the calling thread per call (user and system, `time.thread_time_ns`):

- per-process utilisation, the agent's read (nvmlDeviceGetProcessUtilization) over the last
  10 s, the last 1 s and "since 0", and the newer nvmlDeviceGetProcessesUtilizationInfo;
- the compute process list (nvmlDeviceGetComputeRunningProcesses_v3) and the newer
  nvmlDeviceGetRunningProcessDetailList;
- the memory reading, v2 (the agent's, equal to nvidia-smi's "used") and v1;
- the GPU's utilisation rates.

    python3 tests/workloads/nvml_call_costs.py          # needs an NVIDIA GPU and PyTorch

Needs only the driver's libnvidia-ml.so.1 (through ctypes) besides PyTorch for the jobs.
"""
import ctypes as C
import statistics
import sys
import time

from nvml_probe import ProcSample, gpu0, start_job

JOBS = 3
RUN_S = 240
SPACED = 150
SPACING_S = 0.05
BACK_TO_BACK = 300


def job():
    import torch

    x = torch.randn(4096, 4096, device="cuda")
    t0 = time.time()
    print("start", t0, flush=True)
    while time.time() - t0 < RUN_S:
        x @ x
        torch.cuda.synchronize()
        time.sleep(0.01)


class ProcUtilInfo(C.Structure):
    """nvmlProcessUtilizationInfo_v1_t."""
    _fields_ = [("ts", C.c_ulonglong), ("pid", C.c_uint), ("sm", C.c_uint), ("mem", C.c_uint),
                ("enc", C.c_uint), ("dec", C.c_uint), ("jpg", C.c_uint), ("ofa", C.c_uint)]


class ProcsUtilInfo(C.Structure):
    """nvmlProcessesUtilizationInfo_v1_t."""
    _fields_ = [("version", C.c_uint), ("count", C.c_uint), ("last_seen", C.c_ulonglong),
                ("array", C.POINTER(ProcUtilInfo))]


class ProcessInfo(C.Structure):
    """nvmlProcessInfo_t (v2/v3)."""
    _fields_ = [("pid", C.c_uint), ("used", C.c_ulonglong), ("gi", C.c_uint), ("ci", C.c_uint)]


class ProcessDetail(C.Structure):
    """nvmlProcessDetail_v1_t."""
    _fields_ = [("pid", C.c_uint), ("used", C.c_ulonglong), ("gi", C.c_uint), ("ci", C.c_uint),
                ("cc", C.c_ulonglong)]


class ProcessDetailList(C.Structure):
    """nvmlProcessDetailList_v1_t."""
    _fields_ = [("version", C.c_uint), ("mode", C.c_uint), ("count", C.c_uint),
                ("array", C.POINTER(ProcessDetail))]


class MemoryV1(C.Structure):
    _fields_ = [("total", C.c_ulonglong), ("free", C.c_ulonglong), ("used", C.c_ulonglong)]


class MemoryV2(C.Structure):
    _fields_ = [("version", C.c_uint), ("total", C.c_ulonglong), ("reserved", C.c_ulonglong),
                ("free", C.c_ulonglong), ("used", C.c_ulonglong)]


class Rates(C.Structure):
    _fields_ = [("gpu", C.c_uint), ("memory", C.c_uint)]


def version(struct, v):
    return C.sizeof(struct) | (v << 24)


def calls(nv, h):
    """(name, call) for each entry point; a call returns (NVML status, what it read)."""
    pbuf = (ProcSample * 1024)()
    ubuf = (ProcUtilInfo * 1024)()
    lbuf = (ProcessInfo * 1024)()
    dbuf = (ProcessDetail * 1024)()
    now_us = lambda: int(time.time() * 1e6)

    def util(back_s):
        def call():
            n = C.c_uint(len(pbuf))
            since = 0 if back_s is None else now_us() - int(back_s * 1e6)
            r = nv.nvmlDeviceGetProcessUtilization(h, pbuf, C.byref(n), C.c_ulonglong(since))
            return r, sorted({(pbuf[i].pid, pbuf[i].sm) for i in range(n.value)} if r == 0 else [])
        return call

    def util_info():
        info = ProcsUtilInfo(version(ProcsUtilInfo, 1), len(ubuf), now_us() - 10_000_000,
                             C.cast(ubuf, C.POINTER(ProcUtilInfo)))
        r = nv.nvmlDeviceGetProcessesUtilizationInfo(h, C.byref(info))
        return r, sorted({(ubuf[i].pid, ubuf[i].sm) for i in range(info.count)} if r == 0 else [])

    def compute_list():
        n = C.c_uint(len(lbuf))
        r = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, C.byref(n), lbuf)
        return r, sorted((lbuf[i].pid, lbuf[i].used) for i in range(n.value)) if r == 0 else []

    def detail_list():
        d = ProcessDetailList(version(ProcessDetailList, 1), 0, len(dbuf),
                              C.cast(dbuf, C.POINTER(ProcessDetail)))
        r = nv.nvmlDeviceGetRunningProcessDetailList(h, C.byref(d))
        return r, sorted((dbuf[i].pid, dbuf[i].used) for i in range(d.count)) if r == 0 else []

    def memory_v2():
        m = MemoryV2(version(MemoryV2, 2), 0, 0, 0, 0)
        r = nv.nvmlDeviceGetMemoryInfo_v2(h, C.byref(m))
        return r, m.used

    def memory_v1():
        m = MemoryV1()
        r = nv.nvmlDeviceGetMemoryInfo(h, C.byref(m))
        return r, m.used

    def rates():
        u = Rates()
        r = nv.nvmlDeviceGetUtilizationRates(h, C.byref(u))
        return r, (u.gpu, u.memory)

    return [("process utilisation, last 10 s", util(10)),
            ("process utilisation, last 1 s", util(1)),
            ("process utilisation, since 0", util(None)),
            ("ProcessesUtilizationInfo, last 10 s", util_info),
            ("compute process list _v3", compute_list),
            ("RunningProcessDetailList (compute)", detail_list),
            ("memory info _v2", memory_v2),
            ("memory info v1", memory_v1),
            ("utilisation rates", rates)]


def cost(call, times, spacing):
    """Median and mean CPU µs of `call` over `times` calls `spacing` s apart; its last answer."""
    us = []
    answer = None
    for _ in range(times):
        if spacing:
            time.sleep(spacing)
        t = time.thread_time_ns()
        answer = call()
        us.append((time.thread_time_ns() - t) / 1000)
    return statistics.median(us), statistics.fmean(us), answer


def probe():
    nv, h = gpu0()
    jobs = [start_job(__file__, "job")[0] for _ in range(JOBS)]
    time.sleep(10)
    print(f"{JOBS} busy jobs on GPU 0; CPU µs per call (median / mean)")
    print(f"{'call':40} {'every ' + str(SPACING_S) + ' s':>18} {'back to back':>18}  answer")
    for name, call in calls(nv, h):
        med_s, mean_s, _ = cost(call, SPACED, SPACING_S)
        med_b, mean_b, answer = cost(call, BACK_TO_BACK, 0)
        print(f"{name:40} {med_s:8.1f} / {mean_s:7.1f} {med_b:8.1f} / {mean_b:7.1f}  {answer}",
              flush=True)
    for child in jobs:
        child.kill()
        child.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "job":
        job()
    else:
        probe()
