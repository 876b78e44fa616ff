"""torch.cuda.graph capture of a step that allocates, then replays, under
either allocator backend (PYTORCH_CUDA_ALLOC_CONF unset, or
backend:cudaMallocAsync, whose frees during capture are stream-ordered).

    python3 tests/gpu/graph_capture.py [--alloc-mib 512] [--replays 20] [--expect-oom]

The step tiles a 1024-float input into an --alloc-mib temporary, sums it back
to 1024 floats and frees the temporary, all inside the capture; replays with
new inputs must give input x rows exactly (small integers: float32 sums are
exact). Warm-up runs the step eagerly on a side stream first, as PyTorch's
docs ask, at a small size with --expect-oom so that the capture itself is what
goes past the limit.
Prints one line: result test=graph backend= ok= replay_ok= error= oom=
(class: a torch.OutOfMemoryError in the exception's chain; message: only a
message saying "out of memory"; none) stage= (where it ended: warmup,
capture, replay or done; with cudaMallocAsync the graph's memory is allocated
when it is launched) usable_after= (a small computation works after the
failure) physical_mib= (NVML: what the driver holds for the process at the
end) within_limit= ...
With --expect-oom, ok means a clean out-of-memory error and a usable process;
without, a correct replay; under a limit, both also that NVML's figure for the
process is within it. Exits 1 when not ok.
"""
import argparse
import os
import sys

import mg_common as mg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alloc-mib", type=int, default=512)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--expect-oom", action="store_true")
    args = ap.parse_args()
    import torch
    dev = torch.device("cuda", 0)
    backend = "async" if "cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") else "native"
    limit = mg.device_limit(0) if mg.under_library() else None
    cols = 1024
    rows = args.alloc_mib * mg.MiB // 4 // cols
    x = torch.zeros(cols, device=dev)
    out = torch.zeros(cols, device=dev)

    def step(nrows):
        big = x.repeat(nrows)  # nrows x 1024 floats, allocated here
        out.copy_(big.view(nrows, cols).sum(0))
        del big  # freed inside the capture

    info = dict(test="graph", backend=backend, limit_mib=limit and limit // mg.MiB,
                alloc_mib=args.alloc_mib)
    error, oom, replay_ok, stage = None, "none", False, "warmup"
    try:
        x.copy_(torch.arange(cols, device=dev) % 8)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step(16 if args.expect_oom else rows)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        stage = "capture"
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step(rows)
        torch.cuda.synchronize()
        stage = "replay"
        good = True
        for i in range(args.replays):
            vals = ((torch.arange(cols, device=dev) * (i + 3)) % 5 + 1).float()
            x.copy_(vals)
            g.replay()
            torch.cuda.synchronize()
            good &= bool(torch.equal(out, vals * rows))
        replay_ok, stage = good, "done"
        info["reserved_mib"] = torch.cuda.memory_reserved() // mg.MiB  # the graph kept alive
    except Exception as e:
        error, oom = mg.short_error(e), mg.oom_kind(e) or "none"
        print(f"graph_capture: {type(e).__name__}: {e}", file=sys.stderr)
    # What the driver holds for this process (NVML, outside the library): a
    # limit holds physically too, also after a refusal.
    physical = mg.process_memory({os.getpid()}).get(0)
    info["physical_mib"] = physical and physical // mg.MiB
    info["within_limit"] = limit is None or (physical is not None and physical <= limit)
    try:  # whatever happened, the process must still compute
        torch.cuda.synchronize()
        usable = torch.ones(cols, device=dev).sum().item() == cols
    except Exception as e:
        usable = False
        print(f"graph_capture: not usable after: {type(e).__name__}: {e}", file=sys.stderr)
    ok = ((oom != "none" and usable) if args.expect_oom else (replay_ok and error is None and usable)) \
        and info["within_limit"]
    mg.emit(**info, ok=ok, replay_ok=replay_ok, stage=stage, error=error, oom=oom, usable_after=usable)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
