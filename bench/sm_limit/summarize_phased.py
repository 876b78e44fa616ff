"""Summary of bench/sm_limit/run.sh's in-process (phased) runs.

    python3 summarize_phased.py sm-limit-phased-raw.jsonl

Each row is one process: unthrottled while switch-phases held utilization_switch
at 0, throttled while it held 1, unthrottled again after. A whole second of the
program counts for an unthrottled phase when it lies inside it, MARGIN_S clear
of the switch (a launch already waiting when the switch is cleared finishes its
wait), and for the throttled phase when it lies inside it and starts at least
a second after the switch was set.
That first second is the limiter's start in
this process (its first samples and sustain run; a fresh process does that
before its first second is counted). Achieved share = the throttled seconds'
mean rate / the unthrottled seconds' mean rate, both from the same process. Targets, as for the cross-process runs: the total within +-3
points of the limit, each of those seconds within +-5 points.
"""
import collections
import json
import statistics
import sys

from targets import print_medians, verdict

MARGIN_S = 0.25
FIRST_S = 1.0
NS = 1_000_000_000


def phases(switches):
    """(start, end, value) intervals in ns; the last one is open-ended."""
    out = []
    for i, s in enumerate(switches):
        end = switches[i + 1]["t_ns"] if i + 1 < len(switches) else float("inf")
        out.append((s["t_ns"], end, s["switch"]))
    return out


def split_seconds(row):
    """(unthrottled before, throttled, unthrottled after) lists of per-second counts."""
    res = row["result"]
    before, throttled, after = [], [], []
    seen_throttled = False
    for i, count in enumerate(res["per_second"]):
        lo, hi = res["t0_ns"] + i * NS, res["t0_ns"] + (i + 1) * NS
        for start, end, value in phases(row["switches"]):
            if lo >= start + (FIRST_S if value else MARGIN_S) * NS and hi <= end:
                if value:
                    throttled.append(count)
                    seen_throttled = True
                else:
                    (after if seen_throttled else before).append(count)
                break
    return before, throttled, after


def phase_seconds(row):
    """Per switch phase, in order: (switch value, whole-second counts inside it),
    by the same rule as split_seconds."""
    res = row["result"]
    out = [(value, []) for _, _, value in phases(row["switches"])]
    for i, count in enumerate(res["per_second"]):
        lo, hi = res["t0_ns"] + i * NS, res["t0_ns"] + (i + 1) * NS
        for k, (start, end, value) in enumerate(phases(row["switches"])):
            if lo >= start + (FIRST_S if value else MARGIN_S) * NS and hi <= end:
                out[k][1].append(count)
                break
    return out


def interleaved(row):
    """Throttled and A/A seconds of an interleaved run, in percent: each second
    of a throttled phase against the mean of the unthrottled phases either side
    of it; each second of an inner unthrottled phase against the unthrottled
    phases either side of it (two phases away): the same judgement with no
    limiter, which is the noise of the method."""
    ph = phase_seconds(row)
    throttled, aa = [], []
    for k, (value, counts) in enumerate(ph):
        side = 1 if value else 2
        if not counts or k - side < 0 or k + side >= len(ph):
            continue
        ref = [c for j in (k - side, k + side) if not ph[j][0] for c in ph[j][1]]
        if not ref:
            continue
        base = statistics.mean(ref)
        (throttled if value else aa).extend(100.0 * c / base for c in counts)
    return throttled, aa


def is_interleaved(row):
    return sum(1 for s in row["switches"] if s["switch"]) > 1


