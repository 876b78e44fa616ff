# Exploration: bracketed GEMM times alone and beside another process.
import sys, time, torch, statistics
mode = sys.argv[1]
n = 4096
a = torch.randn(n, n, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
for _ in range(20): a @ b
torch.cuda.synchronize()
if mode == "hog":
    end = time.time() + float(sys.argv[2])
    while time.time() < end:
        for _ in range(50): c = a @ b
        torch.cuda.synchronize()
    sys.exit(0)
# measure: rate, and bracketed times with pacing gap (sleep s between launches)
gap = float(sys.argv[2])
t0 = time.time(); k = 0
while time.time() - t0 < 2:
    for _ in range(50): c = a @ b
    torch.cuda.synchronize(); k += 50
print(f"[{mode}] free-running rate {k/(time.time()-t0):.1f} it/s")
evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(400)]
t0 = time.time()
for s, e in evs:
    s.record(); c = a @ b; e.record()
    if gap: time.sleep(gap)
torch.cuda.synchronize()
wall = time.time() - t0
v = sorted(s.elapsed_time(e) * 1000 for s, e in evs)
print(f"[{mode}] gap {gap*1e3:.2f} ms: wall/it {wall/400*1e6:.1f} us; bracket us p10 {v[40]:.1f} p50 {v[200]:.1f} p90 {v[360]:.1f} max {v[-1]:.1f}; frac>1.5*p10 {sum(x>1.5*v[40] for x in v)/400:.2f}")
w = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(100)]
for s, e in w:
    s.record()
    for _ in range(8): c = a @ b
    e.record()
torch.cuda.synchronize()
v = sorted(s.elapsed_time(e) * 1000 / 8 for s, e in w)
print(f"[{mode}] window8 per-it us p10 {v[10]:.1f} p50 {v[50]:.1f} p90 {v[90]:.1f}")
