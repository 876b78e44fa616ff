"""PyTorch workloads for the SM-limit benchmark.

    python3 workload.py gemm|graph SECONDS

gemm: fp16 matmul 4096x4096, iterations; graph: a captured CUDA graph of 8
such matmuls, replayed (iterations = matmuls). Prints one JSON line with the
iterations finished in each whole second, the overall rate, and when its first
second began (t0_ns, CLOCK_MONOTONIC, for lining it up with switch-phases).
"""
import json
import sys
import time

import torch

mode, seconds = sys.argv[1], float(sys.argv[2])
n = 4096
a = torch.randn(n, n, device="cuda", dtype=torch.float16)
b = torch.randn_like(a)
c = torch.empty_like(a)
for _ in range(20):
    torch.matmul(a, b, out=c)
torch.cuda.synchronize()

if mode == "gemm":
    per_step = 16
    def step():
        for _ in range(per_step):
            torch.matmul(a, b, out=c)
elif mode == "graph":
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            torch.matmul(a, b, out=c)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(8):
            torch.matmul(a, b, out=c)
    per_step = 8 * 2
    def step():
        g.replay()
        g.replay()
else:
    sys.exit(f"unknown mode {mode}")

for _ in range(3):
    step()
torch.cuda.synchronize()
per_second = [0] * (int(seconds) + 1)
t0 = time.perf_counter()
t0_ns = time.monotonic_ns()
elapsed = 0.0
total = 0
while elapsed < seconds:
    step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    total += per_step
    if int(elapsed) < len(per_second):
        per_second[int(elapsed)] += per_step
print(json.dumps({"mode": mode, "per_second": per_second[:-1], "rate": total / elapsed,
                  "t0_ns": t0_ns}))