def print_table(rows, intro, columns, judge, noun):
    """One table of in-process runs. judge(row) gives either a reason the row
    cannot be judged, or (achieved, throttled seconds in percent, the text of
    the extra columns, the key its rounds are grouped by for the medians)."""
    print()
    for line in intro:
        print(f"# {line}")
    print(f"{'workload':18} {'limit':>5} {'achieved':>9} {'error':>7} {'per-second min..max':>20}  "
          f"{'verdict':12} {columns}")
    failures = 0
    by_limit = collections.defaultdict(list)
    for row in rows:
        name = f"{row['workload']} {row['tag']}"
        judged_row = judge(row)
        if isinstance(judged_row, str):
            print(f"{name:18} {row['limit']:5d}  {judged_row}")
            failures += 1
            continue
        achieved, secs, extra, group = judged_row
        judged = verdict(row["limit"], achieved, secs)
        failures += judged != "ok"
        print(f"{name:18} {row['limit']:5d} {achieved:8.2f}% {achieved - row['limit']:+6.2f} "
              f"{min(secs):9.2f}..{max(secs):6.2f}%  {judged:12} {extra}")
        by_limit[(group, row["limit"])].append(achieved)
    if any(len(v) > 1 for v in by_limit.values()):
        print()
        print("# Median over the rounds of each limit:")
        print_medians(by_limit, 18)
    print()
    print(f"{failures} {noun} run(s) outside their targets")


def judge_phased(row):
    before, throttled, after = split_seconds(row)
    unthrottled = before + after
    if not throttled or not before or not after:
        return (f"too few whole seconds in a phase "
                f"(throttled {len(throttled)}, before {len(before)}, after {len(after)})")
    base = statistics.mean(unthrottled)
    achieved = 100.0 * statistics.mean(throttled) / base
    secs = [100.0 * c / base for c in throttled]
    drift = 100.0 * statistics.mean(after) / statistics.mean(before)
    aa_secs = [100.0 * c / base for c in unthrottled]
    extra = (f"{len(throttled):3d}/{len(unthrottled):<4d} {drift:15.2f}% "
             f"{min(aa_secs):7.2f}..{max(aa_secs):6.2f}%")
    # Rounds are tagged rN, or VARIANT-rN by tests/gpu/explore/phased_ab.sh.
    variant = row["tag"].rsplit("-", 1)[0] if "-" in row["tag"] else ""
    return achieved, secs, extra, f"{row['workload']} {variant}".strip()


def judge_interleaved(row):
    secs, aa = interleaved(row)
    if not secs or not aa:
        return "too few whole seconds in the phases"
    achieved = statistics.mean(secs)
    extra = (f"{len(secs):4d} {statistics.mean(aa):8.2f}% {min(aa):7.2f}..{max(aa):6.2f}%")
    return achieved, secs, extra, row["workload"]


def main():
    all_rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    phased = [r for r in all_rows if not is_interleaved(r)]
    if phased:
        print_table(phased, [
            "In-process runs (GPU_CORE_UTILIZATION_POLICY=default, switch-phases as the node",
            "agent): achieved = the throttled seconds' rate / the same process's unthrottled",
            "seconds' rate; throttled seconds that start within a second of the switch (the",
            "limiter's start) are left out. A/A columns: the unthrottled seconds after the",
            "throttled phase against those before it, and each unthrottled second against",
            "their mean (the host's own noise inside one process, which no limiter can go",
            "below).",
        ], f"{'secs L/U':>8} {'A/A after/before':>16} {'A/A seconds':>16}", judge_phased,
            "in-process")
    interleaved_rows = [r for r in all_rows if is_interleaved(r)]
    if interleaved_rows:
        print_table(interleaved_rows, [
            "Interleaved in-process runs: 3 s unthrottled and 4 s throttled, six times.",
            "Achieved = the mean of the throttled seconds, each against the mean of the",
            "unthrottled phases either side of its own (the first second after each switch",
            "to throttled left out). A/A: each second of an inner unthrottled phase judged",
            "the same way against the unthrottled phases either side of it, no limiter",
            "involved: how far this method itself moves on this host.",
        ], f"{'secs':>4} {'A/A mean':>9} {'A/A seconds':>16}", judge_interleaved, "interleaved")


if __name__ == "__main__":
    main()
