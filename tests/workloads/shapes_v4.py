#!/usr/bin/env python3
"""Leaks v4 shapes (issue 38): jobs whose growth slows and stops (not leaks) beside leaks hidden in
noise, spikes or a load (PyTorch on an NVIDIA GPU; `driver-leak` uses the CUDA driver API alone).

Each run prints one JSON line per event ({"t": unix s, "pid": ..., "event": ...}); `start` carries
`leak` (the ground truth) and `heldout` (scored, never tuned on); a leak's `leak_starts` marks when
its leaking growth begins. Every pattern is seeded: a second run makes the same shape.

  warmup-jumps   8 irregular warm-up jumps of 300-900 MiB over ~45 s, then flat training   no leak
  autotune       cudnn.benchmark over 6 input shapes (workspaces tried), then one shape     no leak
  graphs         torch.compile(mode="reduce-overhead")-like: a CUDA graph captured per new
                 batch size (its own memory pool), compile pauses between, then replays     no leak
  eval-keep      training; every 20 s an eval spike of ~2 GiB freed afterwards
                 (empty_cache), but 128 MiB of its outputs kept on the GPU                  leak
  pipeline-swap  loads model A (6 GiB, 3 shards), runs, frees it, loads B (5 GiB, 5
                 shards), runs, frees it, ... for the whole run                             no leak
  kv-level       a server's paged KV cache: traffic ramps up over 20 s, the pool grows in
                 256 MiB chunks as needed, ~7.5 GiB in ~30 s, then levels                   no leak
  kv-leak        the same server at 3 requests/s, but every finished request keeps 3 of its
                 2 MiB blocks: the pool keeps growing (~14 MiB/s), in 64 MiB chunks        leak
  driver-leak    no framework: cuMemAlloc of 2 GiB via ctypes, flat for 60 s, then
                 64 MiB every 10 s never freed                                              leak
  load-steps     a 4 GiB model in 4 shards, 40 s of flat training, then 256 MiB kept
                 every 16 s (a step leak after a load)                                    leak
"""
import argparse, ctypes, json, os, random, sys, time

MIB = 1 << 20
LEAKS = {"eval-keep", "kv-leak", "driver-leak", "load-steps"}
# Kept out of the detector's tuning: scored, reported, never tuned on.
HELDOUT = {"graphs", "pipeline-swap", "kv-leak", "driver-leak"}


def say(event, **kw):
    print(json.dumps({"t": time.time(), "pid": os.getpid(), "event": event, **kw}), flush=True)


def torch_mod():
    import torch
    return torch


def alloc(mib):
    torch = torch_mod()
    return torch.empty(int(mib * MIB), dtype=torch.uint8, device="cuda")


