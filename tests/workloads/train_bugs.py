"""Held-out workloads for the leak detector: real PyTorch training loops, some with the bugs
that leak GPU memory in practice, some healthy. They are NOT used to tune the detector; run
them on a GPU beside `vramwarden record` and score the session (see README, developer notes).

Each prints JSON lines like ../shared/workloads/gpu_workload.py: start (with "leak": bool),
iter (allocated/reserved MiB), end, oom.

  python3 train_bugs.py keep-loss   --seconds 200   # losses.append(loss): keeps each step's graph
  python3 train_bugs.py hook-cache  --seconds 200   # a forward hook stores every activation
  python3 train_bugs.py eval-phases --seconds 200   # train/eval phases of different batch: healthy
  python3 train_bugs.py varlen      --seconds 200   # sequences of random length (a cache that
                                                    # settles): healthy
  python3 train_bugs.py slow-drip   --seconds 200   # a 40 GiB model, a metrics buffer that keeps
                                                    # 1 MiB of GPU tensors per step (~30 MiB/min)
"""
import argparse, json, os, random, time

import torch

MIB = 1 << 20
LEAKS = {"keep-loss", "hook-cache", "slow-drip"}


def say(event, **kw):
    print(json.dumps({"t": time.time(), "pid": os.getpid(), "event": event, **kw}), flush=True)


def mlp(width, layers):
    return torch.nn.Sequential(
        *[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU()) for _ in range(layers)]
    ).cuda()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pattern", choices=["keep-loss", "hook-cache", "eval-phases", "varlen", "slow-drip"])
    p.add_argument("--seconds", type=float, default=200)
    p.add_argument("--step-sleep", type=float, default=0.05)
    a = p.parse_args()
    torch.cuda.init()
    random.seed(7)
    say("start", pattern=a.pattern, leak=a.pattern in LEAKS, args=vars(a))
    end = time.time() + a.seconds
    step = 0
    try:
        if a.pattern in ("keep-loss", "eval-phases", "slow-drip"):
            width = 2048
            model = mlp(width, 4)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            losses, drip = [], []
            if a.pattern == "slow-drip":
                weights = torch.empty(40 * 1024 * MIB, dtype=torch.uint8, device="cuda")  # the "model"
            while time.time() < end:
                phase_eval = a.pattern == "eval-phases" and (step // 200) % 2 == 1
                batch = 1024 if phase_eval else 256
                x = torch.randn(batch, width, device="cuda")
                if phase_eval:
                    with torch.no_grad():
                        model(x).sum().item()
                else:
                    loss = model(x).pow(2).mean()
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    if a.pattern == "keep-loss":
                        # The bug: the loss tensor (and through it the autograd graph's saved
                        # activations) is kept every step. Sleep keeps the leak ~100 MiB/min.
                        losses.append(model(x[:64]).pow(2).mean())
                    elif a.pattern == "slow-drip":
                        if step % 20 == 0:
                            drip.append(torch.empty(MIB, dtype=torch.uint8, device="cuda"))
                step += 1
                if step % 20 == 0:
                    say("iter", step=step, allocated_mib=torch.cuda.memory_allocated() / MIB,
                        reserved_mib=torch.cuda.memory_reserved() / MIB)
                time.sleep(a.step_sleep)
        elif a.pattern == "hook-cache":
            width = 1024
            model = mlp(width, 4)
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            kept = []
            model[1].register_forward_hook(lambda m, i, o: kept.append(o.detach()))
            while time.time() < end:
                x = torch.randn(128, width, device="cuda")
                loss = model(x).pow(2).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
                if step % 20 == 0:
                    say("iter", step=step, allocated_mib=torch.cuda.memory_allocated() / MIB,
                        reserved_mib=torch.cuda.memory_reserved() / MIB)
                time.sleep(0.25)
        elif a.pattern == "varlen":
            d = 1024
            layer = torch.nn.TransformerEncoderLayer(d, 16, 4 * d, batch_first=True).cuda()
            opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
            while time.time() < end:
                n = random.randint(64, 1024)
                x = torch.randn(8, n, d, device="cuda")
                loss = layer(x).pow(2).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
                if step % 20 == 0:
                    say("iter", step=step, seq=n, allocated_mib=torch.cuda.memory_allocated() / MIB,
                        reserved_mib=torch.cuda.memory_reserved() / MIB)
                time.sleep(a.step_sleep)
    except torch.OutOfMemoryError as e:
        say("oom", error=str(e).splitlines()[0])
        raise SystemExit(3)
    say("end", steps=step)


if __name__ == "__main__":
    main()
