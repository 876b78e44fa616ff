"""PyTorch under libvgpu.so: allocate until torch.cuda.OutOfMemoryError.

Run with CUDA_DEVICE_MEMORY_LIMIT (e.g. 4g) and CUDA_DEVICE_MEMORY_SHARED_CACHE
set and LD_PRELOAD=libvgpu.so. Prints one JSON object; exits 1 if a check fails:
  - what PyTorch got is no more than the limit,
  - and no less than limit - context - 2 MiB (the context as the state file charges it),
  - torch.cuda.mem_get_info() and get_device_properties() report the limit,
  - the error is PyTorch's normal OutOfMemoryError.
"""
import json
import os
import subprocess
import sys

import torch

MiB = 1 << 20


def parse_size(s):
    units = {"k": 10, "m": 20, "g": 30}
    s = s.strip().lower()
    return int(s[:-1]) << units[s[-1]] if s[-1] in units else int(s)


def state_file_charge():
    out = subprocess.run([os.environ["VGPU_BIN"], "inspect", "--json",
                          os.environ["CUDA_DEVICE_MEMORY_SHARED_CACHE"]],
                         capture_output=True, text=True, check=True).stdout
    for p in json.loads(out)["processes"]:
        if p["pid"] == os.getpid():
            d = p["devices"][0] if p["devices"] else {}
            return d.get("total_bytes", 0), d.get("context_bytes", 0)
    return 0, 0


def nvml_process_used():
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        pid, used = [x.strip() for x in line.split(",")]
        if int(pid) == os.getpid():
            return int(used) * MiB
    return None


def main():
    limit = parse_size(os.environ["CUDA_DEVICE_MEMORY_LIMIT"])
    dev = torch.device("cuda:0")
    torch.cuda.init()
    torch.empty(1, device=dev)  # context
    free0, total0 = torch.cuda.mem_get_info()
    props_total = torch.cuda.get_device_properties(0).total_memory
    # Halve the request on each refusal, down into PyTorch's small-block pool
    # (requests of 1 MiB and less share 2 MiB blocks): PyTorch rounds requests
    # between 1 and 10 MiB up to 20 MiB blocks, so only small ones fill the end.
    tensors, allocated, size, error = [], 0, 64 * MiB, None
    while size >= 512 * 1024:
        try:
            tensors.append(torch.empty(size, dtype=torch.uint8, device=dev))
            allocated += size
        except torch.cuda.OutOfMemoryError as e:
            error = type(e).__name__
            size //= 2
    torch.cuda.synchronize()
    charged, context = state_file_charge()
    free1, total1 = torch.cuda.mem_get_info()
    result = {
        "limit": limit,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "mem_get_info_total": total0,
        "mem_get_info_free_at_start": free0,
        "device_properties_total": props_total,
        "allocated_by_tensors": allocated,
        "torch_reserved": torch.cuda.memory_reserved(),
        "charged_in_state_file": charged,
        "context_charged": context,
        "nvml_process_used": nvml_process_used(),
        "mem_get_info_free_when_full": free1,
        "error": error,
    }
    checks = {
        "allocated <= limit": allocated <= limit,
        "reserved <= limit": result["torch_reserved"] <= limit,
        "charged <= limit": charged <= limit,
        "allocated >= limit - context - 2 MiB": allocated >= limit - context - 2 * MiB,
        "mem_get_info total == limit": total0 == limit,
        "device properties total == limit": props_total == limit,
        "error is OutOfMemoryError": error == "OutOfMemoryError",
    }
    result["checks"] = checks
    result["ok"] = all(checks.values())
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
