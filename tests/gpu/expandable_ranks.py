"""PyTorch's expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
memory mapped with cuMemCreate/cuMemMap as the pool grows) in one container of
--nproc processes, process r on GPU r:

    python3 tests/gpu/expandable_ranks.py --nproc 2 [--cap-mib 0]

Each process allocates 64 MiB tensors until torch.cuda.OutOfMemoryError, then
halves the size down to 2 MiB, and reports what it got and what
torch.cuda.mem_get_info showed; all then wait while the launcher reads the
state file (`$VGPU_BIN inspect --json`) and NVML (the processes' physical
usage per GPU, from outside the library). Run under libvgpu.so with a limit
per device (CUDA_DEVICE_MEMORY_LIMIT_0/_1) and one state file; bare, pass
--cap-mib to stop there instead of filling the GPU.
Prints one line: result test=expandable ok= and per rank r: limit_mib_r=
total_mib_r= (mem_get_info) got_mib_r= (tensors) ctx_mib_r= (total - free
before any tensor) error_r= charged_mib_r= (state file, device r)
physical_mib_r= (NVML). Under a limit, ok means for every rank: total = limit,
got <= limit, got >= limit - context - 32 MiB, the error is OutOfMemoryError,
and charged and physical <= limit. Exits 1 when not ok.
"""
import argparse
import multiprocessing as mp
import os
import sys

import mg_common as mg


def rank_main(rank, cap_mib, results, done):
    held = []  # the tensors, alive until the launcher has looked
    try:
        results.put((rank, os.getpid(), fill(rank, cap_mib, held)))
    except BaseException as e:
        results.put((rank, os.getpid(), {"fail": mg.short_error(e)}))
    done.wait(120)


def fill(rank, cap_mib, held):
    import torch
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    free0, total = torch.cuda.mem_get_info(dev)
    got, size, error = 0, 64 * mg.MiB, None
    while size >= 2 * mg.MiB and (not cap_mib or got < cap_mib * mg.MiB):
        try:
            held.append(torch.empty(size, dtype=torch.uint8, device=dev))
            got += size
        except torch.cuda.OutOfMemoryError as e:
            error = type(e).__name__
            size //= 2
    torch.cuda.synchronize()
    free1, _ = torch.cuda.mem_get_info(dev)
    return {"total_mib": total // mg.MiB, "ctx_mib": (total - free0) // mg.MiB,
            "got_mib": got // mg.MiB, "free_full_mib": free1 // mg.MiB, "error": error}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, required=True)
    ap.add_argument("--cap-mib", type=int, default=0)
    args = ap.parse_args()
    n = args.nproc
    ctx = mp.get_context("spawn")
    results, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=rank_main, args=(r, args.cap_mib, results, done)) for r in range(n)]
    for p in procs:
        p.start()
    got, pids = {}, set()
    try:
        while len(got) < n:
            r, pid, res = results.get(timeout=180)
            got[r] = res
            pids.add(pid)
    except Exception:  # queue.Empty: a rank died or hangs
        pass
    state = mg.state_file()
    physical = mg.process_memory(pids)
    done.set()
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    kv, ok = {}, len(got) == n
    for r in range(n):
        res = got.get(r, {"fail": "no_result"})
        if "fail" in res:
            kv[f"fail_{r}"] = res["fail"]
            ok = False
            continue
        limit = mg.device_limit(r) if mg.under_library() else None
        charged = None
        if state:
            charged = sum(d["used_bytes"] for d in state["devices"] if d["index"] == r)
        phys = physical.get(r)
        kv.update({f"limit_mib_{r}": limit and limit // mg.MiB, f"total_mib_{r}": res["total_mib"],
                   f"got_mib_{r}": res["got_mib"], f"ctx_mib_{r}": res["ctx_mib"],
                   f"error_{r}": res["error"], f"charged_mib_{r}": charged and charged // mg.MiB,
                   f"physical_mib_{r}": phys and phys // mg.MiB})
        if limit:
            L = limit // mg.MiB
            ok &= (res["total_mib"] == L and res["got_mib"] <= L and
                   res["got_mib"] >= L - res["ctx_mib"] - 32 and res["error"] == "OutOfMemoryError" and
                   charged is not None and charged <= limit and (phys is None or phys <= limit))
        else:
            ok &= res["got_mib"] >= args.cap_mib
    mg.emit(test="expandable", nproc=n, ok=ok,
            alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), **kv)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
