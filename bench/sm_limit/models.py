"""Real PyTorch workloads for the SM-share suite, judged by what users see.

    python3 models.py WORKLOAD [--seconds 10] [--profile 4] [--warmup 3]

WORKLOAD is one of
  gemm           fp16 4096x4096 matmuls, 16 per step (compute-bound, busy ~95 %)
  graph          a CUDA graph of 8 such matmuls, replayed twice per step
  resnet_train   torchvision ResNet-50 training step, batch 32 (RESNET_BATCH),
                 random weights
  gpt2_train     transformers GPT-2 small training step, batch 8 x 128 tokens
  gpt2_generate  GPT-2 small `generate`, batch 4, 32 new tokens, requests back
                 to back (a latency-sensitive inference service)

After --warmup seconds it measures --seconds: steps (or requests) per whole
second, the overall rate, and for generate each request's latency. Then, with
--profile > 0, it runs that many more seconds under torch.profiler and reports
the GPU's own measure of its work: the union of its kernel intervals as CUPTI
timed them (torch.profiler's trace), as a fraction of the profiled wall time
("busy"). Prints one JSON
line; t0/t1 (Unix seconds) bound the measured phase, p0/p1 the profiled one,
so NVML samples can be lined up with them.

With --switch-ab CONTROL (a control file of libvgpu.so's, which must run under
GPU_CORE_UTILIZATION_POLICY=default with VGPU_CONTROL_FILE=CONTROL), it
measures instead what pacing alone does to the program, in one process:
--rounds rounds of three --phase-second phases in a random order each, the
share enforced ("on", the file's utilization_switch = 1) and not ("off",
"off2", 0; launches are charged the same in all three). Reports each
condition's rate and p50, per round on/off (the A/B) and off2/off (the A/A),
and each phase's Unix start and end (to line NVML samples up with).

With --serve it warms up, prints "ready" and then runs a phase per line read
on stdin ("phase SECONDS"), answering each with a JSON line (requests or
steps, elapsed seconds, latencies in ms, Unix start and end), until "quit": bench/sm_limit/turns.py
takes turns between such processes.
"""
import argparse
import json
import os
import random
import statistics
import struct
import tempfile
import time

import torch


def build(workload):
    """Returns step(): one unit of work (a step or a request), queued or run."""
    dev = "cuda"
    torch.manual_seed(0)
    if workload in ("gemm", "graph"):
        n = 4096
        a = torch.randn(n, n, device=dev, dtype=torch.float16)
        b = torch.randn_like(a)
        c = torch.empty_like(a)
        if workload == "gemm":
            def step():
                for _ in range(16):
                    torch.matmul(a, b, out=c)
            return step
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

        def step():
            g.replay()
            g.replay()
        return step
    if workload == "resnet_train":
        import torchvision
        model = torchvision.models.resnet50().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        batch = int(os.environ.get("RESNET_BATCH", "32"))
        x = torch.randn(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
        return step
    if workload in ("gpt2_train", "gpt2_generate"):
        import transformers
        transformers.logging.set_verbosity_error()
        cfg = transformers.GPT2Config()
        model = transformers.GPT2LMHeadModel(cfg).to(dev)
        if workload == "gpt2_train":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            ids = torch.randint(0, cfg.vocab_size, (8, 128), device=dev)

            def step():
                opt.zero_grad(set_to_none=True)
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
            return step
        model.eval()
        ids = torch.randint(0, cfg.vocab_size, (4, 16), device=dev)
        mask = torch.ones_like(ids)

        def step():
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=32,
                                     min_new_tokens=32, do_sample=False, pad_token_id=0)
            # A service answers once the tokens are on the host.
            out.cpu()
        return step
    raise SystemExit(f"unknown workload {workload}")


