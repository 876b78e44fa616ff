"""Summary of bench/sm_limit/run.sh: achieved share per run against the limit.

    python3 summarize.py sm-limit-raw.jsonl sm-limit-overhead-raw.tsv [sm-limit-clocks.tsv]

(The overhead file's format is hook_bench launch_ab's since 2026-11-22; earlier
results in bench/results have the cross-process format and their summaries.)
"""
import collections
import json
import statistics
import sys

from targets import print_medians, verdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
clocks = []
if len(sys.argv) > 3:
    clocks = [tuple(float(x) for x in l.split("\t")) for l in open(sys.argv[3]) if l.strip()]


def gpu_during(r):
    """Mean SM clock (MHz) and power (W) over the run, its first second left out."""
    if "t0" not in r:
        return ""
    s = [c for c in clocks if r["t0"] + 1 <= c[0] <= r["t1"]]
    if not s:
        return ""
    util = f" util {statistics.mean(c[4] for c in s):3.0f}%" if len(s[0]) > 4 else ""
    return (f"{statistics.mean(c[1] for c in s):6.0f} MHz {statistics.mean(c[2] for c in s):5.0f} W"
            f" capped {100 * statistics.mean(c[3] for c in s):3.0f}%{util}")


def baseline(workload, tags):
    rates = [r["result"]["rate"] for r in rows
             if r["workload"] == workload and r["limit"] == 0 and r["tag"] in tags]
    return statistics.mean(rates) if rates else float("nan"), rates


print("# Achieved share = rate under the limit / rate unlimited without libvgpu.so")
print("# (mean of the bare runs just before and after). Per-second: each whole second")
print("# after the first, against the same unlimited rate. Targets: total within")
print("# +-3 points of the limit, every second within +-5 points.")
print(f"{'workload':12} {'limit':>5} {'achieved':>9} {'error':>7} {'per-second min..max':>22}  "
      f"{'verdict':12} GPU during the run (SM clock, power, time power-capped, NVML utilisation)")
failures = 0
by_round = collections.defaultdict(list)
for r in rows:
    if r["limit"] == 0 or r["tag"] == "procs":
        continue
    tags = ("pair-before", "pair-after") if r["tag"] == "pair" else ("before", "after")
    rnd = r["tag"][len("single"):] if r["tag"].startswith("single-r") else ""
    own = (f"before-{r['limit']}{rnd}", f"after-{r['limit']}{rnd}")
    if any(x["tag"] in own for x in rows if x["workload"] == r["workload"]):
        tags = own  # this run's own unlimited runs either side
    base, _ = baseline(r["workload"], tags)
    achieved = 100.0 * r["result"]["rate"] / base
    secs = [100.0 * v / base for v in r["result"]["per_second"][1:]]
    err = achieved - r["limit"]
    judged = verdict(r["limit"], achieved, secs)
    failures += judged != "ok"
    name = r["workload"] + (" (pair)" if r["tag"] == "pair" else "") + rnd.replace("-r", " #")
    print(f"{name:12} {r['limit']:5d} {achieved:8.2f}% {err:+6.2f}  "
          f"{min(secs):9.2f}..{max(secs):6.2f}%  {judged:12} {gpu_during(r)}")
    if rnd:
        by_round[(r["workload"], r["limit"])].append(achieved)


def done_between(r, a, b):
    """Work a run did between monotonic seconds a and b, from its per-second
    counts (spread evenly within each second)."""
    t0 = r["result"]["t0_ns"] / 1e9
    n = 0.0
    for k, v in enumerate(r["result"]["per_second"]):
        lo, hi = max(a, t0 + k), min(b, t0 + k + 1)
        if hi > lo:
            n += v * (hi - lo)
    return n


