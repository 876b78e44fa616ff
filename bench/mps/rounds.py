"""Interleaved rounds of bench/mps/run.sh: a service beside a trainer, each
configuration in every round, in a random order.

    python3 rounds.py --vgpu VGPU --lib LIB --state DIR --out FILE
                      [--rounds 5] [--first 1] [--seconds 7] [--lead 1]
                      [--conditions "solo-service solo-trainer ..."]

Every process the conditions need is started once, at the same time, as
bench/sm_limit/models.py WORKLOAD --serve (warm, then one measured phase per
line on its stdin): bare ones, `vgpu run` time-slice jobs with --cores and
`vgpu run --sharing mps` clients. Between its phases a process waits on its
stdin and leaves the GPU alone. Keeping them warm is what makes five or more
rounds affordable: starting Python, PyTorch and the model costs ~20 s a run,
more than a phase. Each round runs every condition once, in a random order:
a solo run is one --seconds phase of one process; a pair starts the trainer's
phase (--seconds + 2 x --lead), then after --lead the service's, so the
trainer trains through the whole of the service's window, and the trainer's
rate is counted over that window (from its steps' end times).

Appends one line per run to --out: "rK/CONDITION[.service|.trainer] JSON",
JSON with p50_ms, p99_ms, rate (per second), t0/t1 (Unix), the service's
request latencies (lat) and, for a trainer beside a service, rate_in_window.
Progress and failures go to stderr; the processes' own stderr to --logs.
"""
import argparse
import json
import os
import random
import select
import statistics
import subprocess
import sys
import time

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sm_limit", "models.py")

# Processes: (workload, how it is started). "bare": plain; ("ts", cores, mem):
# a time-slice job of `vgpu run` with an SM share; ("mps", cores, mem,
# priority): an MPS client of `vgpu run --sharing mps` (cores 100: no cap).
PROCS = {
    "svc-bare": ("gpt2_generate", "bare"),
    "trn-bare": ("gpt2_train", "bare"),
    "svc-ts30": ("gpt2_generate", ("ts", 30, "8g")),
    "trn-ts60": ("gpt2_train", ("ts", 60, "40g")),
    "svc-mps30": ("gpt2_generate", ("mps", 30, "8g", None)),
    "svc-mps-high": ("gpt2_generate", ("mps", 100, "8g", "high")),
    "trn-mps60": ("gpt2_train", ("mps", 60, "40g", None)),
    "trn-mps70": ("gpt2_train", ("mps", 70, "40g", None)),
    "trn-mps80": ("gpt2_train", ("mps", 80, "40g", None)),
    "trn-mps100": ("gpt2_train", ("mps", 100, "40g", None)),
}
# Conditions: (service process, trainer process); None: not in it.
CONDITIONS = {
    "solo-service": ("svc-bare", None),
    "solo-trainer": (None, "trn-bare"),
    "timeslice": ("svc-bare", "trn-bare"),              # plain time slicing, no library
    "timeslice-30-60": ("svc-ts30", "trn-ts60"),        # vgpu run, SM shares 30 / 60
    "mps-solo-service-100": ("svc-mps-high", None),   # what MPS alone does to the service
    "mps-solo-service-30": ("svc-mps30", None),
    "mps-30-60": ("svc-mps30", "trn-mps60"),            # MPS, both capped (default pods)
    "mps-100-60": ("svc-mps-high", "trn-mps60"),
    "mps-100-70": ("svc-mps-high", "trn-mps70"),        # the frontier setting for 30 / 70
    "mps-100-80": ("svc-mps-high", "trn-mps80"),
    "mps-100-100": ("svc-mps-high", "trn-mps100"),
}


def command(name, args):
    workload, how = PROCS[name]
    tail = [sys.executable, MODELS, workload, "--serve", "--warmup", "3"]
    if how == "bare":
        return tail
    run = [args.vgpu, "run", "--gpu", "0", "--hook-path", args.state, "--library", args.lib,
           "--name", name, "--memory", how[2], "--overcommit"]
    if how[0] == "mps":
        run[2:2] = ["--sharing", "mps"]
        if how[3]:
            run += ["--priority", how[3]]
    if how[1] < 100:
        run += ["--cores", str(how[1])]
    return run + ["--"] + tail


