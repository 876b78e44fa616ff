"""Verdicts of bench/mps/run.sh: python3 summarize.py OUTDIR"""
import json
import os
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
svc, trn = load("solo-service.json"), load("solo-trainer.json")
if not svc or not trn:
    sys.exit("the solo runs failed; see the .err files")
print(f"# alone: service p50 {svc['p50_ms']:.1f} ms, p99 {svc['p99_ms']:.1f} ms; "
      f"trainer {trn['rate']:.1f} steps/s")
print("condition             service p50 / p99 ms   x solo       trainer steps/s  of solo  verdict")
fails = 0
# 30/60: the case (p50 <= 1.10x, p99 <= 1.35x, trainer >= 60 %), with
# each pod capped at its share and with the service as a high-priority pod
# (uncapped); 100/70: the frontier for shares 30/70 (1.05x, 1.2x, 80 %).
CASES = (("timeslice", None), ("mps-solo-service-100", None), ("mps-solo-service-30", None),
         ("mps-30-60", (1.10, 1.35, 0.60)), ("mps-100-60", (1.10, 1.35, 0.60)),
         ("mps-100-70", (1.05, 1.20, 0.80)), ("mps-100-80", (1.05, 1.20, 0.80)),
         ("mps-100-100", None))
for name, targets in CASES:
    s = load(f"{name}.service.json") or load(f"{name}.json")
    if not s:
        print(f"{name:16} failed (see {name}*.err)")
        fails += 1
        continue
    p50, p99 = s["p50_ms"] / svc["p50_ms"], s["p99_ms"] / svc["p99_ms"]
    t = load(f"{name}.trainer.json")
    tr = rate_within(t, s["t0"], s["t1"]) if t else float("nan")
    frac = tr / trn["rate"] if t else float("nan")
    verdict = "-"
    if targets:
        ok = p50 <= targets[0] and p99 <= targets[1] and frac >= targets[2]
        verdict = ("ok" if ok else "MISS") + f" (p50<={targets[0]}, p99<={targets[1]}, trainer>={targets[2]:.0%})"
        fails += not ok and name == "mps-100-60"
    print(f"{name:21} {s['p50_ms']:7.1f} / {s['p99_ms']:6.1f}      {p50:4.2f} / {p99:4.2f}  "
          f"{tr:10.1f}      {frac:6.1%}  {verdict}")
for extra in ("memory.txt", "faults.txt"):
    print()
    print(open(os.path.join(out, extra)).read().rstrip())
sys.exit(1 if fails else 0)
