"""Processes of one program taking turns on the GPU, for an A/B with an A/A.

    python3 turns.py WORKLOAD --lib libvgpu.so --share 60 [--rounds 10] [--phase 2]
                     [--copies 1] [--logs FILE] [--work DIR]

Starts processes of bench/sm_limit/models.py WORKLOAD --serve: "bare" and
"bare2" without libvgpu.so, "limited" with it at --share under the `force`
policy (with --copies 2, also "bare3" and "limited2"). Once all are warm, each
round runs one --phase-second phase of each, in a random order, while the
others wait on their stdin (idle, not touching the GPU). Drifts of the host
and the GPU's clocks (seconds to minutes) fall on all alike; what a process
carries for its whole life (its CPU, its memory layout) shows in bare2 against
bare.

Prints one JSON line: per condition the median of its phases' rates and its
requests' p50; per round the limited processes' mean rate over the mean of
the bare ones other than bare2 (the A/B), and bare2 over bare (the A/A); and
the p50 of all limited requests over that of those bare ones; and each
phase's Unix start and end. The libraries' own lines go to --logs.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--share", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--phase", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--copies", type=int, default=1, choices=(1, 2))
    ap.add_argument("--logs", default=os.devnull)
    ap.add_argument("--work", default=tempfile.gettempdir())
    args = ap.parse_args()

    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models.py")
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    def limited(name):
        return dict(base, LD_PRELOAD=args.lib, CUDA_DEVICE_SM_LIMIT=str(args.share),
                    GPU_CORE_UTILIZATION_POLICY="force", LIBCUDA_LOG_LEVEL="3",
                    CUDA_DEVICE_MEMORY_SHARED_CACHE=os.path.join(
                        args.work, f"turns-{args.workload}-{name}-{os.getpid()}.cache"))

    envs = {"bare": dict(base), "bare2": dict(base), "limited": limited("limited")}
    if args.copies == 2:
        envs.update({"bare3": dict(base), "limited2": limited("limited2")})
    bare = [n for n in envs if n.startswith("bare") and n != "bare2"]
    lims = [n for n in envs if n.startswith("limited")]
    errs, procs = {}, {}
    for name, env in envs.items():
        errs[name] = tempfile.TemporaryFile(mode="w+")
        procs[name] = subprocess.Popen(
            [sys.executable, models, args.workload, "--serve", "--warmup", str(args.warmup)],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errs[name], text=True)
    try:
        for name, p in procs.items():
            if p.stdout.readline().strip() != "ready":
                errs[name].seek(0)
                sys.exit(f"{name} did not start:\n{errs[name].read()[-2000:]}")
        rates = {n: [] for n in procs}
        lat = {n: [] for n in procs}
        windows = {n: [] for n in procs}
        order = []
        for _ in range(args.rounds):
            seq = list(procs)
            random.shuffle(seq)
            order.append(seq)
            for name in seq:
                p = procs[name]
                p.stdin.write(f"phase {args.phase}\n")
                p.stdin.flush()
                r = json.loads(p.stdout.readline())
                rates[name].append(r["n"] / r["elapsed"])
                lat[name].extend(r["lat"])
                windows[name].append((r["t0"], r["t1"]))
    finally:
        for p in procs.values():
            try:
                p.stdin.write("quit\n")
                p.stdin.close()
            except OSError:
                pass
        for p in procs.values():
            p.wait(timeout=60)
    with open(args.logs, "a") as f:
        for name in procs:
            errs[name].seek(0)
            f.write(f"## turns {args.workload} {name}\n")
            f.writelines(l for l in errs[name] if "SM share" in l or "ERROR" in l or "WARN" in l)
    def mean_rate(names, i):
        return statistics.mean(rates[n][i] for n in names)

    ab = [mean_rate(lims, i) / mean_rate(bare, i) for i in range(args.rounds)]
    aa = [b2 / b for b2, b in zip(rates["bare2"], rates["bare"])]
    p50 = {n: statistics.median(v) for n, v in lat.items()}
    p50_lim = statistics.median(x for n in lims for x in lat[n])
    p50_bare = statistics.median(x for n in bare for x in lat[n])
    print(json.dumps({"workload": args.workload, "share": args.share, "rounds": args.rounds,
                      "phase_s": args.phase, "order": order, "windows": windows,
                      "rate": {n: statistics.median(v) for n, v in rates.items()},
                      "p50_ms": p50, "ab": ab, "aa": aa,
                      "ab_median": statistics.median(ab), "aa_median": statistics.median(aa),
                      "copies": args.copies, "p50_ratio": p50_lim / p50_bare,
                      "p50_aa": p50["bare2"] / p50["bare"]}), flush=True)


if __name__ == "__main__":
    main()
