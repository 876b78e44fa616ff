"""Small PyTorch element-wise ops per second: best of many short batches."""
import time

import torch

x = torch.zeros(1024, device="cuda")
for _ in range(1000):
    x.add_(1)
torch.cuda.synchronize()
best = 0.0
for _ in range(30):
    t0 = time.perf_counter()
    for _ in range(2000):
        x.add_(1)
    torch.cuda.synchronize()
    best = max(best, 2000 / (time.perf_counter() - t0))
print(f"workload=torch_add ops_per_s={best:.1f} batches=30")