class Proc:
    def __init__(self, name, args, logs):
        self.name = name
        self.p = subprocess.Popen(command(name, args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=logs, text=True)

    def send(self, seconds):
        self.p.stdin.write(f"phase {seconds}\n")
        self.p.stdin.flush()

    def line(self, timeout):
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        text = self.p.stdout.readline() if ready else ""
        if not text:
            raise RuntimeError(f"{self.name}: no answer in {timeout:.0f} s (exit code {self.p.poll()})")
        return text.strip()

    def quit(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass


def summary(r, workload):
    lat = r["lat"]
    out = {"workload": workload, "n": r["n"], "rate": r["n"] / r["elapsed"], "t0": r["t0"],
           "t1": r["t1"], "p50_ms": statistics.median(lat),
           "p99_ms": sorted(lat)[max(0, int(len(lat) * 0.99) - 1)]}
    if workload == "gpt2_generate":
        out["lat"] = [round(x, 2) for x in lat]
    return out


def in_window(trainer, t0, t1):
    """Trainer steps/s over [t0, t1]: steps ending in it, from the phase's start
    and its steps' latencies (steps run back to back)."""
    end, n = trainer["t0"], 0
    for ms in trainer["lat"]:
        end += ms / 1e3
        n += t0 <= end <= t1
    return n / (t1 - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vgpu", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--logs", default=os.devnull)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=7.0)
    ap.add_argument("--lead", type=float, default=1.0)
    ap.add_argument("--conditions", default="solo-service solo-trainer timeslice-30-60 mps-30-60 mps-100-70")
    args = ap.parse_args()
    conds = args.conditions.split()
    unknown = [c for c in conds if c not in CONDITIONS]
    if unknown:
        sys.exit(f"rounds.py: unknown condition(s) {unknown}; known: {' '.join(CONDITIONS)}")
    names = sorted({p for c in conds for p in CONDITIONS[c] if p})
    logs = open(args.logs, "a")
    t_start = time.time()
    procs = {n: Proc(n, args, logs) for n in names}
    dead = set()
    for n, p in procs.items():
        try:
            if p.line(max(1.0, t_start + 300 - time.time())) != "ready":
                raise RuntimeError(f"{n}: did not say ready")
        except RuntimeError as e:
            print(f"rounds.py: {e}", file=sys.stderr)
            dead.add(n)
    print(f"rounds.py: {len(procs) - len(dead)} of {len(procs)} processes warm after "
          f"{time.time() - t_start:.0f} s", file=sys.stderr)

    with open(args.out, "a") as out:
        def keep(key, value):
            out.write(f"{key} {json.dumps(value)}\n")
            out.flush()

        for k in range(args.first, args.first + args.rounds):
            order = conds[:]
            random.shuffle(order)
            t_round = time.time()
            for c in order:
                svc, trn = CONDITIONS[c]
                if {svc, trn} & dead:
                    continue
                try:
                    if svc and trn:
                        procs[trn].send(args.seconds + 2 * args.lead)
                        time.sleep(args.lead)
                        procs[svc].send(args.seconds)
                        s = json.loads(procs[svc].line(args.seconds + 120))
                        t = json.loads(procs[trn].line(2 * args.lead + 120))
                        ts = summary(t, "gpt2_train")
                        ts["rate_in_window"] = in_window(t, s["t0"], s["t1"])
                        ts["covers_window"] = t["t0"] <= s["t0"] and t["t1"] >= s["t1"]
                        keep(f"r{k}/{c}.service", summary(s, "gpt2_generate"))
                        keep(f"r{k}/{c}.trainer", ts)
                    else:
                        one = svc or trn
                        procs[one].send(args.seconds)
                        r = json.loads(procs[one].line(args.seconds + 120))
                        keep(f"r{k}/{c}", summary(r, PROCS[one][0]))
                except (RuntimeError, ValueError, OSError) as e:
                    # A process that failed to answer may answer late: never ask it again.
                    print(f"rounds.py: r{k} {c}: {e}", file=sys.stderr)
                    dead |= {p for p in (svc, trn) if p}
            print(f"rounds.py: round {k} ({' '.join(order)}) in {time.time() - t_round:.0f} s",
                  file=sys.stderr)
    for p in procs.values():
        p.quit()
    for p in procs.values():
        try:
            p.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
