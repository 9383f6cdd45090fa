"""Time transformers' bf16 Qwen3 on the GPU: the peer of kiln's speed rows, and the memory floor's inputs.

What it measures, for the checkpoint of make_model.py (--model DIR), in bfloat16 with
attn_implementation "sdpa":

- decode tokens/s at batch 1, 8, 32, 64 (--batches): each sequence gets a prompt of 128 random
  tokens (--prompt-len), then 128 greedy decode steps (--steps) are timed with CUDA events;
  tokens/s = batch x steps / seconds. Two ways:
  (a) ``eager_dynamic_cache``: a plain loop of model.forward(next tokens, KV cache) + argmax, the
      cache transformers makes by default (DynamicCache), no generate(), so the time is only the
      forwards and the argmax. A warm-up run of exactly the timed run's shapes (prefill + --steps
      steps) comes first; its time is reported as ``cold_ms_per_step``: each decode step there
      meets a new attention shape, and PyTorch's cuDNN attention plans each new shape once
      (about 40 ms a step on an H100, torch 2.11), which the timed run then finds cached;
  (b) ``static_cache_compiled``: a StaticCache and the decode step (forward + argmax) under
      torch.compile(mode="reduce-overhead", i.e. CUDA graphs), after --warmup-steps steps that
      compile and record the graph (``compile_and_warmup_s``). It runs in a child process capped
      at --compile-timeout seconds in all (compilation included); if it fails or runs out of
      time, the JSON records the error or the timeout and the batches that finished.
- prefill time (ms) for 1 x 4096 and 8 x 1024 tokens (--prefill): one forward of the whole batch,
  no cache reuse, best and median of --prefill-reps after two warm-ups; the LM head is limited to
  the last position where this transformers has the keyword for it (``lm_head_positions``).
- device-to-device copy bandwidth: copying a 1 GiB tensor (--copy-bytes), best of --copy-reps,
  counting bytes read + written.
- the weight bytes: every parameter, and those read per decode step (every linear, the norms
  and the LM head; not the embedding table, of which a step reads one row per sequence), plus the
  KV-cache bytes per token, so that the C++ side can compute its memory floor:
  ``floor_ms_per_step`` = weight bytes per step / copy bandwidth.
- ``checkpoint``: the same from the checkpoint file's own tensors, i.e. what kiln holds and reads:
  for gptq the int4 ``qweight`` + ``qzeros`` + fp16 ``scales`` of the projections and bf16 for
  the rest; for moe also the experts' bytes and ``bytes_read_per_decode_step_one_sequence`` (one
  sequence's step reads its top-k experts per layer, a batch the union of its sequences'), each
  with its floor.

The model is the one compare.py checks against (hf_compat.load_model) in bf16: for moe
Qwen3MoeForCausalLM with transformers' default experts implementation (recorded); for gptq the
dequantized dense model, since transformers runs GPTQ only through optimum: its timings are those
of the bf16 dense model of the same shape, not of an int4 kernel.

Output: --out BENCH.json with all of the above, the settings, the GPU name and the torch /
transformers versions; a short summary on stdout.

Run on the GPU machine:

    python bench_transformers.py --model /tmp/q3 --out /tmp/q3-bench.json

On a CPU, for a smoke test only, shrink everything:

    python bench_transformers.py --model /tmp/q3tiny --out /tmp/b.json --device cpu --batches 1,2 \\
        --prompt-len 8 --steps 4 --prefill 1x32,2x16 --copy-bytes 16777216
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import torch

import hf_compat
import kinds


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="make_model.py's directory")
    p.add_argument("--out", required=True, help="the BENCH.json to write")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batches", default="1,8,32,64", help="decode batch sizes (default %(default)s)")
    p.add_argument("--prompt-len", type=int, default=128, help="prompt tokens per sequence before decoding")
    p.add_argument("--steps", type=int, default=128, help="timed decode steps")
    p.add_argument("--warmup-steps", type=int, default=8,
                   help="compiled decode: steps that compile and warm up before the timed run")
    p.add_argument("--prefill", default="1x4096,8x1024", help="prefill shapes, BATCHxTOKENS (default %(default)s)")
    p.add_argument("--prefill-reps", type=int, default=5)
    p.add_argument("--copy-bytes", type=int, default=1 << 30, help="size of the copied tensor (default 1 GiB)")
    p.add_argument("--copy-reps", type=int, default=10)
    p.add_argument("--no-compile", action="store_true", help="skip the static-cache + torch.compile decode")
    p.add_argument("--compile-timeout", type=float, default=420,
                   help="seconds for the whole compiled run, every batch and its compilation (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compiled-worker", metavar="PATH", help=argparse.SUPPRESS)  # the child process
    args = p.parse_args(argv)
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.prefill = [tuple(int(x) for x in shape.split("x")) for shape in args.prefill.split(",") if shape]
    return args


class Timer:
    """Seconds taken by fn(): CUDA events on a GPU, perf_counter on a CPU."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"

    def __call__(self, fn):
        if not self.cuda:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def random_ids(model, batch, length, gen, device):
    return torch.randint(0, model.config.vocab_size, (batch, length), generator=gen).to(device)


