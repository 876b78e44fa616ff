"""Verdicts of bench/sm_limit/run.sh, one table per part.

    python3 summarize.py sm-raw.jsonl nvml.tsv pair-frames.txt overhead-raw.tsv

Targets (docs/sm-limiter.md): NVML utilisation within +-3 points of the share
over the run and +-5 in every whole second after the first (GEMM, graph);
CUPTI busy fraction within +-3 (training steps); a program
below its share at >= 97 % of its speed and <= 1.05x its p50 latency with
the share enforced against not (one process, interleaved phases) and against
the same program without libvgpu.so (processes taking turns), each with an
A/A; each of a pair of GEMM loops at 30 and 60 % holding the GPU within +-3
of its share by its rate, and `vgpu top` and the agent's metric within +-3 of
that in every frame; launch rate with nothing
configured or a share of 100 >= 99 % of the driver's own function.
Missing files or parts are skipped.
"""
import collections
import json
import os
import re
import statistics
import sys

raw = [json.loads(l) for l in open(sys.argv[1]) if l.strip()] if os.path.exists(sys.argv[1]) else []
nvml = []
if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
    nvml = [tuple(float(x) for x in l.split("\t")) for l in open(sys.argv[2]) if l.strip()]
failures = 0


def verdict(ok):
    global failures
    failures += 0 if ok else 1
    return "ok" if ok else "FAIL"


def nvml_util(t0, t1):
    s = [x[1] for x in nvml if t0 <= x[0] < t1]
    return statistics.mean(s) if s else float("nan")


def runs(tag, workload=None):
    return [r for r in raw if r["tag"] == tag and (workload is None or r["result"]["workload"] == workload)]


# NVML-judged loops.
rows = runs("gemm") + runs("graph")
if rows:
    print("## GPU utilisation as NVML reports it (nvidia-smi's GPU-Util), policy force")
    print(f"{'workload':10} {'share':>5} {'NVML util':>10} {'error':>7} {'seconds min..max':>17} "
          f"{'rate':>8} {'of unlimited':>12}  verdict")
    for r in rows:
        res = r["result"]
        t0, t1, lim = res["t0"], res["t1"], r["limit"]
        total = nvml_util(t0 + 1, t1)
        secs = [nvml_util(t0 + k, t0 + k + 1) for k in range(1, int(t1 - t0))]
        secs = [s for s in secs if s == s]
        ref = runs("ref", res["workload"]) or runs("ref", "gemm")
        of = 100 * res["rate"] / ref[0]["result"]["rate"] if ref else float("nan")
        ok = abs(total - lim) <= 3 and all(abs(s - lim) <= 5 for s in secs)
        print(f"{res['workload']:10} {lim:5d} {total:9.2f}% {total - lim:+7.2f} "
              f"{min(secs):7.1f}..{max(secs):5.1f}% {res['rate']:8.1f} {of:11.1f}%  {verdict(ok)}")
    for r in runs("ref", "gemm"):
        res = r["result"]
        print(f"{'gemm':10} {'none':>5} {nvml_util(res['t0'] + 1, res['t1']):9.2f}%"
              f"{'':26} {res['rate']:8.1f}")
    print()

# CUPTI-judged training steps.
rows = runs("train")
if rows:
    print("## GPU time as CUPTI timed the kernels (union of their intervals / wall time)")
    print(f"{'workload':14} {'share':>5} {'busy':>7} {'error':>7} {'unlimited busy':>15} "
          f"{'steps/s':>8} {'unlimited':>9}  verdict")
    for r in rows:
        res, lim = r["result"], r["limit"]
        ref = runs("ref", res["workload"])
        rb = ref[0]["result"].get("busy", float("nan")) if ref else float("nan")
        rr = ref[0]["result"]["rate"] if ref else float("nan")
        ok = abs(res["busy"] - lim) <= 3
        print(f"{res['workload']:14} {lim:5d} {res['busy']:6.2f}% {res['busy'] - lim:+7.2f} "
              f"{rb:14.2f}% {res['rate']:8.2f} {rr:9.2f}  {verdict(ok)}")
    print()

# Programs below their share.
def nvml_phases(windows):
    """NVML utilisation in each phase (its first half second left out: NVML averages
    over its own sample period), as (median, max); None without phases or samples."""
    v = [nvml_util(t0 + 0.5, t1) for t0, t1 in windows]
    v = [x for x in v if x == x]
    return (statistics.median(v), max(v)) if v else None


