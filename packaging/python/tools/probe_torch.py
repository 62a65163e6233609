"""Checks the companion against a real torch on a GPU (run from the repository root:
``python3 packaging/python/tools/probe_torch.py``). Prints what the companion answers next to
what torch and nvidia-smi say: stats, segments, summary, release_cache, set_fraction, headroom
and the time of a stats round trip (client and companion in the same process here).
"""
import json, os, socket, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp()
try:
    import torch
except ImportError as e:
    sys.exit(f"probe_torch: needs torch ({e})")
import vramwarden_torch as vt
s = socket.socket(socket.AF_UNIX); s.connect(vt.socket_path()); f = s.makefile("rwb")
def rq(o):
    f.write(json.dumps(o).encode() + b"\n"); f.flush(); return json.loads(f.readline())
def smi():
    return subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
print("torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())
print("hello", rq({"cmd": "hello"}))
print("stats before cuda", rq({"cmd": "stats"}))
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
ys = [torch.empty((10 << 20) + i * 4096, dtype=torch.uint8, device="cuda") for i in range(300)]
del ys
st = rq({"cmd": "stats"})
print("stats", json.dumps(st))
print("torch says allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved())
sg = rq({"cmd": "segments"})
print("segments", sg.get("total_segments"), sg.get("truncated"), sg.get("segments", [None])[:2], sg.get("error"))
sm = rq({"cmd": "summary"})
print("summary chars", len(sm.get("text", "")), sm.get("error"))
print("nvidia-smi before release", smi())
rel = rq({"cmd": "release_cache"})
print("release", rel)
print("torch says reserved after", torch.cuda.memory_reserved())
time.sleep(0.5)
print("nvidia-smi after release", smi())
print("set_fraction", rq({"cmd": "set_fraction", "device": 0, "fraction": 0.5}))
print("stats fraction", rq({"cmd": "stats"})["devices"][0]["memory_fraction"])
print("set_fraction bad dev", rq({"cmd": "set_fraction", "device": 5, "fraction": 0.5}))
print("headroom", vt.headroom(), "mem_get_info", torch.cuda.mem_get_info())
try:
    torch.empty(80 << 30, dtype=torch.uint8, device="cuda")
    print("80 GiB under fraction 0.5: allocated?!")
except torch.cuda.OutOfMemoryError as e:
    print("80 GiB under fraction 0.5: OOM as expected")
print("num_ooms now", rq({"cmd": "stats"})["devices"][0]["num_ooms"])
n = 2000; t = time.perf_counter()
for _ in range(n):
    rq({"cmd": "stats"})
print("stats round trip with CUDA: %.1f us" % ((time.perf_counter() - t) / n * 1e6))
