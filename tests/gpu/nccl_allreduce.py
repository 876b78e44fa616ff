"""NCCL all-reduce across GPUs, one process per GPU, as one container's ranks:
correctness, bus bandwidth and each GPU's NVML utilisation over the loop.

    python3 tests/gpu/nccl_allreduce.py --nproc 2 [--mib 256] [--seconds 5]
        [--duty PCT --chunk-seconds S]

Run bare or under LD_PRELOAD=libvgpu.so (every rank inherits the environment,
so all share the one state file, as the processes of one pod do). Each rank
checks one all-reduce of (rank + 1) gives n(n+1)/2 everywhere, warms up, then
all-reduces a --mib float32 tensor in place for --seconds; rank 0 decides when
to stop (every ~0.1 s of work) so that every rank runs the same collectives.
--duty P makes the ranks idle together after each chunk for what keeps their
work at P % of the wall time: the bandwidth a perfect pacer in phase would
give at a share of P (run it bare), the bound that the share targets assume.
Prints one line: result test=allreduce ok= algbw= busbw= (GB/s; busbw = algbw
x 2(n-1)/n, nccl-tests' convention) util0= util1= (NVML percent over the
loop, its first 0.5 s left out) total_mib= (what torch.cuda.mem_get_info says
the GPU holds, per rank, comma-separated) nccl= ...
Exits 1 if a rank failed or a result was wrong.
"""
import argparse
import multiprocessing as mp
import os
import queue
import sys
import tempfile
import time

import mg_common as mg


def rank_main(rank, n, port, mib, seconds, duty, chunk_s, results):
    try:
        results.put((rank, run_rank(rank, n, port, mib, seconds, duty, chunk_s)))
    except BaseException as e:  # the launcher reports it; a hang is the shell's timeout
        results.put((rank, {"error": mg.short_error(e)}))


def run_rank(rank, n, port, mib, seconds, duty, chunk_s):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    numel = mib * mg.MiB // 4
    y = torch.full((numel,), float(rank + 1), device=dev)
    dist.all_reduce(y)
    correct = bool((y == n * (n + 1) / 2).all().item())
    del y
    x = torch.zeros(numel, device=dev)
    # [stop, next chunk, idle after it]: rank 0 decides for all, so that every
    # rank issues the same collectives; a chunk is sized to --chunk-seconds of
    # work at the speed just measured (a paced rank's first ones run within
    # its burst).
    ctl = torch.tensor([0.0, 5.0, 0.0], device=dev)
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()

    dist.barrier()
    torch.cuda.synchronize()
    t0_unix, t0 = time.time(), time.perf_counter()
    iters, chunk = 0, 5
    while True:
        t_work = time.perf_counter()
        for _ in range(chunk):
            dist.all_reduce(x)
        iters += chunk
        if rank == 0:
            torch.cuda.synchronize()
            now = time.perf_counter()
            work = now - t_work
            per_iter = work / chunk
            left = (seconds - (now - t0)) * duty / 100
            ctl[0] = 1.0 if left <= 0 else 0.0
            ctl[1] = float(max(1, min(2 * chunk, int(chunk_s / per_iter),
                                      int(max(0.0, left) / per_iter) + 1)))
            # --duty: every rank idles together for what keeps the work at
            # duty % of the wall time, as a perfect pacer in phase would.
            ctl[2] = work * (100 / duty - 1) if duty < 100 else 0.0
        dist.broadcast(ctl, 0)
        stop, chunk, nap = ctl.tolist()
        chunk = int(chunk)
        if stop:
            break
        if nap > 0:
            time.sleep(nap)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    t1_unix = time.time()
    still_zero = bool((x == 0).all().item())
    free, total = torch.cuda.mem_get_info()
    nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    dist.destroy_process_group()
    algbw = iters * numel * 4 / elapsed / 1e9
    return {"correct": correct and still_zero, "iters": iters, "elapsed": elapsed,
            "algbw": algbw, "busbw": algbw * 2 * (n - 1) / n, "t0": t0_unix, "t1": t1_unix,
            "total_mib": total // mg.MiB, "free_mib": free // mg.MiB, "nccl": nccl}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, required=True)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--duty", type=float, default=100.0,
                    help="percent of wall time the ranks all-reduce, idling together between "
                         "chunks: what a perfect pacer would give at that share (no libvgpu.so)")
    ap.add_argument("--chunk-seconds", type=float, default=0.1)
    args = ap.parse_args()
    n = args.nproc
    work = tempfile.mkdtemp()
    sampler = mg.NvmlSampler(range(n), os.path.join(work, "nvml.txt"))
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = mg.free_port()
    procs = [ctx.Process(target=rank_main, args=(r, n, port, args.mib, args.seconds, args.duty,
                                             args.chunk_seconds, results))
             for r in range(n)]
    for p in procs:
        p.start()
    got = {}
    deadline = time.time() + args.timeout
    try:
        while len(got) < n:
            r, res = results.get(timeout=max(1.0, deadline - time.time()))
            got[r] = res
    except queue.Empty:
        pass
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    sampler.stop()
    errors = [f"rank{r}:{got[r]['error']}" for r in sorted(got) if "error" in got[r]]
    missing = [r for r in range(n) if r not in got]
    if errors or missing:
        mg.emit(test="allreduce", nproc=n, ok=False,
                error=";".join(errors) or f"no_result_from_ranks_{missing}",
                exitcodes=",".join(str(p.exitcode) for p in procs))
        return 1
    r0 = got[0]
    utils = {f"util{g}": sampler.mean(g, r0["t0"] + 0.5, r0["t1"]) for g in range(n)}
    ok = all(got[r]["correct"] for r in got)
    mg.emit(test="allreduce", nproc=n, ok=ok, mib=args.mib, iters=r0["iters"],
            seconds=r0["elapsed"], algbw=r0["algbw"], busbw=r0["busbw"],
            busbw_min=min(got[r]["busbw"] for r in got), **utils,
            total_mib=",".join(str(got[r]["total_mib"]) for r in sorted(got)),
            free_mib=",".join(str(got[r]["free_mib"]) for r in sorted(got)),
            nccl=r0["nccl"], cumem=os.environ.get("NCCL_CUMEM_ENABLE", "unset"),
            duty=args.duty, chunk_s=args.chunk_seconds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
