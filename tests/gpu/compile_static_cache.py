"""torch.compile(mode="reduce-overhead") generation with a static KV cache
(CUDA graphs recorded and replayed by PyTorch's cudagraph trees):

    python3 tests/gpu/compile_static_cache.py [--batch 2048]

A small `transformers` Llama with random weights from a fixed seed (4 layers,
hidden 256, vocabulary 8192; no downloads), greedy `generate` of 32 tokens
after 32-token prompts with cache_implementation="static" and
CompileConfig(mode="reduce-overhead"): `generate` compiles the decoding step
with torch.compile and replays it as CUDA graphs, as it does for any user of
a static cache on a GPU (transformers without CompileConfig: the forward is
compiled here instead). The cache, 0.25 MiB a prompt (512 MiB at --batch
2048), is allocated whole. Generates twice (the first call compiles and
records, the second replays) and checks both calls gave the same tokens.
Run bare first (it fills the compile cache, TORCHINDUCTOR_CACHE_DIR, for the
others), then under libvgpu.so at a limit that fits (the tokens must be the
bare run's) and one that does not (a clean out-of-memory error).
Prints one line: result test=compile ok= skip= (bare only: compiling failed
for another reason than memory, e.g. no triton) tokens= (a hash of all
generated tokens) calls_equal= error= oom= (class / message / none, as in
graph_capture.py) stage= (where it ended: build, first, second, done)
usable_after= first_s= second_s= tok_s= graphs= (graphs dynamo compiled)
cudagraph_skips= (inductor's count of graphs it would not record as CUDA
graphs) peak_mib= physical_mib= (NVML: what the driver holds for the process
at the end) within_limit= ...
ok means it ran, both calls agreed and, under a limit, NVML's figure for the
process is within it. Exits 0 when it ran to a verdict (ok or a clean OOM),
1 otherwise.
"""
import argparse
import hashlib
import os
import sys
import time

import mg_common as mg

PROMPT, NEW = 32, 32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=2048)
    args = ap.parse_args()
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    dev = torch.device("cuda", 0)
    limit = mg.device_limit(0) if mg.under_library() else None
    info = dict(test="compile", limit_mib=limit and limit // mg.MiB, batch=args.batch,
                cache_mib=args.batch * 2 * 4 * 4 * (PROMPT + NEW) * 64 * 2 // mg.MiB)
    error, oom, res, stage = None, "none", {}, "build"
    try:
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(vocab_size=8192, hidden_size=256, intermediate_size=1024,
                                       num_hidden_layers=4, num_attention_heads=4,
                                       num_key_value_heads=4, max_position_embeddings=256,
                                       tie_word_embeddings=False)
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).to(dev).eval()
        model.generation_config.cache_implementation = "static"
        try:
            model.generation_config.compile_config = transformers.CompileConfig(mode="reduce-overhead")
            res["how"] = "generate"
        except AttributeError:
            model.forward = torch.compile(model.forward, mode="reduce-overhead")
            res["how"] = "forward"
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(3, cfg.vocab_size, (args.batch, PROMPT), generator=g).to(dev)
        mask = torch.ones_like(ids)

        def generate():
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW,
                                     min_new_tokens=NEW, do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()
            return out[:, PROMPT:]

        stage = "first"
        t = time.perf_counter()
        first = generate()
        res["first_s"] = time.perf_counter() - t
        stage = "second"
        t = time.perf_counter()
        second = generate()
        res["second_s"] = time.perf_counter() - t
        stage = "done"
        res["tok_s"] = args.batch * NEW / res["second_s"]
        res["calls_equal"] = bool(torch.equal(first, second))
        res["tokens"] = hashlib.sha1(second.cpu().numpy().tobytes()).hexdigest()[:12]
        res["peak_mib"] = torch.cuda.max_memory_reserved() // mg.MiB
    except Exception as e:
        error, oom = mg.short_error(e), mg.oom_kind(e) or "none"
        print(f"compile_static_cache: {type(e).__name__}: {e}", file=sys.stderr)
    try:
        from torch._dynamo.utils import counters
        res["graphs"] = counters["stats"]["unique_graphs"]
        res["cudagraph_skips"] = sum(v for k, v in counters["inductor"].items() if "cudagraph_skip" in k)
    except Exception:
        pass
    # What the driver holds for this process (NVML, outside the library): a
    # limit holds physically too, also after a refusal.
    physical = mg.process_memory({os.getpid()}).get(0)
    info["physical_mib"] = physical and physical // mg.MiB
    info["within_limit"] = limit is None or (physical is not None and physical <= limit)
    try:
        torch.cuda.synchronize()
        usable = torch.ones(1024, device=dev).sum().item() == 1024
    except Exception as e:
        usable = False
        print(f"compile_static_cache: not usable after: {type(e).__name__}: {e}", file=sys.stderr)
    ran = error is None and res.get("calls_equal", False) and res.get("graphs", 0) > 0
    # Bare, a failure to compile at all (no triton, say) is a SKIP, not a FAIL.
    skip = not mg.under_library() and oom == "none" and (error is not None or res.get("graphs", 0) == 0)
    if skip and error is None:
        error = "nothing_was_compiled"
    mg.emit(**info, ok=ran and info["within_limit"], skip=skip, stage=stage, error=error, oom=oom,
            usable_after=usable, **res)
    return 0 if ran or (oom != "none" and usable) else 1


if __name__ == "__main__":
    sys.exit(main())
