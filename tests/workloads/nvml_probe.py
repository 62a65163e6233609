"""What the NVML probes in this folder share: the driver's library through ctypes, GPU 0's
handle, the per-process utilisation entry, and starting a job (this same script with `job`
and its arguments) that prints `start <time>` once it is ready.

Imported by nvml_util_window.py and nvml_idle_gate.py, which are run as scripts from any
folder (Python puts their folder first on the import path).
"""
import ctypes as C
import subprocess
import sys


class ProcSample(C.Structure):
    """nvmlProcessUtilizationSample_t."""
    _fields_ = [("pid", C.c_uint), ("ts", C.c_ulonglong), ("sm", C.c_uint),
                ("mem", C.c_uint), ("enc", C.c_uint), ("dec", C.c_uint)]


def gpu0():
    """The driver's library, initialised, and GPU 0's handle; exits with a message if not."""
    nv = C.CDLL("libnvidia-ml.so.1")
    if nv.nvmlInit_v2() != 0:
        sys.exit("NVML did not initialise")
    h = C.c_void_p()
    if nv.nvmlDeviceGetHandleByIndex_v2(0, C.byref(h)) != 0:
        sys.exit("no GPU 0")
    return nv, h


def start_job(script, *args):
    """Runs `script job ARGS` and waits for its `start <time>` line: (the child, the time)."""
    child = subprocess.Popen([sys.executable, script, "job", *args], stdout=subprocess.PIPE,
                             text=True)
    first = child.stdout.readline().split()
    if len(first) != 2 or first[0] != "start":
        sys.exit(f"the job {' '.join(args)} did not start: {first}")
    return child, float(first[1])