# One container of two processes: their work together against the limit, over
# the time both were measuring (their starts differ by PyTorch's start-up: the
# first alone would count its share in full meanwhile).
procs = [r for r in rows if r["tag"] == "procs"]
if procs:
    base, _ = baseline(procs[0]["workload"], ("procs-before", "procs-after"))
    limit = procs[0]["limit"]
    start = max(r["result"]["t0_ns"] / 1e9 for r in procs)
    end = min(r["result"]["t0_ns"] / 1e9 + len(r["result"]["per_second"]) for r in procs)
    each = [done_between(r, start, end) / (end - start) for r in procs]
    achieved = 100.0 * sum(each) / base
    secs = [100.0 * sum(done_between(r, start + k, start + k + 1) for r in procs) / base
            for k in range(1, int(end - start))]
    judged = verdict(limit, achieved, secs)
    failures += judged != "ok"
    split = " + ".join(f"{100.0 * x / base:.2f}" for x in each)
    print(f"{procs[0]['workload'] + ' (procs)':12} {limit:5d} {achieved:8.2f}% {achieved - limit:+6.2f}  "
          f"{min(secs):9.2f}..{max(secs):6.2f}%  {judged:12} {len(procs)} processes, one state "
          f"file, over the {end - start:.1f} s both measured: {split} %")
if by_round:
    print()
    print("# Median over the rounds of each limit (each round against its own unlimited runs):")
    print_medians(by_round, 12)
print()
for w in ("gemm", "launch", "launch_ptds", "graph"):
    tags = tuple(x["tag"] for x in rows if x["workload"] == w and x["limit"] == 0
                 and x["tag"].startswith(("before", "after")))
    base, rates = baseline(w, tags)
    if not rates:
        continue
    during = [gpu_during(r) for r in rows if r["workload"] == w and r["limit"] == 0][:2]
    print(f"unlimited {w}: {', '.join(f'{x:.1f}' for x in rates)} /s   {' | '.join(during)}")
for tag in ("pair", "procs"):
    base, rates = baseline("gemm", (f"{tag}-before", f"{tag}-after"))
    if rates:
        print(f"unlimited gemm around the {tag}: {', '.join(f'{x:.1f}' for x in rates)} /s")

# A/A: each unlimited run after a limited one, judged like a limited run at
# 100 % against the unlimited run before it. What this shows is the noise of
# the machine and the measurement, which no limiter can go below.
aa = []
for r in rows:
    if r["limit"] != 0 or not r["tag"].startswith("after"):
        continue
    before_tag = "before" + r["tag"][len("after"):]
    before = [x for x in rows if x["workload"] == r["workload"] and x["limit"] == 0
              and x["tag"] == before_tag]
    if not before:
        continue
    base = before[0]["result"]["rate"]
    total = 100.0 * r["result"]["rate"] / base
    secs = [100.0 * v / base for v in r["result"]["per_second"][1:]]
    aa.append((f"{r['workload']} {r['tag']}/{before_tag}", total, secs))
if aa:
    print()
    print("# A/A: an unlimited run against the unlimited run before it, judged as a")
    print("# limited run at 100 % would be (targets +-3 total, +-5 each second).")
    print(f"{'runs':28} {'ratio':>8} {'per-second min..max':>22}  verdict")
    for name, total, secs in aa:
        judged = verdict(100, total, secs).replace("FAIL", "outside")
        print(f"{name:28} {total:7.2f}% {min(secs):9.2f}..{max(secs):6.2f}%  {judged}")

ab = [l.rstrip("\n").split("\t") for l in open(sys.argv[2])][1:] if len(sys.argv) > 2 else []
if ab:
    print()
    print("# Launch rate with no binding SM share, inside one process: launches through the")
    print("# pointer the CUDA runtime is given (hooked) against the driver's own function,")
    print("# and the driver's function against itself (A/A); best of 60 alternating batches")
    print("# of 2,000 per arm, one process per row and round, rounds shuffled.")
    print(f"{'condition':13} {'rounds':>6} {'hooked/driver median':>21} {'min..max':>14} "
          f"{'A/A median':>11} {'min..max':>14}  runtime given the driver's pointer")
    for c in dict.fromkeys(r[1] for r in ab):
        got = [r for r in ab if r[1] == c and r[2] and r[3] and r[4]]
        if not got:
            print(f"{c:13} no result")
            continue
        hooked = [float(r[2]) / float(r[3]) for r in got]
        aa = [float(r[4]) / float(r[3]) for r in got]
        same = sum(r[5] == "1" for r in got)
        print(f"{c:13} {len(got):6d} {statistics.median(hooked):21.4f} "
              f"{min(hooked):6.3f}..{max(hooked):.3f} {statistics.median(aa):11.4f} "
              f"{min(aa):6.3f}..{max(aa):.3f}  {same} of {len(got)}")
print()
print(f"{failures} limited run(s) outside their targets")
