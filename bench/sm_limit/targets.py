"""The SM-limit benchmark's targets and how a run is judged, shared by
summarize.py (runs against other processes) and summarize_phased.py (runs
inside one process): the total within +-3 points of the limit, every judged
second within +-5 points.

    from targets import verdict, print_medians
    verdict(30, 31.2, [30.8, 31.5])   # "ok"
"""
import statistics

TOTAL_POINTS = 3
SECOND_POINTS = 5


def verdict(limit, achieved, seconds):
    """"ok", "FAIL total" or "FAIL seconds"."""
    if abs(achieved - limit) > TOTAL_POINTS:
        return "FAIL total"
    if any(abs(s - limit) > SECOND_POINTS for s in seconds):
        return "FAIL seconds"
    return "ok"


def print_medians(groups, width):
    """One line per (name, limit): the median of its rounds' achieved shares."""
    for (name, limit), vals in sorted(groups.items()):
        med = statistics.median(vals)
        print(f"{name:{width}} {limit:5d} {med:8.2f}% {med - limit:+6.2f}   rounds: "
              f"{', '.join(f'{v:.2f}' for v in vals)}")
