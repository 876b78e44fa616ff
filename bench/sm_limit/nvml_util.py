"""Records GPU 0's utilisation as NVML reports it (what nvidia-smi's GPU-Util
shows: the share of each sample period during which a kernel ran), with the
driver's own timestamps, until killed:

    python3 nvml_util.py OUT.tsv

Lines: unix_seconds  util_percent  sm_clock_mhz  power_w. The driver's raw
samples (nvmlDeviceGetSamples) where it keeps them, else the utilisation rate
polled every 100 ms.
"""
import sys
import time

import pynvml

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
last = 0
raw = True
with open(sys.argv[1], "w", buffering=1) as f:
    while True:
        clock = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        power = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
        if raw:
            try:
                _, samples = pynvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, last)
                for s in samples:
                    if s.timeStamp > last:
                        last = s.timeStamp
                        f.write(f"{s.timeStamp / 1e6:.3f}\t{s.sampleValue.uiVal}\t{clock}\t{power:.1f}\n")
            except pynvml.NVMLError:
                raw = False
        if not raw:
            u = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
            f.write(f"{time.time():.3f}\t{u}\t{clock}\t{power:.1f}\n")
        time.sleep(0.1 if not raw else 0.5)
