"""Tensor-parallel (TP) greedy generation of a real transformer, bare and under
libvgpu.so's memory limit, in interleaved rounds:

    python3 tests/gpu/tp_generate.py compare --nproc 2 --lib libvgpu.so --limit 8g \
        --state DIR/c.cache [--rounds 4] [--calls 3]

A `transformers` Llama (LlamaConfig, 12 layers, hidden 1024, random weights
from a fixed seed: no downloads) sharded by hand across --nproc GPUs with
torch.distributed: q/k/v and gate/up projections split by output features
(whole heads), o_proj and down_proj by input features and all-reduced after
(Megatron's column/row parallel layers). Greedy `generate` of 32 tokens for a
batch of 4 prompts of 32 tokens, and a prefill: the decoder over 8 prompts
of 1,024 tokens. Generation at this size is bound by the host's launch rate
(about 14 ms of Python per step); the prefill does far more GPU work per
launch (about 20 ms for the 8,192 tokens on an H200), though the host still
shows in it.

`compare` starts three such TP groups at once (each a launcher and its
ranks): "bare" and "bare2" without the library, "limited" with
LD_PRELOAD=--lib, CUDA_DEVICE_MEMORY_LIMIT=--limit and one state file for its
ranks (one container). Once all are warm, each round runs --calls generate
calls in each group, one call at a time and the groups in a new random order
for every call, while the others wait idle: the host's drift falls on all
alike, and bare2 against bare (the A/A) shows what is noise. A group's speed
in a round is that of its median call. Generation at this size is bound by
the host's launch rate, so rank R of every group runs on the same two CPUs
(where the machine has 2 x nproc + 1 of them; cpus= says which): which cores
the scheduler happened to give a group would otherwise move its speed by more
than the 3 % judged. Prints one line:
  result test=tp ok= ranks_equal= (each group's ranks produced the same tokens)
  tokens_equal= (every group and call produced the same tokens) tp_err= (the
  sharded model's last logits against the whole model's, on rank 0, relative)
  ratio= (median over rounds of limited / bare tokens/s) ratio_min= ratio_max=
  aa= (bare2 / bare) bare_tok_s= limited_tok_s= tok_s_bare= tok_s_bare2=
  tok_s_limited= (each round's figures) prefill_ratio= prefill_aa=
  prefill_bare_tok_s= prefill_limited_tok_s= (the same for the prefill)
  cpus= (each rank's CPUs) ...
`group` is one TP group, driven on stdin ("gen K", "quit"); it answers JSON lines.
"""
import argparse
import hashlib
import json
import multiprocessing as mp
import os
import random
import select
import statistics
import subprocess
import sys
import time

import mg_common as mg

CONFIG = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=12,
              num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=512,
              tie_word_embeddings=False)
BATCH, PROMPT, NEW = 4, 32, 32
PREFILL_BATCH, PREFILL_LEN, PREFILL_REPS = 8, 1024, 5


# ---- one rank -------------------------------------------------------------

