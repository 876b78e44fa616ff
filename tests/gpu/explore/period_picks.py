#!/usr/bin/env python3
"""Which pick of a launch-bound program's back-to-back samples is its period?

From phased_ab.sh's runs (LIBCUDA_LOG_LEVEL=4 logs every 16-launch sample),
replays candidate estimators offline against the unthrottled period U of the
same process (1 / its unthrottled rate) and prints the share each would have
given, limit * U / charged, if the program kept up with its pacer.

    period_picks.py extract RUNS_JSONL LOGS_DIR SET > windows.jsonl
    period_picks.py compare windows.jsonl[.gz] [more ...]

`extract` keeps, per run, the samples' periods (the host's when the GPU kept
pace, else the GPU's, as the limiter takes them) from the second half of the
first sustain run (flat out) and from after it (throttled).
"""
import gzip
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../bench/sm_limit"))
from summarize_phased import split_seconds  # noqa: E402

SAMPLE = re.compile(r"run of (\d+) launches, ([\d.]+) us each on the GPU, ([\d.]+) on the host")
RUN_AT = re.compile(r"sustain run 1: .*sampled at ([\d.]+) ms of the run")


def windows(log, limit):
    """(flat-out samples, throttled samples) of one run's log."""
    lines = open(log).read().splitlines()
    run_lines = [i for i, l in enumerate(lines) if RUN_AT.search(l)]
    end = run_lines[-1] if run_lines else -1
    late_from_ms = min(300, limit * 10) / 2  # the loan: 300 ms, at most the share of a second
    at, flat, throttled = None, [], []
    for i, line in enumerate(lines):
        m = RUN_AT.search(line)
        if m and i <= end:
            at = float(m.group(1))
        m = SAMPLE.search(line)
        if not m:
            continue
        gpu, host = float(m.group(2)), float(m.group(3))
        period = min(gpu, host) if gpu <= host * 1.1 else gpu
        if i < end and at is not None and at >= late_from_ms:
            flat.append(period)
        elif i > end:
            throttled.append(period)
    return flat, throttled


def extract(runs, logs, set_name):
    for line in open(runs):
        row = json.loads(line)
        before, thr, after = split_seconds(row)
        variant, rnd = row["tag"].rsplit("-", 1)
        flat, throttled = windows(
            os.path.join(logs, f"log-{variant}-{row['limit']}-{rnd[1:]}.txt"), row["limit"])
        print(json.dumps({
            "set": set_name, "tag": row["tag"], "limit": row["limit"],
            "unthrottled_us": round(1e6 / statistics.mean(before + after), 4),
            "achieved": round(100 * statistics.mean(thr) / statistics.mean(before + after), 2),
            "flat_out": flat, "throttled": throttled}))


def rolling(samples, pick, span):
    """As RobustEstimate: a pick of the last five, then a moving average over `span`."""
    value, n = 0.0, 0
    for i in range(len(samples)):
        window = sorted(samples[max(0, i - 4):i + 1])
        m = window[(len(window) - 1) // (4 if pick == "low" else 2)]
        n += 1
        value = m if n <= 5 else value + (m - value) / min(n - 4, span)
    return value


def mean(samples, *_):
    return statistics.mean(samples)


CANDIDATES = {
    # What each was: the charged period is min(throttled estimate, flat-out estimate).
    "low of five (before)": lambda f, t: min(rolling(t, "low", 256), rolling(f, "low", 4)),
    "median of five (now)": lambda f, t: min(rolling(t, "median", 256), rolling(f, "median", 1024)),
    "mean": lambda f, t: min(mean(t), mean(f)),
    "median, throttled only": lambda f, t: rolling(t, "median", 256),
    "median, flat out only": lambda f, t: rolling(f, "median", 1024),
}


def compare(files):
    rows = [json.loads(l) for f in files
            for l in (gzip.open(f, "rt") if f.endswith(".gz") else open(f)) if l.strip()]
    rows = [r for r in rows if r["flat_out"] and r["throttled"]]
    limits = sorted({r["limit"] for r in rows})
    print(f"# {len(rows)} runs; error = limit * U / charged - limit, in points")
    print(f"{'candidate':24} {'mean':>6} {'mean|e|':>8} {'max|e|':>7} {'>3':>6}   median by limit")
    for name, pick in CANDIDATES.items():
        errs = [(r["limit"] * r["unthrottled_us"] / pick(r["flat_out"], r["throttled"]) - r["limit"],
                 r["limit"]) for r in rows]
        e = [x for x, _ in errs]
        by_limit = " ".join(
            f"{l}:{statistics.median(x for x, ll in errs if ll == l):+.1f}" for l in limits)
        print(f"{name:24} {statistics.mean(e):+6.2f} {statistics.mean(map(abs, e)):8.2f} "
              f"{max(map(abs, e)):7.2f} {sum(abs(x) > 3 for x in e):3}/{len(e):<3}  {by_limit}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "extract":
        extract(*sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "compare":
        compare(sys.argv[2:])
    else:
        sys.exit(__doc__)
