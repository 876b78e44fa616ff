"""What an MPS client sees of the GPU's memory and how far it can allocate.

    memcheck.py    prints mem_get_info (free, total, MiB) and the MiB it could
                   allocate in 256 MiB tensors before torch.OutOfMemoryError
"""
import torch

free, total = torch.cuda.mem_get_info()
held, got = [], 0
try:
    while got < 200 * 1024:
        held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
        got += 256
    outcome = "no refusal"
except torch.OutOfMemoryError:
    outcome = "OutOfMemoryError"
print(f"mem_get_info free={free >> 20} total={total >> 20} MiB; allocated {got} MiB, then {outcome}",
      flush=True)
