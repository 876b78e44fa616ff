"""How far the in-process judge's own reference moves, against what the
limiter scored: the bound that no limiter holding a steady rate can beat.

    python3 reference_bound.py PHASED-RAW.jsonl [MORE.jsonl ...]

For every in-process launch-bound round of bench/sm_limit/run.sh (the
launch_phased part: unthrottled, throttled, unthrottled again), the judge of
summarize_phased.py divides the throttled seconds' rate by the mean of the
unthrottled seconds on both sides. A limiter can only learn the program's
flat-out rate from what came before the throttled phase. So each round is
also scored for a perfect limiter of that kind: one that knew the program's
mean unthrottled rate over the seconds before the switch exactly, and held
the program at its share of that rate, steadily, throughout (its seconds are
then all alike, so only the total can miss). Where that perfect limiter is
outside +-3 points, the round's reference moved between its two sides by
more than the target allows, and no steady rate learnt beforehand could have
passed the round. The same with the seconds after the switch (a limiter that
knew the future) for symmetry.
"""
import collections
import json
import statistics
import sys

from summarize_phased import split_seconds

TOTAL_POINTS = 3.0


def rounds(paths):
    for path in paths:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                if row["workload"] != "launch" or len(row["switches"]) != 3:
                    continue  # interleaved rounds, other workloads
                before, throttled, after = split_seconds(row)
                if before and throttled and after:
                    yield path, row, before, throttled, after


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    per_limit = collections.defaultdict(lambda: [0, 0, 0, 0])
    print(f"{'file':44} {'round':14} {'limit':>5} {'limiter':>8} {'knew-before':>11} "
          f"{'knew-after':>10} {'A/A after/before':>16}")
    for path, row, before, throttled, after in rounds(sys.argv[1:]):
        limit = row["limit"]
        base = statistics.mean(before + after)
        scored = 100.0 * statistics.mean(throttled) / base
        knew_before = limit * statistics.mean(before) / base
        knew_after = limit * statistics.mean(after) / base
        drift = 100.0 * statistics.mean(after) / statistics.mean(before)
        counts = per_limit[limit]
        counts[0] += 1
        for i, value in enumerate((scored, knew_before, knew_after), start=1):
            counts[i] += abs(value - limit) > TOTAL_POINTS
        name = path.rsplit("/", 1)[-1][:44]
        print(f"{name:44} {row['tag']:14} {limit:5d} {scored:7.2f}% {knew_before:10.2f}% "
              f"{knew_after:9.2f}% {drift:15.2f}%")
    print()
    print(f"Rounds outside +-{TOTAL_POINTS:g} points of the limit over the throttled seconds:")
    print(f"{'limit':>5} {'rounds':>6} {'limiter':>8} {'knew-before':>11} {'knew-after':>10}")
    for limit in sorted(per_limit):
        n, scored, knew_before, knew_after = per_limit[limit]
        print(f"{limit:5d} {n:6d} {scored:8d} {knew_before:11d} {knew_after:10d}")


if __name__ == "__main__":
    main()
