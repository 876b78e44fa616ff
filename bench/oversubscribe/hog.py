"""Holds all but --leave-gib of GPU 0's memory until killed (bench/oversubscribe/run.sh).

Run without libvgpu.so: it stands for other tenants filling the GPU.
"""
import argparse
import pathlib
import signal
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--leave-gib", type=float, default=4.0)
    p.add_argument("--ready", required=True, help="file created once the memory is held")
    a = p.parse_args()
    torch.cuda.init()
    free, _ = torch.cuda.mem_get_info(0)
    take = free - int(a.leave_gib * (1 << 30))
    if take <= 0:
        raise SystemExit(f"the GPU has only {free} bytes free")
    held = torch.empty(take, dtype=torch.uint8, device="cuda:0")
    held.fill_(1)  # make sure it is backed
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info(0)
    print(f"held={take} free_after={free_after}", flush=True)
    pathlib.Path(a.ready).touch()
    signal.signal(signal.SIGTERM, lambda *_: raise_exit())
    while True:
        time.sleep(1)


def raise_exit() -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    main()