def shard(model, rank, n, dist):
    """Column/row-parallel split of every decoder layer, in place."""
    import torch

    def linear(lin, dim):
        w = lin.weight.data.chunk(n, dim=dim)[rank].contiguous()
        new = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype, device=w.device)
        new.weight.data = w
        return new

    class RowParallel(torch.nn.Module):
        def __init__(self, lin):
            super().__init__()
            self.lin = lin

        @property
        def weight(self):  # for code that reads the projection's dtype or device
            return self.lin.weight

        def forward(self, x):
            y = self.lin(x)
            dist.all_reduce(y)
            return y

    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        a.q_proj, a.k_proj, a.v_proj = (linear(a.q_proj, 0), linear(a.k_proj, 0), linear(a.v_proj, 0))
        a.o_proj = RowParallel(linear(a.o_proj, 1))
        m.gate_proj, m.up_proj = linear(m.gate_proj, 0), linear(m.up_proj, 0)
        m.down_proj = RowParallel(linear(m.down_proj, 1))
        # Versions of transformers that keep head counts on the module (older
        # ones reshape with them) see this rank's heads; newer ones infer them.
        for attr in ("num_heads", "num_key_value_heads"):
            if isinstance(getattr(a, attr, None), int):
                setattr(a, attr, getattr(a, attr) // n)
        if isinstance(getattr(a, "hidden_size", None), int):
            a.hidden_size //= n


CPUS_PER_RANK = 2


def rank_cpus(rank, n):
    """The CPUs rank `rank` of every group runs on, or None where too few.
    CPU 0 is left to the system (interrupts, the driver script)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < CPUS_PER_RANK * n + 1:
        return None
    return cpus[1 + CPUS_PER_RANK * rank:1 + CPUS_PER_RANK * (rank + 1)]


def rank_main(rank, n, port, cmds, results):
    try:
        cpus = rank_cpus(rank, n)
        if cpus:
            os.sched_setaffinity(0, cpus)  # before torch starts its threads
        run_rank(rank, n, port, cmds, results)
    except BaseException as e:
        results.put((rank, {"error": mg.short_error(e)}))


def run_rank(rank, n, port, cmds, results):
    import torch
    import torch.distributed as dist
    import transformers
    transformers.logging.set_verbosity_error()
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)

    torch.manual_seed(0)  # the same weights in every rank and every group
    cfg = transformers.LlamaConfig(**CONFIG)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, cfg.vocab_size, (BATCH, PROMPT), generator=g).to(dev)
    mask = torch.ones_like(ids)
    ref = None
    with torch.no_grad():
        if rank == 0:  # the whole model once, to check the sharding against
            model.to(dev)
            ref = model(input_ids=ids, attention_mask=mask).logits[:, -1].float()
            model.to("cpu")
        shard(model, rank, n, dist)
        model.to(dev)
        tp = model(input_ids=ids, attention_mask=mask).logits[:, -1].float()
    tp_err = float((tp - ref).abs().max() / ref.abs().max()) if ref is not None else None
    del ref, tp
    torch.cuda.empty_cache()

    def generate():
        with torch.no_grad():
            return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW,
                                  min_new_tokens=NEW, do_sample=False, pad_token_id=0)

    long_ids = torch.randint(3, cfg.vocab_size, (PREFILL_BATCH, PREFILL_LEN), generator=g).to(dev)

    def prefill():
        """Seconds of the decoder over the long prompts, the median of a few."""
        times = []
        with torch.no_grad():
            for _ in range(PREFILL_REPS):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                model.model(input_ids=long_ids, use_cache=False)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    generate()  # warm-up
    prefill()
    torch.cuda.synchronize()
    results.put((rank, {"ready": True, "tp_err": tp_err,
                        "cpus": "+".join(map(str, sorted(os.sched_getaffinity(0))))}))
    while True:
        k = cmds.get()
        if k is None:
            break
        dist.barrier()
        torch.cuda.synchronize()
        calls = []
        for _ in range(k):
            t0 = time.perf_counter()
            out = generate()
            torch.cuda.synchronize()
            calls.append(time.perf_counter() - t0)
        tokens = out[:, PROMPT:].cpu()
        dist.barrier()
        prefill_s = prefill()
        # The median call: one call held up by the host (a busy neighbour of
        # the VM, a collection) does not move it.
        results.put((rank, {"elapsed": sum(calls), "tok_s": BATCH * NEW / statistics.median(calls),
                            "prefill_tok_s": PREFILL_BATCH * PREFILL_LEN / prefill_s,
                            "sha": hashlib.sha1(tokens.numpy().tobytes()).hexdigest()[:12],
                            "head": tokens[0, :6].tolist()}))
    dist.destroy_process_group()


def group(n):
    """One TP group: spawns the ranks, relays commands, answers JSON lines."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    cmds = [ctx.Queue() for _ in range(n)]
    port = mg.free_port()
    procs = [ctx.Process(target=rank_main, args=(r, n, port, cmds[r], results)) for r in range(n)]
    for p in procs:
        p.start()

    def gather():
        got = {}
        while len(got) < n:
            r, res = results.get(timeout=300)
            got[r] = res
        errors = [f"rank{r}:{v['error']}" for r, v in sorted(got.items()) if "error" in v]
        return got, errors

    got, errors = gather()
    print(json.dumps({"error": ";".join(errors)} if errors else
                     {"ready": True, "tp_err": got[0]["tp_err"],
                      "cpus": "/".join(got[r]["cpus"] for r in range(n))}), flush=True)
    while not errors:
        line = sys.stdin.readline().split()
        if not line or line[0] == "quit":
            break
        for q in cmds:
            q.put(int(line[1]))
        got, errors = gather()
        if errors:
            print(json.dumps({"error": ";".join(errors)}), flush=True)
            break
        print(json.dumps({"tok_s": got[0]["tok_s"], "prefill_tok_s": got[0]["prefill_tok_s"],
                          "elapsed": got[0]["elapsed"],
                          "shas": [got[r]["sha"] for r in range(n)], "head": got[0]["head"]}),
              flush=True)
    for q in cmds:
        q.put(None)
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()


# ---- the driver -------------------------------------------------------------

def compare(args):
    base = mg.outside_env()
    limited = dict(base, LD_PRELOAD=args.lib, CUDA_DEVICE_MEMORY_LIMIT=args.limit,
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=args.state)
    envs = {"bare": base, "bare2": dict(base), "limited": limited}
    errs = {name: open(f"{args.state}.{name}.err", "w+") for name in envs}
    procs = {name: subprocess.Popen([sys.executable, os.path.abspath(__file__), "group",
                                     "--nproc", str(args.nproc)], env=env, text=True,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errs[name])
             for name, env in envs.items()}

    def answer(name, timeout=300):
        p = procs[name]
        ready, _, _ = select.select([p.stdout], [], [], timeout)
        line = p.stdout.readline() if ready else ""
        if not line:
            errs[name].seek(0)
            tail = errs[name].read()[-1500:]
            raise RuntimeError(f"{name}: no answer (exit {p.poll()}); stderr tail:\n{tail}")
        res = json.loads(line)
        if "error" in res:
            raise RuntimeError(f"{name}: {res['error']}")
        return res

    rates = {name: [] for name in envs}
    prefills = {name: [] for name in envs}
    shas, ranks_equal, tp_err, cpus = set(), True, None, set()
    try:
        for name in envs:
            r = answer(name)
            cpus.add(r["cpus"])
            if name == "bare":
                tp_err = r["tp_err"]
        for _ in range(args.rounds):
            calls = {name: [] for name in envs}
            pcalls = {name: [] for name in envs}
            for _ in range(args.calls):
                order = list(envs)
                random.shuffle(order)
                for name in order:
                    procs[name].stdin.write("gen 1\n")
                    procs[name].stdin.flush()
                    r = answer(name)
                    calls[name].append(r["tok_s"])
                    pcalls[name].append(r["prefill_tok_s"])
                    ranks_equal &= len(set(r["shas"])) == 1
                    shas.update(r["shas"])
                    head = r["head"]
            for name in envs:
                rates[name].append(statistics.median(calls[name]))
                prefills[name].append(statistics.median(pcalls[name]))
    except (RuntimeError, OSError, ValueError) as e:
        print(str(e), file=sys.stderr)
        mg.emit(test="tp", nproc=args.nproc, ok=False, error=str(e).splitlines()[0][:160])
        return 1
    finally:
        for p in procs.values():
            try:
                p.stdin.write("quit\n")
                p.stdin.close()
            except OSError:
                pass
        for p in procs.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    ratio = [lim / b for lim, b in zip(rates["limited"], rates["bare"])]
    aa = [b2 / b for b2, b in zip(rates["bare2"], rates["bare"])]
    p_ratio = [lim / b for lim, b in zip(prefills["limited"], prefills["bare"])]
    p_aa = [b2 / b for b2, b in zip(prefills["bare2"], prefills["bare"])]
    ok = ranks_equal and len(shas) == 1 and tp_err is not None and tp_err < 0.05
    mg.emit(test="tp", nproc=args.nproc, ok=ok, ranks_equal=ranks_equal, tokens_equal=len(shas) == 1,
            tp_err=tp_err, rounds=args.rounds, calls=args.calls,
            bare_tok_s=statistics.median(rates["bare"]),
            limited_tok_s=statistics.median(rates["limited"]),
            ratio=statistics.median(ratio), ratio_min=min(ratio), ratio_max=max(ratio),
            aa=statistics.median(aa), aa_min=min(aa), aa_max=max(aa),
            prefill_ratio=statistics.median(p_ratio), prefill_ratio_min=min(p_ratio),
            prefill_ratio_max=max(p_ratio), prefill_aa=statistics.median(p_aa),
            prefill_bare_tok_s=statistics.median(prefills["bare"]),
            prefill_limited_tok_s=statistics.median(prefills["limited"]),
            tokens=",".join(str(t) for t in head), cpus=",".join(sorted(cpus)),
            **{f"tok_s_{name}": ",".join(f"{v:.1f}" for v in rates[name]) for name in envs})
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("compare", "group"))
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--lib")
    ap.add_argument("--limit", default="8g")
    ap.add_argument("--state")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args()
    if args.mode == "group":
        group(args.nproc)
        return 0
    if not (args.lib and args.state):
        ap.error("compare needs --lib and --state")
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