def below_share_check(res, lim, unlimited):
    """The program's own GPU time must be below the share for the row to mean
    anything: CUPTI busy of its unlimited run, and NVML in every phase it ran
    unlimited (a host-bound program uses more GPU time when its host runs faster)."""
    ref = runs("ref-under", res["workload"])
    busy, ref_nvml = float("nan"), float("nan")
    if ref:
        busy = ref[0]["result"].get("busy", float("nan"))
        ref_nvml = nvml_util(ref[0]["result"]["t0"] + 0.5, ref[0]["result"]["t1"])
    windows = [w for c in unlimited for w in res.get("windows", {}).get(c, [])]
    nv = nvml_phases(windows)
    below = busy < lim and not ref_nvml >= lim and (nv is None or nv[1] < lim)
    cell = f"{nv[0]:5.1f}/{nv[1]:5.1f}%" if nv else f"{'-':>12}"
    return f"{busy:4.1f}/{ref_nvml:4.1f}%", cell, below


def judged(ok, below):
    if not below:
        verdict(False)
        return "NOT BELOW its share: pick a lighter program"
    return verdict(ok)


ab_rows = runs("under-ab")
if ab_rows:
    print("## Programs below their share, pacing alone: one process, phases with the share enforced")
    print("## (on) and not (off, off2) in a random order per round; medians of the per-round ratios.")
    print("## Own GPU time: CUPTI busy and NVML utilisation of an unlimited run without the profiler;")
    print("## NVML in the off phases, median/max")
    print(f"{'workload':14} {'share':>5} {'CUPTI/NVML':>11} {'NVML off':>12} {'speed on/off':>12} "
          f"{'A/A off2/off':>12} {'p50 on/off':>10} {'A/A':>6} {'p50 on/off ms':>14}  verdict")
    for r in ab_rows:
        res, lim = r["result"], r["limit"]
        busy, cell, below = below_share_check(res, lim, ("off", "off2"))
        ok = res["ab_median"] >= 0.97 and res["p50_ratio"] <= 1.05
        print(f"{res['workload']:14} {lim:5d} {busy:>11} {cell} {100 * res['ab_median']:11.1f}% "
              f"{100 * res['aa_median']:11.1f}% {res['p50_ratio']:10.3f} {res['p50_aa']:6.3f} "
              f"{res['p50_ms']['on']:6.1f}/{res['p50_ms']['off']:<7.1f}  {judged(ok, below)}")
        print(f"{'':14} rounds on/off: {', '.join(f'{100 * x:.1f}' for x in res['ab'])}")
    print()

turn_rows = runs("under-turns")
if turn_rows:
    print("## Programs below their share, across processes: processes take turns in 2-s phases, the")
    print("## limited ones (force) and those without libvgpu.so (bare; bare2 against bare: the A/A);")
    print("## medians of the per-round ratios. NVML in the bare phases, median/max")
    print(f"{'workload':14} {'share':>5} {'CUPTI/NVML':>11} {'NVML bare':>12} {'speed':>7} {'A/A':>7} "
          f"{'p50 ratio':>9} {'A/A':>6} {'p50 limited/bare ms':>20}  verdict")
    for r in turn_rows:
        res, lim = r["result"], r["limit"]
        busy, cell, below = below_share_check(res, lim, ("bare", "bare2", "bare3"))
        ok = res["ab_median"] >= 0.97 and res["p50_ratio"] <= 1.05
        print(f"{res['workload']:14} {lim:5d} {busy:>11} {cell} {100 * res['ab_median']:6.1f}% "
              f"{100 * res['aa_median']:6.1f}% {res['p50_ratio']:9.3f} {res['p50_aa']:6.3f} "
              f"{res['p50_ms']['limited']:9.1f}/{res['p50_ms']['bare']:<9.1f}  {judged(ok, below)}")
        print(f"{'':14} rounds limited/bare: {', '.join(f'{100 * x:.1f}' for x in res['ab'])}")
        print(f"{'':14} rounds bare2/bare:   {', '.join(f'{100 * x:.1f}' for x in res['aa'])}")
    print()

# What the limiter itself did in the below-share runs (their exit lines in
# sm-logs.txt): a program it never held back cannot have been slowed by
# pacing, whatever the speed ratios above read on a noisy host.
logs = sys.argv[5] if len(sys.argv) > 5 else ""
if logs and os.path.exists(logs) and (ab_rows or turn_rows):
    print("## The limiter's own account of the below-share runs (exit lines, sm-logs.txt)")
    print(f"{'run':32} {'launches':>9} {'charged ms':>11} {'waited ms':>10}")
    run = None
    for line in open(logs):
        if line.startswith("## "):
            run = line[3:].strip()
            continue
        m = re.search(r"launches kernel=(\d+) kernel_ex=(\d+).*charged ([\d.]+) ms, waited ([\d.]+) ms",
                      line)
        if m and run and (run.startswith("under-ab") or run.startswith("turns")):
            print(f"{run:32} {int(m[1]) + int(m[2]):9d} {float(m[3]):11.1f} {float(m[4]):10.3f}")
    print()

