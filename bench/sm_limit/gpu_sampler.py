"""Samples GPU 0's SM clock and power every 200 ms until killed:
    python3 gpu_sampler.py OUT.tsv
Lines: unix_time  sm_clock_mhz  power_w  power_cap_active(0/1)  gpu_util_%
(gpu_util: NVML's share of the last sample period with a kernel running)
"""
import sys
import time

import pynvml

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
SW_POWER_CAP = 0x4
with open(sys.argv[1], "w", buffering=1) as f:
    while True:
        clock = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        power = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
        reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
        f.write(f"{time.time():.3f}\t{clock}\t{power:.1f}\t{int(bool(reasons & SW_POWER_CAP))}"
                f"\t{util}\n")
        time.sleep(0.2)