# ----------------------------------------------------------------------------------------------
# decode


@torch.inference_mode()
def decode_eager(model, batch, args, gen, timer):
    """(a): forward + argmax per step with transformers' default (dynamic) KV cache."""
    cache_kw = hf_compat.cache_keyword(model)

    def prefill(ids):
        out = model(input_ids=ids, use_cache=True)
        return hf_compat.returned_cache(out), out.logits[:, -1].argmax(-1, keepdim=True)

    def decode(cache, token, steps):
        for _ in range(steps):
            out = model(input_ids=token, use_cache=True, **{cache_kw: cache})
            cache, token = hf_compat.returned_cache(out), out.logits[:, -1].argmax(-1, keepdim=True)
        return token

    # The warm-up run has the timed run's shapes: with a cache that grows by one position a step,
    # every step is a new attention shape, and PyTorch's cuDNN attention builds a plan for each
    # new shape once (tens of ms; seen on an H100 with torch 2.11). Its time is kept as cold_*.
    cache, token = prefill(random_ids(model, batch, args.prompt_len, gen, args.device))
    cold = timer(lambda: decode(cache, token, args.steps))
    del cache
    cache, token = prefill(random_ids(model, batch, args.prompt_len, gen, args.device))
    seconds = timer(lambda: decode(cache, token, args.steps))
    return decode_result(batch, args, seconds, cold_ms_per_step=1e3 * cold / args.steps)


def decode_result(batch, args, seconds, **extra):
    return {"batch": batch, "prompt_len": args.prompt_len, "steps": args.steps, "seconds": seconds,
            "ms_per_step": 1e3 * seconds / args.steps, "tokens_per_s": batch * args.steps / seconds, **extra}


def make_static_cache(config, batch, max_len, device, dtype):
    """StaticCache(config, max_cache_len) in 4.56+ / 5.x (sized at the first update); older
    versions also want the batch size, device and dtype up front."""
    from transformers import StaticCache

    params = inspect.signature(StaticCache.__init__).parameters
    kwargs = {"config": config, "max_cache_len": max_len}
    for key, value in (("max_batch_size", batch), ("device", device), ("dtype", dtype)):
        if key in params:
            kwargs[key] = value
    return StaticCache(**kwargs)