# The pair. Time slicing stretches a container's kernel intervals over the
# other's slices, so neither CUPTI's busy fraction nor NVML can time one
# container of a pair. Its rate can, given what one step's kernels take on
# the GPU as the pair runs: CUPTI's busy time per step of the container least
# stretched (an upper bound; the loop alone is no reference, as it runs at
# full load and so at lower clocks). Its GPU time is then rate x that.
def window(t0, t1, col):
    s = [x[col] for x in nvml if t0 <= x[0] < t1 and len(x) > col]
    return statistics.median(s) if s else float("nan")


rows = runs("pair")
if rows:
    print("## Two containers at 30 and 60 % at once (GEMM loops, policy force)")
    ref = runs("ref-pair", "gemm") or runs("ref", "gemm")
    if ref:
        rr = ref[0]["result"]
        print(f"alone: {rr['rate']:.1f} steps/s at NVML {nvml_util(rr['t0'] + 1, rr['t1']):.1f}%, "
              f"SM clock {window(rr['t0'] + 1, rr['t1'], 2):.0f} MHz, "
              f"{window(rr['t0'] + 1, rr['t1'], 3):.0f} W")
    r0 = rows[0]["result"]
    print(f"pair: NVML {nvml_util(r0['t0'] + 1, r0['t1']):.1f}%, "
          f"SM clock {window(r0['t0'] + 1, r0['t1'], 2):.0f} MHz, "
          f"{window(r0['t0'] + 1, r0['t1'], 3):.0f} W")
    step = min(r["result"]["busy"] / 100 / r["result"]["rate"] for r in rows)
    print(f"one step's kernels in the pair: at most {1e3 * step:.3f} ms (CUPTI)")
    held = {}
    for r in sorted(rows, key=lambda r: r["limit"]):
        res, lim = r["result"], r["limit"]
        held[lim] = 100 * res["rate"] * step
        alone = f" ({100 * res['rate'] / rr['rate']:.1f}% of the rate alone)" if ref else ""
        print(f"share {lim:2d} %: rate {res['rate']:.1f}/s{alone} = GPU time {held[lim]:.1f}% "
              f"({held[lim] - lim:+.1f}); CUPTI busy {res['busy']:.1f}%  "
              f"{verdict(abs(held[lim] - lim) <= 3)}")
    frames = sys.argv[3] if len(sys.argv) > 3 else ""
    if frames and os.path.exists(frames):
        top, agent = collections.defaultdict(list), collections.defaultdict(list)
        kind = None
        gpu = 0  # the pair runs on GPU 0; vgpu top lists every GPU of the machine
        for line in open(frames):
            if line.startswith("### vgpu top"):
                kind = "top"
            elif line.startswith("### agent"):
                kind = "agent"
            elif line.startswith("GPU "):
                gpu = int(line.split()[1])
            cols = re.split(r"\s{2,}", line.strip())
            m = re.match(r"pod-gemm(\d+)-uid$", cols[0])
            if kind == "top" and gpu == 0 and m and len(cols) > 4 and cols[4].endswith("%"):
                top[int(m.group(1))].append(int(cols[4][:-1]))
            m = re.search(r'podname="pod-gemm(\d+)-uid".*\} (\d+)', line) or \
                re.search(r'pod-gemm(\d+)-uid.*\} (\d+)$', line.strip())
            if kind == "agent" and m and 'vdevice_index="0"' in line and \
                    line.startswith("hami_container_device_utilization_ratio"):
                agent[int(m.group(1))].append(int(m.group(2)))
        for name, d in (("vgpu top --once", top), ("agent metric", agent)):
            for lim in (30, 60):
                v, want = d.get(lim, []), held.get(lim)
                ok = bool(v) and want is not None and all(abs(x - want) <= 3 for x in v)
                print(f"{name:16} share {lim}: frames {v} against {want or float('nan'):.1f}  "
                      f"{verdict(ok)}")
    print()

ab = sys.argv[4] if len(sys.argv) > 4 else ""
if ab and os.path.exists(ab):
    rows = [l.rstrip("\n").split("\t") for l in open(ab)][1:]
    print("## Launch rate through libvgpu.so against the driver's own function, same process")
    for c in ("unset", "sm100", "sm30"):
        v = [r for r in rows if r[1] == c and r[2] and r[3]]
        if not v:
            continue
        ratio = statistics.median(float(r[2]) / float(r[3]) for r in v)
        aa = statistics.median(float(r[4]) / float(r[3]) for r in v if r[4])
        # sm30 (charged, not paced) is what a share costs a launch: reported.
        word = verdict(ratio >= 0.99) if c != "sm30" else "(charged, not paced; not judged)"
        print(f"{c:6} {len(v):2d} processes: hooked/driver median {ratio:.4f} (A/A driver2/driver "
              f"{aa:.4f})  {word}")
    print()

print(f"# {failures} verdict(s) failed")
