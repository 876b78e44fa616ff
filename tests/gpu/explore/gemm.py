"""The GEMM the explorations time: fp16 4096x4096 matmul into a fixed output,
as bench/sm_limit/workload.py runs it, warmed up.

    from gemm import gemm
    gemm()          # one matmul, queued on the current stream
"""
import torch

N = 4096
_a = torch.randn(N, N, device="cuda", dtype=torch.float16)
_b = torch.randn_like(_a)
_c = torch.empty_like(_a)


def gemm():
    torch.matmul(_a, _b, out=_c)


for _ in range(50):
    gemm()
torch.cuda.synchronize()