def mlp(width=2048, layers=4):
    torch = torch_mod()
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU())
                                  for _ in range(layers)]).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def train_step(model, opt, batch, width=2048):
    torch = torch_mod()
    x = torch.randn(batch, width, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def train_until(end, model, opt, batch=256):
    while time.time() < end:
        train_step(model, opt, batch)
        time.sleep(0.05)


def reserved():
    return torch_mod().cuda.memory_reserved() / MIB


def warmup_jumps(a, rng, end):
    model, opt = mlp()
    kept = []
    for i in range(8):
        size = rng.uniform(300, 900)
        kept.append(alloc(size))
        say("grow", jump=i + 1, mib=round(size), reserved_mib=reserved())
        train_until(time.time() + rng.uniform(2.0, 9.0), model, opt)
    say("warm")
    train_until(end, model, opt)


def autotune(a, rng, end):
    torch = torch_mod()
    torch.backends.cudnn.benchmark = True
    net = torch.nn.Sequential(torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(128, 128, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(128, 64, 3, padding=1)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    shapes = [(16, 128), (32, 96), (8, 224), (24, 160), (48, 112), (12, 192)]
    def step(n, hw):
        x = torch.randn(n, 64, hw, hw, device="cuda")
        loss = net(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for n, hw in shapes:
        t_end = time.time() + rng.uniform(3.0, 7.0)
        while time.time() < t_end:
            step(n, hw)
            torch.cuda.synchronize()
            time.sleep(0.05)
        say("grow", shape=[n, hw], reserved_mib=reserved())
    say("tuned")
    while time.time() < end:
        step(24, 160)
        torch.cuda.synchronize()
        time.sleep(0.05)


def graphs(a, rng, end):
    torch = torch_mod()
    width = 4096
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(),
                                torch.nn.Linear(width, width)).cuda().eval()
    captured = []
    for batch in [2048, 1024, 3072, 512, 4096, 256]:
        time.sleep(rng.uniform(2.0, 8.0))  # "compiling"
        x = torch.randn(batch, width, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(s):
            for _ in range(2):
                model(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(g):
            y = model(x)
        captured.append((g, x, y))
        say("grow", batch=batch, reserved_mib=reserved())
    say("compiled")
    i = 0
    while time.time() < end:
        g, x, _ = captured[i % len(captured)]
        x.normal_()
        g.replay()
        torch.cuda.synchronize()
        i += 1
        time.sleep(0.02)


def eval_keep(a, rng, end):
    torch = torch_mod()
    model, opt = mlp()
    kept, first = [], True
    next_eval = time.time() + 20
    while time.time() < end:
        train_until(min(next_eval, end), model, opt)
        if time.time() >= end:
            break
        with torch.no_grad():
            acts = [alloc(512) for _ in range(4)]  # the eval batch's activations
            for _ in range(20):
                model(torch.randn(512, 2048, device="cuda"))
            time.sleep(2.0)
            if first:
                say("leak_starts")
                first = False
            kept.append(alloc(128))  # its outputs, kept by mistake
            del acts
        torch.cuda.empty_cache()
        say("grow", kept_mib=128 * len(kept), reserved_mib=reserved())
        next_eval = time.time() + 20


def pipeline_swap(a, rng, end):
    torch = torch_mod()
    models = [("A", 6144, 3), ("B", 5120, 5)]
    i = 0
    while time.time() < end:
        name, mib, shards = models[i % 2]
        held = []
        for k in range(shards):
            held.append(alloc(mib / shards))
            say("grow", model=name, shard=k + 1, reserved_mib=reserved())
            time.sleep(2.0)
        say("loaded", model=name)
        x = torch.randn(4096, 4096, device="cuda")
        t_end = min(end, time.time() + 40)
        while time.time() < t_end:
            x = torch.tanh(x @ x.T / 4096)
            torch.cuda.synchronize()
            time.sleep(0.05)
        del held, x
        torch.cuda.empty_cache()
        say("freed", model=name)
        i += 1
        time.sleep(1.0)


class Pool:
    """A paged KV cache: 2 MiB blocks carved from chunks the pool allocates when it runs out."""

    def __init__(self, chunk_mib):
        self.chunk_mib, self.chunks, self.free, self.used = chunk_mib, [], 0, 0

    def take(self, n):
        while self.free < n:
            self.chunks.append(alloc(self.chunk_mib))
            self.free += self.chunk_mib // 2
            say("grow", pool_mib=len(self.chunks) * self.chunk_mib)
        self.free -= n
        self.used += n

    def give(self, n):
        self.free += n
        self.used -= n


def poisson(rng, lam):
    """A Poisson draw (Knuth's method; lam is small here)."""
    k, p, limit = 0, rng.random(), pow(2.718281828459045, -lam)
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def kv_server(a, rng, end, leak):
    torch = torch_mod()
    pool = Pool(64 if leak else 256)
    x = torch.randn(2048, 2048, device="cuda")
    active, t0, last, started = [], time.time(), time.time(), False
    while time.time() < end:
        now = time.time()
        # Arrivals per second: kv-level ramps up to 8/s over 20 s and stays (the pool fills to
        # ~7.5 GiB in ~30 s, then creeps as rarer peaks come); kv-leak serves 3/s, shorter
        # requests, each keeping 3 of its blocks.
        rate = 3.0 if leak else 8.0 * min(1.0, (now - t0) / 20.0) + 0.5
        for _ in range(poisson(rng, rate * (now - last))):
            blocks = rng.randint(16, 64)
            pool.take(blocks)
            active.append((now + (rng.uniform(2.0, 8.0) if leak else rng.uniform(3.0, 15.0)), blocks))
        last = now
        done = [r for r in active if r[0] <= now]
        active = [r for r in active if r[0] > now]
        for _, blocks in done:
            if leak:
                if not started:
                    say("leak_starts")
                    started = True
                pool.give(blocks - 3)  # three blocks never returned
            else:
                pool.give(blocks)
        x = torch.tanh(x @ x / 2048)
        torch.cuda.synchronize()
        time.sleep(0.1)


def driver_leak(a, rng, end):
    cuda = ctypes.CDLL("libcuda.so.1")
    def check(r, what):
        if r != 0:
            say("cuda_error", call=what, code=r)
            sys.exit(4)
    check(cuda.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    ptrs = []
    def malloc(mib):
        p = ctypes.c_uint64()
        check(cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(int(mib * MIB))), "cuMemAlloc_v2")
        check(cuda.cuMemsetD8_v2(p, ctypes.c_ubyte(1), ctypes.c_size_t(int(mib * MIB))), "cuMemsetD8_v2")
        ptrs.append(p)
    malloc(2048)
    say("baseline", held_mib=2048)
    time.sleep(max(0.0, min(60.0, end - time.time())))
    say("leak_starts")
    while time.time() < end:
        malloc(64)
        say("grow", held_mib=2048 + 64 * (len(ptrs) - 1))
        time.sleep(10.0)


def load_steps(a, rng, end):
    kept = []
    for k in range(4):
        kept.append(alloc(1024))
        say("grow", shard=k + 1)
        time.sleep(2.0)
    say("loaded")
    model, opt = mlp(layers=2)
    train_until(time.time() + 40, model, opt)
    say("leak_starts")
    while time.time() < end:
        kept.append(alloc(256))
        say("grow", held_mib=4096 + 256 * (len(kept) - 4))
        train_until(min(end, time.time() + 16), model, opt)


PATTERNS = {
    "warmup-jumps": warmup_jumps, "autotune": autotune, "graphs": graphs, "eval-keep": eval_keep,
    "pipeline-swap": pipeline_swap, "kv-level": lambda a, r, e: kv_server(a, r, e, False),
    "kv-leak": lambda a, r, e: kv_server(a, r, e, True), "driver-leak": driver_leak,
    "load-steps": load_steps,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pattern", choices=sorted(PATTERNS))
    p.add_argument("--seconds", type=float, default=250)
    p.add_argument("--seed", type=int, default=38)
    a = p.parse_args()
    if a.pattern != "driver-leak":
        torch_mod().cuda.init()
    rng = random.Random(f"{a.pattern}-{a.seed}")
    say("start", pattern=a.pattern, leak=a.pattern in LEAKS, heldout=a.pattern in HELDOUT, args=vars(a))
    PATTERNS[a.pattern](a, rng, time.time() + a.seconds)
    say("end")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # an OOM or a driver error: said, exit 3
        say("oom" if "out of memory" in str(e).lower() else "error", error=str(e).splitlines()[0][:300])
        sys.exit(3)
