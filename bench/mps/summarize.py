"""Verdicts of bench/mps/run.sh: python3 summarize.py OUTDIR"""
import json
import os
import statistics
import sys

out = sys.argv[1]


RUNS = {}
for line in open(os.path.join(out, "mps-raw.jsonl")):
    name, _, text = line.partition(" ")
    try:
        RUNS[name] = json.loads(text)
    except ValueError:
        pass


def load(name):
    return RUNS.get(name.removesuffix(".json"))


def rate_within(trainer, t0, t1):
    """Trainer steps/s over the whole seconds of its run inside [t0, t1]."""
    steps, secs = 0, 0
    for i, n in enumerate(trainer["per_second"]):
        s = trainer["t0"] + i
        if s >= t0 and s + 1 <= t1:
            steps, secs = steps + n, secs + 1
    return steps / secs if secs else float("nan")


for line in open(os.path.join(out, "mps-machine.txt")):
    print(line.rstrip())

# 30/60: the judged case (p50 <= 1.10x, p99 <= 1.35x, trainer >= 60 %), each
# pod capped at its share as a default pod is; 100/60 the same with the service
# a high-priority pod (uncapped); 100/70: the frontier for shares 30/70 (1.05x,
# 1.2x, 80 %); 100/80 hands out more than the GPU. mps-solo-service-100 is the
# service alone as an uncapped MPS client: what MPS itself does to its speed.
CASES = (("timeslice", None), ("mps-solo-service-100", None), ("mps-solo-service-30", None),
         ("mps-30-60", (1.10, 1.35, 0.60)), ("mps-100-60", (1.10, 1.35, 0.60)),
         ("mps-100-70", (1.05, 1.20, 0.80)), ("mps-100-80", (1.05, 1.20, 0.80)),
         ("mps-100-100", None))

rounds = sorted({k.split("/")[0] for k in RUNS if "/" in k})
print(f"# {len(rounds)} round(s); each ratio against its own round's solo runs, then the median")
print("condition             service p50 / p99 ms   x solo       trainer steps/s  of solo  verdict")
fails = 0
for name, targets in CASES:
    rows = []
    for r in rounds:
        svc, trn = load(f"{r}/solo-service"), load(f"{r}/solo-trainer")
        s = load(f"{r}/{name}.service") or load(f"{r}/{name}")
        if not (svc and trn and s):
            continue
        t = load(f"{r}/{name}.trainer")
        tr = rate_within(t, s["t0"], s["t1"]) if t else float("nan")
        rows.append((s["p50_ms"], s["p99_ms"], s["p50_ms"] / svc["p50_ms"],
                     s["p99_ms"] / svc["p99_ms"], tr, tr / trn["rate"]))
    if not rows:
        continue
    med = [statistics.median(col) for col in zip(*rows)]
    verdict = "-"
    if targets:
        ok = med[2] <= targets[0] and med[3] <= targets[1] and med[5] >= targets[2]
        verdict = ("ok" if ok else "MISS") + f" (p50<={targets[0]}, p99<={targets[1]}, trainer>={targets[2]:.0%})"
        fails += not ok and name == "mps-30-60"
    print(f"{name:21} {med[0]:7.1f} / {med[1]:6.1f}      {med[2]:4.2f} / {med[3]:4.2f}  "
          f"{med[4]:10.1f}      {med[5]:6.1%}  {verdict}")
    if len(rows) > 1:
        print("                      rounds p50x " + ", ".join(f"{r[2]:.2f}" for r in rows) +
              "; p99x " + ", ".join(f"{r[3]:.2f}" for r in rows) +
              "; trainer " + ", ".join(f"{r[5]:.0%}" for r in rows))
for r in rounds:
    svc, trn = load(f"{r}/solo-service"), load(f"{r}/solo-trainer")
    if svc and trn:
        print(f"# {r} alone: service p50 {svc['p50_ms']:.1f} ms, p99 {svc['p99_ms']:.1f} ms; "
              f"trainer {trn['rate']:.1f} steps/s")
for extra in ("memory.txt", "faults.txt"):
    if os.path.exists(os.path.join(out, extra)):
        print()
        print(open(os.path.join(out, extra)).read().rstrip())
sys.exit(1 if fails else 0)
