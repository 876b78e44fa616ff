"""Two PyTorch processes share one container limit (one state file).

Each child allocates 64 MiB tensors until OutOfMemoryError, then waits; the
parent then reads the state file and NVML and checks that together they never
went over the limit. Prints one JSON object; exits 1 if a check fails.
"""
import json
import os
import subprocess
import sys
import time

MiB = 1 << 20
CHILD = r"""
import sys, torch
torch.empty(1, device='cuda:0')  # each process has its context before either fills
print('ready', flush=True)
sys.stdin.readline()
t = []
while True:
    try:
        t.append(torch.empty(64 << 20, dtype=torch.uint8, device='cuda:0'))
    except torch.cuda.OutOfMemoryError:
        break
torch.cuda.synchronize()
print(len(t) * 64, flush=True)
sys.stdin.read()
"""


def parse_size(s):
    units = {"k": 10, "m": 20, "g": 30}
    s = s.strip().lower()
    return int(s[:-1]) << units[s[-1]] if s[-1] in units else int(s)


def main():
    limit = parse_size(os.environ["CUDA_DEVICE_MEMORY_LIMIT"])
    kids = [subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for k in kids:
        assert k.stdout.readline().strip() == "ready"
    for k in kids:
        k.stdin.write("go\n")
        k.stdin.flush()
    got_mib = [int(k.stdout.readline()) for k in kids]
    time.sleep(0.5)
    snap = json.loads(subprocess.run([os.environ["VGPU_BIN"], "inspect", "--json",
                                      os.environ["CUDA_DEVICE_MEMORY_SHARED_CACHE"]],
                                     capture_output=True, text=True, check=True).stdout)
    charged = snap["devices"][0]["used_bytes"]
    pids = {k.pid for k in kids}
    smi = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    physical = sum(int(u) * MiB for p, u in (l.split(",") for l in smi.splitlines())
                   if int(p) in pids)
    for k in kids:
        k.stdin.close()
        k.wait()
    result = {"limit": limit, "tensors_mib_each": got_mib, "charged_together": charged,
              "nvml_physical_together": physical,
              "checks": {"charged <= limit": charged <= limit,
                         "physical <= limit": physical <= limit,
                         "both got memory": all(g > 0 for g in got_mib)}}
    result["ok"] = all(result["checks"].values())
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
