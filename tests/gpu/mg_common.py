"""Helpers shared by the programs of tests/gpu/multi_gpu.sh (imported, not run).

Each program prints one line "result key=value ..." that the shell judges.
Nothing here imports torch: the launchers stay light and CUDA-free, and the
processes they spawn import it themselves.
"""
import os
import socket
import subprocess
import sys
import time

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))

# NVLink multicast can take the host's GPUs out of service for everyone on the
# device machines: off in NCCL, PyTorch and NVSHMEM, whatever the caller set.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NO_MULTICAST)


def parse_size(s):
    """'4g', '3000m', '512k' or bytes (binary units, as libvgpu.so reads them)."""
    units = {"k": 10, "m": 20, "g": 30, "t": 40}
    s = s.strip().lower()
    return int(s[:-1]) << units[s[-1]] if s and s[-1] in units else int(s)


def device_limit(index):
    """The memory limit libvgpu.so applies to device INDEX (bytes), or None."""
    for key in (f"CUDA_DEVICE_MEMORY_LIMIT_{index}", "CUDA_DEVICE_MEMORY_LIMIT"):
        if os.environ.get(key):
            return parse_size(os.environ[key])
    return None


def under_library():
    return "libvgpu" in os.environ.get("LD_PRELOAD", "")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def outside_env():
    """The environment of an observer outside the container: no libvgpu.so."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def emit(**kv):
    """The one machine-readable line; values must not contain spaces."""
    def text(v):
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
        return str(v).replace(" ", "_") if v is not None else "none"
    print("result " + " ".join(f"{k}={text(v)}" for k, v in kv.items()), flush=True)


def short_error(e):
    """An exception as one token: its class, and the first words of its message."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}:{msg[:80]}".replace(" ", "_").replace("=", ":")


def oom_kind(e):
    """'class' if a torch.OutOfMemoryError is in the exception's chain, 'message'
    if only a message says "out of memory" (a CUDA call's error surfaced as a
    RuntimeError), else ''."""
    seen, kind = set(), ""
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__name__ == "OutOfMemoryError":
            return "class"
        if "out of memory" in str(e).lower():
            kind = "message"
        e = e.__cause__ or e.__context__
    return kind


def process_memory(pids):
    """{gpu_index: bytes} the driver holds for PIDS, by NVML (nvidia-smi run
    outside the library, so it shows what is physically used)."""
    env = outside_env()
    q = lambda what: subprocess.run(["nvidia-smi", f"--query-{what}", "--format=csv,noheader,nounits"],
                                    capture_output=True, text=True, env=env).stdout
    index = {}
    for line in q("gpu=index,uuid").splitlines():
        i, uuid = [x.strip() for x in line.split(",")]
        index[uuid] = int(i)
    used = {}
    for line in q("compute-apps=pid,gpu_uuid,used_memory").splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit() and int(parts[0]) in pids:
            g = index.get(parts[1], -1)
            used[g] = used.get(g, 0) + int(parts[2]) * MiB
    return used


def state_file(path=None):
    """`vgpu inspect --json` of the container's state file, or None."""
    path = path or os.environ.get("CUDA_DEVICE_MEMORY_SHARED_CACHE")
    vgpu = os.environ.get("VGPU_BIN")
    if not (path and vgpu and os.path.exists(path)):
        return None
    import json
    r = subprocess.run([vgpu, "inspect", "--json", path], capture_output=True, text=True,
                       env=outside_env())
    return json.loads(r.stdout) if r.returncode == 0 else None


class NvmlSampler:
    """GPU utilisation by NVML (nvidia-smi's GPU-Util) of GPUS, sampled in a
    separate process outside the library: the driver's raw samples where it
    keeps them, else the utilisation rate polled every 100 ms."""

    def __init__(self, gpus, path):
        self.path = path
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "mg_common.py"),
                                      "sample", path] + [str(g) for g in gpus],
                                     env=outside_env(), stderr=subprocess.DEVNULL)

    def stop(self):
        time.sleep(0.3)  # the last samples of the window
        self.proc.terminate()
        self.proc.wait()

    def mean(self, gpu, t0, t1):
        """Mean utilisation (percent) of GPU over the Unix window [t0, t1]."""
        v = []
        try:
            for line in open(self.path):
                t, g, u = line.split()
                if int(g) == gpu and t0 <= float(t) <= t1:
                    v.append(float(u))
        except OSError:
            pass
        return sum(v) / len(v) if v else None


def _sample(path, gpus):
    import pynvml
    pynvml.nvmlInit()
    handles = {g: pynvml.nvmlDeviceGetHandleByIndex(g) for g in gpus}
    last = {g: 0 for g in gpus}
    raw = True
    with open(path, "w", buffering=1) as f:
        while True:
            for g, h in handles.items():
                if raw:
                    try:
                        _, samples = pynvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES,
                                                                 last[g])
                        for s in samples:
                            if s.timeStamp > last[g]:
                                last[g] = s.timeStamp
                                f.write(f"{s.timeStamp / 1e6:.3f} {g} {s.sampleValue.uiVal}\n")
                        continue
                    except pynvml.NVMLError:
                        raw = False
                f.write(f"{time.time():.3f} {g} {pynvml.nvmlDeviceGetUtilizationRates(h).gpu}\n")
            time.sleep(0.2 if raw else 0.1)


if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "sample":
    _sample(sys.argv[2], [int(g) for g in sys.argv[3:]])
