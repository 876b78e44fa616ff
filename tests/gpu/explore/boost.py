"""How the GPU's clock and power respond to a duty-cycled GEMM (no libvgpu.so).

    python3 tests/gpu/explore/boost.py

Why: a lone container throttled to a share of GPU time runs its kernels faster
than an unthrottled one (the GPU has power to spare and boosts), so its
throughput exceeds its share. This measures, per duty cycle, throughput
relative to flat-out, power, SM clock and NVML utilisation, plus the power
limits and how fast the clock falls when a burst starts after idle: the data
for choosing how the limiter corrects for it.
"""
import threading
import time

import pynvml
import torch

from gemm import gemm

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
SW_POWER_CAP = 0x4
FI_POWER_AVERAGE = getattr(pynvml, "NVML_FI_DEV_POWER_AVERAGE", 185)
FI_POWER_INSTANT = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", 186)


def field_power(fid):
    try:
        v = pynvml.nvmlDeviceGetFieldValues(h, [fid])[0]
        if v.nvmlReturn != 0:
            return None
        return v.value.uiVal / 1000.0
    except Exception:  # noqa: BLE001 - older drivers lack the field
        return None


def facts():
    out = {"name": pynvml.nvmlDeviceGetName(h), "driver": pynvml.nvmlSystemGetDriverVersion()}
    for k, f in [("enforced_limit_w", pynvml.nvmlDeviceGetEnforcedPowerLimit),
                 ("management_limit_w", pynvml.nvmlDeviceGetPowerManagementLimit),
                 ("default_limit_w", pynvml.nvmlDeviceGetPowerManagementDefaultLimit)]:
        try:
            out[k] = f(h) / 1000.0
        except Exception as e:  # noqa: BLE001
            out[k] = str(e)
    for k, c in [("max_sm_mhz", pynvml.NVML_CLOCK_SM), ("max_mem_mhz", pynvml.NVML_CLOCK_MEM)]:
        out[k] = pynvml.nvmlDeviceGetMaxClockInfo(h, c)
    return out


class Sampler:
    def __init__(self, period=0.02):
        self.period, self.rows, self.stop = period, [], False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop:
            t = time.time()
            self.rows.append((t, pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                              pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                              field_power(FI_POWER_INSTANT),
                              int(bool(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) & SW_POWER_CAP)),
                              pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
            time.sleep(self.period)

    def window(self, t0, t1):
        r = [x for x in self.rows if t0 <= x[0] <= t1]
        if not r:
            return {}
        avg = lambda i: sum(x[i] for x in r if x[i] is not None) / max(1, sum(1 for x in r if x[i] is not None))
        return {"clock": avg(1), "power": avg(2), "power_inst": avg(3), "capped": avg(4), "util": avg(5)}


s = Sampler()
print("facts", facts())


def fmt(d):
    return " ".join(f"{k}={v:.1f}" for k, v in d.items())


# Idle power.
time.sleep(2.0)
t0 = time.time()
time.sleep(1.5)
print("idle", fmt(s.window(t0, time.time())))

# How fast kernels slow down when a flat-out burst starts after idle.
time.sleep(2.0)
ev = [torch.cuda.Event(enable_timing=True) for _ in range(2001)]
t0 = time.time()
ev[0].record()
for i in range(2000):
    gemm()
    ev[i + 1].record()
torch.cuda.synchronize()
ks = [ev[i].elapsed_time(ev[i + 1]) * 1000 for i in range(2000)]
print("burst-after-idle kernel us by 100-kernel block:",
      " ".join(f"{sum(ks[j:j + 100]) / 100:.0f}" for j in range(0, 2000, 100)))
print("burst window", fmt(s.window(t0, time.time())))


def run(duty, seconds=4.0, period=0.010):
    """duty 1.0 = flat out. Returns GEMMs/s, mean kernel us (events), NVML window."""
    per_burst = max(1, round(duty * period / 215e-6)) if duty < 1 else 32
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(64)]
    kt, done, k = [], 0, 0
    torch.cuda.synchronize()
    t0 = time.time()
    next_t = t0
    while time.time() - t0 < seconds:
        e = evs[k % 64]
        e[0].record()
        for _ in range(per_burst):
            gemm()
        e[1].record()
        torch.cuda.synchronize()
        kt.append(e[0].elapsed_time(e[1]) * 1000 / per_burst)
        done += per_burst
        k += 1
        if duty < 1:
            next_t += period
            d = next_t - time.time()
            if d > 0:
                time.sleep(d)
            else:
                next_t = time.time()
    t1 = time.time()
    kt.sort()
    return done / (t1 - t0), kt[len(kt) // 2], s.window(t0 + 1.0, t1)


full, fk, fw = run(1.0)
print(f"duty 1.00 rate {full:.0f}/s kernel {fk:.1f}us {fmt(fw)}")
for duty in (0.1, 0.3, 0.5, 0.7, 0.9, 1.0, 0.3, 0.5):
    r, k, w = run(duty)
    print(f"duty {duty:.2f} rate {r:.0f}/s rel {r / full:.3f} busy {r * k * 1e-6:.3f} "
          f"kernel {k:.1f}us speedup {fk / k:.3f} {fmt(w)}")
s.stop = True
