# Exploration run before the SM limiter: what CUDA events show of launches
# alone and beside another process (results in results-h200.txt).
set -x
cd "$(dirname "$0")"
nvcc -O2 -arch=sm_90 -o /tmp/timing timing.cu && /tmp/timing
python3 contention.py alone 0
python3 contention.py alone 0.0005
python3 contention.py hog 30 & sleep 3
python3 contention.py contended 0
python3 contention.py contended 0.0005
python3 contention.py contended 0.002
wait
nvidia-smi -q | grep -i -A3 "compute mode\|timeslice" | head
