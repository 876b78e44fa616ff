"""Trains a torchvision ResNet-50 (random weights, random data) and reports steps/s.

  train.py --calibrate --target-gib 6      prints batch=<n>: the largest batch
                                           whose peak allocation stays under 6 GiB
  train.py --batch N --steps S [--state-file F]
      prints result=ok steps_per_s=... peak_bytes=... spilled_bytes=...
      or, on torch.OutOfMemoryError, result=oom (exit 3)

spilled_bytes is what libvgpu.so publishes for this process in its state-file
slot (docs/state-file.md: slot i at 1856 + 1960*i, pid at +0, device d's
spilled bytes at +48 + 64*d).
"""
import argparse
import os
import struct
import sys
import time

import torch
import torchvision

SLOTS_AT, SLOT_SIZE, MAX_SLOTS = 1856, 1960, 1024


def spilled_bytes(path: str, device: int = 0) -> int:
    with open(path, "rb") as f:
        data = f.read()
    for i in range(MAX_SLOTS):
        base = SLOTS_AT + SLOT_SIZE * i
        (pid,) = struct.unpack_from("<i", data, base)
        if pid == os.getpid():
            (spilled,) = struct.unpack_from("<Q", data, base + 48 + 64 * device)
            return spilled
    return -1


def step_fn(batch: int):
    model = torchvision.models.resnet50(weights=None).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def peak_for(batch: int) -> int:
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    step = step_fn(batch)
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del step
    torch.cuda.empty_cache()
    return peak


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--calibrate", action="store_true")
    p.add_argument("--target-gib", type=float, default=6.0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--state-file", default="")
    a = p.parse_args()

    if a.calibrate:
        best = 0
        for batch in (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128):
            peak = peak_for(batch)
            print(f"calibrate batch={batch} peak_bytes={peak}", file=sys.stderr)
            if peak > a.target_gib * (1 << 30):
                break
            best = batch
        print(f"batch={best}")
        return 0 if best else 1

    try:
        step = step_fn(a.batch)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
    except torch.OutOfMemoryError as e:
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"result=oom message={first!r}", flush=True)
        return 3
    spilled = spilled_bytes(a.state_file) if a.state_file else -1
    print(
        f"result=ok steps_per_s={a.steps / elapsed:.3f} "
        f"peak_bytes={torch.cuda.max_memory_allocated()} spilled_bytes={spilled}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
