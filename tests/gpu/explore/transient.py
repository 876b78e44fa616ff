"""How a GEMM's kernel time moves when a throttled program goes flat out.

    python3 tests/gpu/explore/transient.py          # after 3 s at duty cycles
    python3 tests/gpu/explore/transient.py fresh    # a new process, GPU idle

For the SM limiter's sustain runs (docs/sm-limiter.md): after 3 s at a duty
cycle (0 = idle, 0.3, 0.5, 0.7), run flat out for 1.2 s and print the mean
kernel time of each 50 ms block (CUDA events around every kernel). `fresh`:
the first thing the process does after its warm-up (as bench/sm_limit's
workload.py) is 1.5 s flat out, in 25 ms blocks.
"""
import sys
import time

import torch

from gemm import gemm



def duty(u, seconds, period=0.010):
    per = max(1, round(u * period / 190e-6))
    t0 = time.time()
    nxt = t0
    while time.time() - t0 < seconds:
        for _ in range(per):
            gemm()
        torch.cuda.synchronize()
        nxt += period
        d = nxt - time.time()
        if d > 0:
            time.sleep(d)


def flat_out(seconds, block_us=50_000):
    ev = []
    t0 = time.time()
    while time.time() - t0 < seconds:
        batch = [torch.cuda.Event(enable_timing=True) for _ in range(17)]
        batch[0].record()
        for i in range(16):
            gemm()
            batch[i + 1].record()
        torch.cuda.synchronize()
        ev.append(batch)
    ks = []
    for batch in ev:
        for i in range(16):
            ks.append(batch[i].elapsed_time(batch[i + 1]) * 1000)
    # time of each kernel from the start, by summing
    out, t, block, acc = [], 0.0, [], 0.0
    for k in ks:
        t += k
        block.append(k)
        if t - acc >= block_us:
            out.append(sum(block) / len(block))
            block, acc = [], t
    return out


if len(sys.argv) > 1 and sys.argv[1] == "fresh":
    blocks = flat_out(1.5, 25_000)
    print("fresh process: 25ms-block mean kernel us: " + " ".join(f"{x:.0f}" for x in blocks))
    sys.exit(0)

for u in (0.0, 0.3, 0.5, 0.7, 0.0, 0.5):
    if u > 0:
        duty(u, 3.0)
    else:
        time.sleep(3.0)
    blocks = flat_out(1.2)
    print(f"after duty {u:.1f}: 50ms-block mean kernel us: " + " ".join(f"{x:.0f}" for x in blocks))
