"""CUDA IPC between the processes of one container: a 2 GiB CUDA tensor passed
to a worker through torch.multiprocessing (the worker maps the parent's memory
with cudaIpcOpenMemHandle).

    python3 tests/gpu/ipc_workers.py [--mib 2048]

Run bare or under LD_PRELOAD=libvgpu.so with a limit (e.g. 4g) and one state
file for both processes. The worker checks every value (an int64 sum of the
arange the parent wrote, and a strided sample), reads the free memory the
library reports (torch.cuda.mem_get_info), allocates 512 MiB and then tries
--mib more. Under a limit L the imported tensor must not be charged a second
time: the worker sees about L - mib - two contexts free (4096 - 2048 - 2 x 518
= 1,012 MiB on an H200; were it charged twice, nothing would be left), its
512 MiB fits and the further --mib does not (OutOfMemoryError).
Prints one line: result test=ipc ok= values_ok= ctx_mib= (the parent's context
as the limit shows it: total - free before any tensor) worker_free_mib=
expected_free_mib= alloc512= allocmore= parent_free_after_mib= ...
Exits 1 if the values were wrong or the worker failed.
"""
import argparse
import sys

import mg_common as mg


def worker(tensors, answers, mib):
    try:
        answers.put(check(tensors.get(), mib))
    except BaseException as e:
        answers.put({"error": mg.short_error(e)})


def check(t, mib):
    import torch
    n, step = t.numel(), 32 << 20
    # Summed in slices: a whole int64 sum would first copy the tensor to 64 bits.
    total = sum(t[i:i + step].sum(dtype=torch.int64).item() for i in range(0, n, step))
    res = {"values_ok": total == n * (n - 1) // 2 and
           bool((t[::1 << 20].cpu() == torch.arange(0, n, 1 << 20, dtype=torch.int32)).all())}
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the slices' temporaries back to the driver
    free, total = torch.cuda.mem_get_info()
    res.update(worker_free_mib=free // mg.MiB, worker_total_mib=total // mg.MiB)
    for key, size in (("alloc512", 512), ("allocmore", mib)):
        try:
            a = torch.empty(size * mg.MiB, dtype=torch.uint8, device=t.device)
            torch.cuda.synchronize()
            res[key] = "ok"
            del a
        except torch.cuda.OutOfMemoryError:
            res[key] = "oom"
        torch.cuda.empty_cache()
    del t
    torch.cuda.synchronize()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=2048)
    args = ap.parse_args()
    import torch
    import torch.multiprocessing as tmp
    dev = torch.device("cuda", 0)
    free0, total = torch.cuda.mem_get_info(dev)  # creates the context
    ctx_mib = (total - free0) // mg.MiB
    # arange in slices: a whole one is computed in 64 bits first (twice the
    # tensor's size); the slices' temporaries go back to the driver after.
    n = args.mib * mg.MiB // 4
    t = torch.empty(n, dtype=torch.int32, device=dev)
    step = 32 << 20
    for i in range(0, n, step):
        t[i:i + step] = torch.arange(i, min(n, i + step), dtype=torch.int32, device=dev)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free1, _ = torch.cuda.mem_get_info(dev)
    spawn = tmp.get_context("spawn")
    tensors, answers = spawn.Queue(), spawn.Queue()
    p = spawn.Process(target=worker, args=(tensors, answers, args.mib))
    p.start()
    tensors.put(t)
    try:
        res = answers.get(timeout=120)
    except Exception as e:  # queue.Empty: the worker died or hangs
        res = {"error": f"no_answer:{mg.short_error(e)}"}
    p.join(timeout=30)
    if p.is_alive():
        p.kill()
    free2, _ = torch.cuda.mem_get_info(dev)
    limit = mg.device_limit(0) if mg.under_library() else None
    if "error" in res:
        mg.emit(test="ipc", ok=False, limit_mib=limit and limit // mg.MiB, error=res["error"],
                worker_exit=p.exitcode)
        return 1
    # Expected under a limit: the limit less the tensor, less the parent's
    # context and its small allocations (free1 counts both) and the worker's
    # context, taken to be the parent's size.
    expected = (free1 // mg.MiB - ctx_mib) if limit else None
    mg.emit(test="ipc", ok=res["values_ok"], limit_mib=limit and limit // mg.MiB, mib=args.mib,
            total_mib=total // mg.MiB, ctx_mib=ctx_mib, parent_free_mib=free1 // mg.MiB,
            expected_free_mib=expected, parent_free_after_mib=free2 // mg.MiB,
            worker_exit=p.exitcode, **res)
    return 0 if res["values_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
