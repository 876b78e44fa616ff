"""Live resize on a real GPU, through `vgpu run` and `vgpu resize` (the same
library path a pod's resize takes: the limits file replaced under running
processes). Run by tests/gpu/resize.sh; prints PASS/FAIL lines.

  memory: a PyTorch job at 4 GiB is refused past it, is resized to 8 GiB while
          it runs, and then holds 7 GiB.
  sm:     a GEMM job at 30 % runs at NVML GPU-Util 30 +- 3; resized to 60 % it
          runs at 60 +- 3 within 2 s of the resize.
"""
import os
import subprocess
import sys
import tempfile
import time

from mg_common import NvmlSampler, outside_env

VGPU = os.environ["VGPU_BIN"]
LIB = os.environ["VGPU_LIB"]
HOOK = tempfile.mkdtemp(prefix="vgpu-resize-")
fails = 0


def check(ok, what):
    global fails
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    fails += 0 if ok else 1


def run_job(name, opts, prog, *args):
    return subprocess.Popen([VGPU, "run", "--hook-path", HOOK, "--library", LIB, "--gpu", "0",
                             "--name", name] + opts + ["--", sys.executable, "-c", prog] + list(args),
                            stdout=subprocess.PIPE, text=True, env=outside_env())


def resize(name, *opts):
    r = subprocess.run([VGPU, "resize", name, "--hook-path", HOOK] + list(opts),
                       capture_output=True, text=True, env=outside_env())
    print(r.stdout.strip(), r.stderr.strip(), flush=True)
    return r.returncode == 0


def wait_line(p, text):
    for line in p.stdout:
        print("  job: " + line.rstrip(), flush=True)
        if text in line:
            return True
    return False


MEM = r'''
import os, sys, time, torch
go = sys.argv[1]
held = []
def fill(upto_mib):
    try:
        while len(held) * 256 < upto_mib:
            held.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError:
        pass
    return len(held) * 256
print(f"at 4 GiB: held {fill(7168)} MiB", flush=True)
print("ready", flush=True)
while not os.path.exists(go): time.sleep(0.01)
t0 = time.time()
while torch.cuda.mem_get_info()[1] < (8 << 30) and time.time() - t0 < 3: time.sleep(0.01)
print(f"total {torch.cuda.mem_get_info()[1] >> 20} MiB after {1000 * (time.time() - t0):.0f} ms",
      flush=True)
print(f"at 8 GiB: held {fill(7168)} MiB", flush=True)
'''

GEMM = r'''
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
a @ b; torch.cuda.synchronize()
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(4): a @ b
    torch.cuda.synchronize()
print("done", flush=True)
'''

want = os.environ.get("RESIZE_ONLY", "")

if want in ("", "memory"):
    print("\n## PyTorch at 4 GiB resized to 8 GiB holds 7 GiB", flush=True)
    go = os.path.join(HOOK, "go")
    p = run_job("mem", ["--memory", "4g"], MEM, go)
    ok = wait_line(p, "ready")
    ok = ok and resize("mem", "--memory", "8g")
    open(go, "w").close()
    out = p.communicate(timeout=60)[0]
    print("  job: " + out.replace("\n", "\n  job: ").rstrip(), flush=True)
    check(ok and p.returncode == 0 and "at 8 GiB: held 7168 MiB" in out,
          "memory 4 GiB -> 8 GiB: allocations past the old limit succeed (7 GiB held)")
    check("total 8192 MiB" in out, "cudaMemGetInfo shows the new 8 GiB total within 1 s")

if want in ("", "sm"):
    print("\n## GEMM at 30 % resized to 60 %: NVML GPU-Util 30 +- 3 -> 60 +- 3 within 2 s", flush=True)
    sampler = NvmlSampler([0], os.path.join(HOOK, "util.txt"))
    p = run_job("gemm", ["--cores", "30"], GEMM, "16")
    ok = wait_line(p, "ready")
    time.sleep(6)  # the window measured below, not an assertion
    before = sampler.mean(0, time.time() - 4, time.time())
    t_r = time.time()
    ok = ok and resize("gemm", "--cores", "60")
    time.sleep(6)
    by2 = sampler.mean(0, t_r + 1.0, t_r + 2.0)
    after = sampler.mean(0, t_r + 2.0, t_r + 6.0)
    p.communicate(timeout=60)
    sampler.stop()
    print(f"  GPU-Util: {before:.1f} at 30 % (4 s); {by2:.1f} in [+1 s, +2 s] after the resize; "
          f"{after:.1f} at 60 % (4 s)", flush=True)
    check(ok and abs(before - 30) <= 3, "GPU-Util 30 +- 3 at 30 %")
    check(abs(by2 - 60) <= 3, "GPU-Util 60 +- 3 within 2 s of the resize")
    check(abs(after - 60) <= 3, "GPU-Util 60 +- 3 at 60 %")

print(f"\n# {fails} check(s) failed", flush=True)
sys.exit(1 if fails else 0)