def busy_fraction(prof, wall_s):
    """Union of the kernel intervals CUPTI recorded, over the profiled wall time."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in trace["traceEvents"]
                     if e.get("ph") == "X" and e.get("cat") == "kernel")
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in kernels:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy / 1e6 / wall_s, len(kernels)


SWITCH_OFFSET = 16  # i32 utilization_switch in the 64-byte control file


def phase(step, phase_s):
    """Steps (each waited for) until phase_s seconds have passed: their
    latencies in ms, the elapsed seconds, and the Unix start and end."""
    t0 = time.time()
    lat, start = [], time.perf_counter()
    while True:
        s = time.perf_counter()
        step()
        torch.cuda.synchronize()
        now = time.perf_counter()
        lat.append((now - s) * 1e3)
        if now - start >= phase_s:
            return lat, now - start, t0, time.time()


def switch_ab(step, control, rounds, phase_s):
    """Interleaved phases of one process with the share enforced or not."""
    fd = os.open(control, os.O_WRONLY)
    conds = ("on", "off", "off2")
    lat = {c: [] for c in conds}
    rate = {c: [] for c in conds}
    windows = {c: [] for c in conds}
    order = []
    for _ in range(rounds):
        seq = list(conds)
        random.shuffle(seq)
        order.append(seq)
        for c in seq:
            os.pwrite(fd, struct.pack("<i", 1 if c == "on" else 0), SWITCH_OFFSET)
            took, elapsed, t0, t1 = phase(step, phase_s)
            lat[c].extend(took)
            rate[c].append(len(took) / elapsed)
            windows[c].append((t0, t1))
    os.pwrite(fd, struct.pack("<i", 1), SWITCH_OFFSET)
    os.close(fd)
    ab = [on / off for on, off in zip(rate["on"], rate["off"])]
    aa = [o2 / off for o2, off in zip(rate["off2"], rate["off"])]
    return {"rounds": rounds, "phase_s": phase_s, "order": order, "windows": windows,
            "rate": {c: statistics.median(rate[c]) for c in conds},
            "p50_ms": {c: statistics.median(lat[c]) for c in conds},
            "ab": ab, "aa": aa,
            "ab_median": statistics.median(ab), "aa_median": statistics.median(aa),
            "p50_ratio": statistics.median(lat["on"]) / statistics.median(lat["off"]),
            "p50_aa": statistics.median(lat["off2"]) / statistics.median(lat["off"])}


def serve(step):
    """Phases on request, so several processes can take turns on the GPU."""
    import sys
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            return
        lat, elapsed, t0, t1 = phase(step, float(words[1]))
        print(json.dumps({"n": len(lat), "elapsed": elapsed, "lat": lat, "t0": t0, "t1": t1}),
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--profile", type=float, default=0)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--switch-ab", metavar="CONTROL")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--phase", type=float, default=2.0)
    ap.add_argument("--serve", action="store_true")
    args = ap.parse_args()
    step = build(args.workload)
    sync = torch.cuda.synchronize
    end = time.perf_counter() + args.warmup
    while time.perf_counter() < end:
        step()
    sync()
    if args.serve:
        serve(step)
        return
    if args.switch_ab:
        out = {"workload": args.workload}
        out.update(switch_ab(step, args.switch_ab, args.rounds, args.phase))
        print(json.dumps(out), flush=True)
        return

    per_second = [0] * (int(args.seconds) + 1)
    lat = []
    t0 = time.time()
    start = time.perf_counter()
    elapsed, total = 0.0, 0
    while elapsed < args.seconds:
        s = time.perf_counter()
        step()
        sync()
        now = time.perf_counter()
        lat.append((now - s) * 1e3)
        elapsed = now - start
        total += 1
        if int(elapsed) < len(per_second):
            per_second[int(elapsed)] += 1
    t1 = time.time()
    out = {"workload": args.workload, "rate": total / elapsed, "per_second": per_second[:-1],
           "t0": t0, "t1": t1, "p50_ms": statistics.median(lat),
           "p99_ms": sorted(lat)[max(0, int(len(lat) * 0.99) - 1)]}
    if args.profile > 0:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            p0 = time.time()
            start = time.perf_counter()
            end = start + args.profile
            while time.perf_counter() < end:
                step()
            sync()
            wall = time.perf_counter() - start
            p1 = time.time()
        busy, nk = busy_fraction(prof, wall)
        if os.environ.get("TRACE_OUT"):  # the whole trace, for a closer look
            prof.export_chrome_trace(os.environ["TRACE_OUT"])
        out.update({"busy": 100.0 * busy, "kernels": nk, "profiled_s": wall, "p0": p0, "p1": p1})
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
