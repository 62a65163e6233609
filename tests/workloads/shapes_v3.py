#!/usr/bin/env python3
"""More GPU memory shapes for the leak detector and for park/resume (PyTorch on an NVIDIA GPU).

Each run prints one JSON line per event ({"t": unix s, "pid": ..., "event": ...}); `start`
carries `leak` (the ground truth: does this process leak?).

  shard-load  --gib 12 --shards 12 --every 2 --seconds 180  a model loaded in shards, then flat training
  midrun-load --gib 8 --at 60 --shards 8 --seconds 180      flat training, then a second model loaded mid-run
  growbatch   --seconds 180                                 a real MLP whose batch grows step by step, then levels
  late-leak   --baseline-gib 4 --at 120 --rate-mib 24       clean flat use for --at s, then a leak
  bigsteps    --step-mib 640 --every 17 --seconds 180       a leak in big steps
  checksum    --gib 10 --every 2 --seconds 600               holds --gib of known data; checks its checksum every --every s and on SIGUSR1
  grow-to     --gib 90 --rate-gib 0.5 --hold 10 [--start-gib 30]
                                                             takes --start-gib at once, grows to --gib at --rate-gib/s,
                                                             holds, exits 0 (3 on OOM)
"""
import argparse, json, os, signal, sys, time

import torch

MIB = 1 << 20
LEAKS = {"late-leak", "bigsteps"}


def say(event, **kw):
    print(json.dumps({"t": time.time(), "pid": os.getpid(), "event": event, **kw}), flush=True)


def alloc(mib):
    return torch.empty(int(mib * MIB), dtype=torch.uint8, device="cuda")


def mlp(width=4096, layers=4):
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU())
                                  for _ in range(layers)]).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def train_step(model, opt, batch, width=4096):
    x = torch.randn(batch, width, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def flat_training(end, model, opt, batch=256):
    while time.time() < end:
        train_step(model, opt, batch)
        time.sleep(0.05)


def load_shards(kept, gib, shards, every):
    for i in range(shards):
        kept.append(alloc(gib * 1024 / shards))
        say("grow", shard=i + 1, held_mib=sum(t.numel() for t in kept) / MIB)
        time.sleep(every)
    say("loaded", held_mib=sum(t.numel() for t in kept) / MIB)


def checksum(a, end):
    n = int(a.gib * 1024 * MIB // 4)
    g = torch.Generator(device="cuda").manual_seed(1234)
    x = torch.randint(0, 1 << 20, (n,), dtype=torch.int32, device="cuda", generator=g)
    def total():
        # In 1 GiB chunks: a sum cast to int64 at once would need twice the memory again.
        step = 1 << 28
        return sum(int(x[i:i + step].sum(dtype=torch.int64).item()) for i in range(0, n, step))
    ref = total()
    torch.cuda.empty_cache()
    say("hold", held_mib=a.gib * 1024, checksum=ref)
    # SIGUSR1 asks for a check now (a job that must stay GPU-idle until then).
    want = {"now": False}
    signal.signal(signal.SIGUSR1, lambda *_: want.__setitem__("now", True))
    i, last = 0, time.time()
    while time.time() < end:
        time.sleep(0.25)
        if not want["now"] and time.time() - last < a.every:
            continue
        want["now"], last = False, time.time()
        s = total()
        torch.cuda.empty_cache()
        i += 1
        say("check", i=i, checksum=s, same=(s == ref))


def grow_to(a):
    kept, held = [], 0.0
    if a.start_gib > 0:
        kept.append(alloc(a.start_gib * 1024))
        held = a.start_gib
        say("started", held_mib=held * 1024)
    step = a.rate_gib / 4
    while held < a.gib:
        kept.append(alloc(step * 1024))
        held += step
        say("grow", held_mib=held * 1024)
        time.sleep(0.25)
    say("reached", held_mib=held * 1024)
    time.sleep(a.hold)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pattern", choices=["shard-load", "midrun-load", "growbatch", "late-leak", "bigsteps",
                                       "checksum", "grow-to"])
    p.add_argument("--gib", type=float, default=12)
    p.add_argument("--shards", type=int, default=12)
    p.add_argument("--every", type=float, default=2.0)
    p.add_argument("--at", type=float, default=60)
    p.add_argument("--rate-mib", type=float, default=24)
    p.add_argument("--step-mib", type=float, default=640)
    p.add_argument("--baseline-gib", type=float, default=4)
    p.add_argument("--rate-gib", type=float, default=0.5)
    p.add_argument("--hold", type=float, default=10)
    p.add_argument("--start-gib", type=float, default=0)
    p.add_argument("--seconds", type=float, default=180)
    a = p.parse_args()
    torch.cuda.init()
    say("start", pattern=a.pattern, leak=a.pattern in LEAKS, args=vars(a))
    t0 = time.time()
    end = t0 + a.seconds
    kept = []
    if a.pattern == "shard-load":
        load_shards(kept, a.gib, a.shards, a.every)
        flat_training(end, *mlp())
    elif a.pattern == "midrun-load":
        model, opt = mlp()
        flat_training(t0 + a.at, model, opt)
        load_shards(kept, a.gib, a.shards, a.every)
        flat_training(end, model, opt)
    elif a.pattern == "growbatch":
        model, opt = mlp()
        batch, step = 128, 0
        while time.time() < end:
            # The batch grows by a step every 10 s for the first minute, then stays.
            batch = 128 * (1 + min(6, int((time.time() - t0) / 10)))
            train_step(model, opt, batch)
            step += 1
            if step % 20 == 0:
                say("iter", step=step, batch=batch, allocated_mib=torch.cuda.memory_allocated() / MIB,
                    reserved_mib=torch.cuda.memory_reserved() / MIB)
            time.sleep(0.05)
    elif a.pattern == "late-leak":
        kept.append(alloc(a.baseline_gib * 1024))
        model, opt = mlp(layers=2)
        flat_training(t0 + a.at, model, opt)
        say("leak_starts")
        while time.time() < end:
            kept.append(alloc(a.rate_mib))
            say("grow", held_mib=len(kept) * a.rate_mib)
            train_step(model, opt, 256)
            time.sleep(1)
    elif a.pattern == "bigsteps":
        while time.time() < end:
            kept.append(alloc(a.step_mib))
            say("grow", held_mib=len(kept) * a.step_mib)
            time.sleep(a.every)
    elif a.pattern == "checksum":
        checksum(a, end)
    elif a.pattern == "grow-to":
        grow_to(a)
    say("end")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except torch.OutOfMemoryError as e:
        say("oom", error=str(e).splitlines()[0])
        sys.exit(3)