@torch.inference_mode()
def decode_compiled(model, batch, args, gen, timer):
    """(b): StaticCache, eager prefill, then the decode step (forward + argmax) compiled with
    mode="reduce-overhead". The warm-up run includes the compilation; its wall time is reported."""
    cache_kw = hf_compat.cache_keyword(model)
    max_len = args.prompt_len + max(args.steps, args.warmup_steps) + 1
    device = torch.device(args.device)

    def step(token, cache, position):
        out = model(input_ids=token, cache_position=position, use_cache=True, **{cache_kw: cache})
        return out.logits[:, -1].argmax(-1, keepdim=True)

    compiled = torch.compile(step, mode="reduce-overhead", dynamic=False)
    mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)

    # One cache for the warm-up and the timed run: the compiled step is specialised to it, and a
    # new cache object would mean a recompilation inside the timed run.
    cache = make_static_cache(model.config, batch, max_len, device, torch.bfloat16)

    def prefill():
        cache.reset()
        ids = random_ids(model, batch, args.prompt_len, gen, device)
        out = model(input_ids=ids, cache_position=torch.arange(args.prompt_len, device=device),
                    use_cache=True, **{cache_kw: cache})
        return cache, out.logits[:, -1].argmax(-1, keepdim=True)

    positions = torch.arange(max_len, device=device)

    def decode(cache, token, steps):
        for i in range(steps):
            mark_step()
            token = compiled(token, cache, positions[args.prompt_len + i:args.prompt_len + i + 1]).clone()
        return token

    start = time.perf_counter()
    cache, token = prefill()
    decode(cache, token, args.warmup_steps)
    if timer.cuda:
        torch.cuda.synchronize()
    warmup_s = time.perf_counter() - start
    cache, token = prefill()
    seconds = timer(lambda: decode(cache, token, args.steps))
    return decode_result(batch, args, seconds, compile_and_warmup_s=warmup_s)


def compiled_worker(args):
    """The child process of run_compiled: appends one JSON line per batch to args.compiled_worker."""
    model = hf_compat.load_model(args.model, torch.bfloat16, "sdpa", args.device)
    gen, timer = torch.Generator().manual_seed(args.seed), Timer(args.device)
    for batch in args.batches:
        try:
            torch._dynamo.reset()
            record = decode_compiled(model, batch, args, gen, timer)
        except Exception as e:  # noqa: BLE001 - any failure is a result to record
            record = {"batch": batch, "error": f"{type(e).__name__}: {e}"[:2000],
                      "traceback": traceback.format_exc()[-4000:]}
        with open(args.compiled_worker, "a") as f:
            f.write(json.dumps(record) + "\n")
        if "error" in record:
            break  # the other batch sizes would fail the same way, each after its own compile


def run_compiled(argv, args):
    """Runs compiled_worker in a child process (own process group) for at most args.compile_timeout s."""
    with tempfile.TemporaryDirectory() as tmp:
        lines_path = os.path.join(tmp, "compiled.jsonl")
        command = [sys.executable, os.path.abspath(__file__), *argv, "--compiled-worker", lines_path]
        start = time.perf_counter()
        child = subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            output, _ = child.communicate(timeout=args.compile_timeout)
            status = "ok" if child.returncode == 0 else f"child exited with {child.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # the child and inductor's compile workers
            output, _ = child.communicate()
            status = f"timeout after {args.compile_timeout:g} s"
        records = []
        if os.path.exists(lines_path):
            with open(lines_path) as f:
                records = [json.loads(line) for line in f if line.strip()]
    errors = [r for r in records if "error" in r]
    if errors and status == "ok":
        status = "error"
    done = {r["batch"] for r in records}
    return {"status": status, "wall_s": time.perf_counter() - start,
            "error": errors[0]["error"] if errors else None,
            "results": [r for r in records if "error" not in r],
            "not_run": [b for b in args.batches if b not in done],
            "child_output_tail": output[-3000:] if status != "ok" else None}


# ----------------------------------------------------------------------------------------------
# prefill, bandwidth, bytes


@torch.inference_mode()
def prefill_time(model, batch, length, args, gen, timer):
    keep = hf_compat.logits_to_keep_keyword(model)
    extra = {keep: 1} if keep else {}
    ids = random_ids(model, batch, length, gen, args.device)
    run = lambda: model(input_ids=ids, use_cache=False, **extra)  # noqa: E731
    for _ in range(2):
        run()
    times = [timer(run) for _ in range(args.prefill_reps)]
    best = min(times)
    return {"batch": batch, "tokens_per_sequence": length, "ms_best": 1e3 * best,
            "ms_median": 1e3 * statistics.median(times), "tokens_per_s": batch * length / best,
            "lm_head_positions": "last" if keep else "all"}


def copy_bandwidth(args, timer):
    n = args.copy_bytes
    src = torch.full((n,), 1, dtype=torch.uint8, device=args.device)
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    best = min(timer(lambda: dst.copy_(src)) for _ in range(args.copy_reps))
    return {"bytes": n, "best_s": best, "gb_per_s_read_plus_write": 2 * n / best / 1e9}


def weight_bytes(model):
    params = {id(p): p for p in model.parameters()}.values()  # a tied head counts once
    total = sum(p.numel() * p.element_size() for p in params)
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tied = embed is head
    embed_bytes = embed.numel() * embed.element_size()
    c = model.config
    return {
        "total_parameter_bytes": total,
        "embedding_bytes": embed_bytes,
        "lm_head_bytes": head.numel() * head.element_size(),
        "tied_embeddings": tied,
        # A tied head reads the whole table as the LM head; an untied one reads one row per sequence.
        "bytes_read_per_decode_step": total if tied else total - embed_bytes,
        "kv_cache_bytes_per_token": c.num_hidden_layers * 2 * c.num_key_value_heads * c.head_dim * 2,
        "dtype": str(embed.dtype).replace("torch.", ""),
    }


SAFETENSORS_DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8, "U8": 1, "I8": 1}


def checkpoint_bytes(model_dir, gb_per_s):
    """The bytes of the checkpoint file's tensors, what a decode step reads of them, and the floors."""
    from safetensors import safe_open

    config = kinds.read_config(model_dir)
    kind = kinds.kind_of(config)
    total = embed = experts = 0
    by_dtype = {}
    with safe_open(os.path.join(model_dir, "model.safetensors"), framework="pt") as f:
        for name in f.keys():
            t = f.get_slice(name)
            nbytes = math.prod(t.get_shape()) * SAFETENSORS_DTYPE_BYTES[t.get_dtype()]
            total += nbytes
            by_dtype[t.get_dtype()] = by_dtype.get(t.get_dtype(), 0) + nbytes
            embed += nbytes if name == "model.embed_tokens.weight" else 0
            experts += nbytes if ".mlp.experts." in name else 0
    tied = bool(config.get("tie_word_embeddings"))
    step = total if tied else total - embed
    out = {"kind": kind, "total_bytes": total, "bytes_by_dtype": by_dtype, "embedding_bytes": embed,
           "bytes_read_per_decode_step": step, "floor_ms_per_step": 1e3 * step / (gb_per_s * 1e9)}
    if kind == "moe":
        k, e = config["num_experts_per_tok"], config["num_experts"]
        one = step - experts + experts * k / e
        out.update({"expert_bytes": experts, "bytes_read_per_decode_step_one_sequence": one,
                    "floor_ms_per_step_one_sequence": 1e3 * one / (gb_per_s * 1e9),
                    "note": f"one sequence's step reads {k} of the {e} experts per layer; a batch reads the "
                            "union of its sequences' experts (all of them, and bytes_read_per_decode_step, "
                            "once the batch is large enough)"})
    if kind == "gptq":
        out["note"] = ("the projections as int4 qweight + int32 qzeros + fp16 scales, the rest bf16: what an "
                       "int4 kernel reads; transformers' timings here are of the dequantized bf16 dense model")
    return out


# ----------------------------------------------------------------------------------------------


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.compiled_worker:
        return compiled_worker(args)

    model = hf_compat.load_model(args.model, torch.bfloat16, "sdpa", args.device)
    gen, timer = torch.Generator().manual_seed(args.seed), Timer(args.device)
    c = model.config
    config_json = kinds.read_config(args.model)
    kind = kinds.kind_of(config_json)
    extra = {k: config_json[k] for k in ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                         "norm_topk_prob", "quantization_config") if k in config_json}
    if kind == "moe":
        extra["experts_implementation"] = hf_compat.experts_implementation(model)
    if kind == "gptq":
        extra["transformers_model"] = ("the dequantized dense Qwen3ForCausalLM in bf16 (compare.py's yardstick): "
                                       "transformers has no GPTQ kernels without optimum")
    result = {
        "environment": hf_compat.environment(args.device),
        "model": {"dir": os.path.abspath(args.model), "kind": kind, "dtype": "bfloat16", "attn_implementation": "sdpa",
                  **{k: getattr(c, k) for k in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                "num_key_value_heads", "head_dim", "intermediate_size",
                                                "vocab_size")}, **extra},
        "settings": {"batches": args.batches, "prompt_len": args.prompt_len, "steps": args.steps,
                     "warmup_steps": args.warmup_steps, "prefill": [list(s) for s in args.prefill],
                     "prefill_reps": args.prefill_reps, "copy_reps": args.copy_reps,
                     "compile_timeout_s": args.compile_timeout,
                     "timer": "cuda events" if timer.cuda else "perf_counter"},
    }
    result["copy_bandwidth"] = copy = copy_bandwidth(args, timer)
    result["weights"] = weights = weight_bytes(model)
    floor_s = weights["bytes_read_per_decode_step"] / (copy["gb_per_s_read_plus_write"] * 1e9)
    weights["floor_ms_per_step"] = 1e3 * floor_s
    weights["floor_note"] = ("bytes_read_per_decode_step / copy bandwidth (read + write); "
                             "KV-cache reads come on top: kv_cache_bytes_per_token x context x batch")
    print(f"copy {copy['gb_per_s_read_plus_write']:.0f} GB/s; "
          f"weights read per decode step {weights['bytes_read_per_decode_step'] / 1e6:.1f} MB "
          f"(floor {1e3 * floor_s:.3f} ms/step)", flush=True)
    result["checkpoint"] = ckpt = checkpoint_bytes(args.model, copy["gb_per_s_read_plus_write"])
    if kind != "dense":
        line = (f"{kind} checkpoint: {ckpt['bytes_read_per_decode_step'] / 1e6:.1f} MB read per decode step "
                f"(floor {ckpt['floor_ms_per_step']:.3f} ms/step)")
        if kind == "moe":
            line += (f"; one sequence: {ckpt['bytes_read_per_decode_step_one_sequence'] / 1e6:.1f} MB "
                     f"(floor {ckpt['floor_ms_per_step_one_sequence']:.3f} ms/step)")
        print(line, flush=True)

    result["decode"] = {"eager_dynamic_cache": []}
    for batch in args.batches:
        r = decode_eager(model, batch, args, gen, timer)
        result["decode"]["eager_dynamic_cache"].append(r)
        print(f"decode eager    batch {batch:3}: {r['tokens_per_s']:10.1f} tok/s ({r['ms_per_step']:.3f} ms/step; "
              f"cold run {r['cold_ms_per_step']:.3f} ms/step)", flush=True)

    result["prefill"] = []
    for batch, length in args.prefill:
        r = prefill_time(model, batch, length, args, gen, timer)
        result["prefill"].append(r)
        print(f"prefill {batch} x {length}: {r['ms_best']:.3f} ms best, {r['ms_median']:.3f} ms median", flush=True)

    if args.no_compile:
        result["decode"]["static_cache_compiled"] = {"status": "skipped (--no-compile)"}
    else:
        del model
        if timer.cuda:
            torch.cuda.empty_cache()
        compiled = run_compiled(argv, args)
        result["decode"]["static_cache_compiled"] = compiled
        for r in compiled["results"]:
            print(f"decode compiled batch {r['batch']:3}: {r['tokens_per_s']:10.1f} tok/s "
                  f"({r['ms_per_step']:.3f} ms/step; compile + warm-up {r['compile_and_warmup_s']:.1f} s)")
        if compiled["status"] != "ok":
            error = f": {compiled['error']}" if compiled["error"] else ""
            print(f"decode compiled: {compiled['status']}{error}; not run: {compiled['not_run']}")

    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    env = result["environment"]
    print(f"{env.get('gpu', env['device'])}, torch {env['torch']}, transformers {env['transformers']}; "
          f"wrote {args.out}")


if __name__ == "__main__":
    main()
