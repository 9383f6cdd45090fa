"""Check kiln's Qwen3 greedy generation against transformers: logits and tokens.

Inputs: --model DIR, written by make_model.py (config.json, model.safetensors, prompts.json), and
--kiln OUTDIR, written by kiln's Qwen3 program: per batch of prompts.json, ``<name>.json``
``{"name", "new_tokens": N, "vocab": V, "tokens": [[N ids] per prompt], "logits_file"}`` and the
logits file, raw little-endian float32 [prompts, N, V], where step s of prompt b holds the logits
that chose tokens[b][s] (step 0: the prefill's last position; step s: after feeding
tokens[b][s-1]).

The reference: for every prompt, prompt + tokens[b][:N-1] (kiln's own tokens, teacher-forced) is
run through transformers one sequence at a time, no padding, no cache, twice:

- float32 (the checkpoint's bf16 weights upcast; attn_implementation "eager"; TF32 off through
  torch.set_float32_matmul_precision("highest")): the reference everything is measured against;
- bfloat16 (attn_implementation "sdpa", PyTorch's defaults otherwise): the yardstick, what
  transformers itself achieves in the precision kiln computes in.

The model, by the checkpoint's kind (kinds.py; hf_compat.load_model):
- dense: Qwen3ForCausalLM.from_pretrained;
- moe: Qwen3MoeForCausalLM.from_pretrained; in float32 the experts run one by one in F.linear
  (experts_implementation "eager" on transformers 5), in bf16 transformers' default;
- gptq (transformers cannot run GPTQ without optimum): the dense Qwen3ForCausalLM of config.json
  without its quantization_config, whose seven projections per layer are the dequantized
  W' = (q - z) * scale, z = stored zero + 1 = 8, computed in float32 from the checkpoint's
  qweight / qzeros / scales (exact: a small integer times a float16); the embedding, norms and
  lm_head are the checkpoint's bf16. The bf16 yardstick is that model cast to bf16, i.e. W'
  rounded to bf16.

From each, the logits at positions len(prompt)-1 .. len(prompt)+N-2, i.e. [N, V]: the same steps
as kiln's file.

Metrics, per batch and over all batches:
- relative L2, ||x - fp32|| / ||fp32|| over every logit, and the max abs error, for x = kiln and
  x = transformers-bf16;
- greedy agreement: a step is *clear* when float32's top-1 minus top-2 logit is more than 4 x the
  max abs error of transformers-bf16 vs float32 at that step (so bf16 itself cannot flip it); at
  every clear step kiln's token must be float32's argmax. Clear steps, agreements and every
  disagreement are reported.

PASS iff kiln's relative L2 is at most transformers-bf16's, over all batches and in each batch,
and no clear step disagrees. Also reported, without deciding pass/fail: steps whose kiln token is
not an argmax of kiln's own logits for that step (that points at the file interface, e.g. logits
written one step off), and token agreement at all steps.

Output: --out SUMMARY.json (every number, the criteria, the verdict and why, torch / transformers
versions, the device) and a short table on stdout. Exit code 0 on PASS, 1 on FAIL, including a
kiln directory that is missing a file, truncated or of the wrong shape (the summary then says
why).

Run:

    python compare.py --model /tmp/q3 --kiln /tmp/q3-kiln --out /tmp/q3-summary.json

Self-test without kiln (fake_kiln.py writes --kiln from transformers' bf16 first):

    python compare.py --model /tmp/q3 --kiln /tmp/q3-fake --out /tmp/s.json --self-test exact
    # exact: PASS (exit 0); noise, wrong-token, unit-qk-norm: FAIL (exit 1); moe checkpoints:
    # unnormalized-topk FAILs too, gptq checkpoints: zeros-off-by-one
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch

import fake_kiln
import hf_compat
import kinds

CLEAR_FACTOR = 4.0
CLEAR_RULE = ("a step is clear when the float32 logits' top-1 minus top-2 margin is more than "
              f"{CLEAR_FACTOR:g} x the max abs error of transformers-bf16 vs float32 at that step; "
              "at every clear step kiln's token must equal the float32 argmax")
PASS_RULE = ("PASS iff kiln's relative L2 vs float32 <= transformers-bf16's relative L2 vs float32, "
             "over all batches and in every batch, and no clear step disagrees")


class KilnOutputError(Exception):
    """kiln's directory is missing a file, truncated, or not what prompts.json asks for."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="make_model.py's directory")
    p.add_argument("--kiln", required=True, help="kiln's output directory (<name>.json, <name>_logits.f32)")
    p.add_argument("--out", required=True, help="the SUMMARY.json to write")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--self-test", choices=fake_kiln.MODES, metavar="MODE",
                   help="first write --kiln from transformers-bf16 (fake_kiln.py; MODE one of "
                        + ", ".join(fake_kiln.MODES) + "), then compare as usual")
    p.add_argument("--new-tokens", type=int, default=32, help="--self-test only: tokens per prompt")
    p.add_argument("--max-listed", type=int, default=20, help="disagreements printed (all go to the JSON)")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# kiln's files


def read_kiln_batch(kiln_dir, name, prompts, vocab):
    """Reads and checks one batch of kiln's output; returns (tokens [P][N], logits [P, N, V])."""
    path = os.path.join(kiln_dir, f"{name}.json")
    if not os.path.isfile(path):
        raise KilnOutputError(f"{path} is missing (prompts.json has a batch {name!r})")
    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise KilnOutputError(f"{path}: not readable JSON ({e})") from e
    if not isinstance(meta, dict):
        raise KilnOutputError(f"{path}: not a JSON object")

    def field(key, kind):
        if key not in meta:
            raise KilnOutputError(f"{path}: no {key!r}")
        value = meta[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise KilnOutputError(f"{path}: {key!r} is {value!r}, not a {kind.__name__}")
        return value

    if field("name", str) != name:
        raise KilnOutputError(f"{path}: name is {meta['name']!r}, expected {name!r}")
    n = field("new_tokens", int)
    if n < 1:
        raise KilnOutputError(f"{path}: new_tokens is {n}; it must be at least 1")
    if field("vocab", int) != vocab:
        raise KilnOutputError(f"{path}: vocab is {meta['vocab']}, the model's is {vocab}")
    tokens = field("tokens", list)
    if len(tokens) != len(prompts):
        raise KilnOutputError(f"{path}: tokens has {len(tokens)} rows, batch {name} has {len(prompts)} prompts")
    for b, row in enumerate(tokens):
        if not isinstance(row, list) or len(row) != n:
            raise KilnOutputError(f"{path}: tokens[{b}] is not a list of new_tokens = {n} ids")
        bad = [t for t in row if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab]
        if bad:
            raise KilnOutputError(f"{path}: tokens[{b}] has {bad[0]!r}, not a token id in [0, {vocab})")

    logits_path = os.path.join(kiln_dir, field("logits_file", str))
    if not os.path.isfile(logits_path):
        raise KilnOutputError(f"{logits_path} (logits_file of {path}) is missing")
    expected = len(prompts) * n * vocab * 4
    size = os.path.getsize(logits_path)
    if size != expected:
        what = "truncated" if size < expected else "too long"
        raise KilnOutputError(
            f"{logits_path}: {size} bytes, {what}: expected {expected} = {len(prompts)} prompts x "
            f"{n} steps x {vocab} vocab x 4 bytes (float32)")
    logits = np.fromfile(logits_path, dtype="<f4").reshape(len(prompts), n, vocab)
    if not np.isfinite(logits).all():
        b, s, v = np.argwhere(~np.isfinite(logits))[0]
        raise KilnOutputError(f"{logits_path}: non-finite logits ({np.count_nonzero(~np.isfinite(logits))} "
                              f"of them; the first at prompt {b}, step {s}, token {v}: {logits[b, s, v]})")
    return tokens, logits


# ----------------------------------------------------------------------------------------------
# the reference


@torch.inference_mode()
def reference_logits(model, prompt, tokens, device):
    """[N, V] float64 logits of prompt + tokens[:N-1] at positions len(prompt)-1 .. len(prompt)+N-2."""
    ids = torch.tensor([prompt + tokens[:-1]], device=device)
    logits = model(input_ids=ids, use_cache=False).logits[0, len(prompt) - 1:]
    return logits.double().cpu().numpy()


class ErrorSum:
    """Accumulates ||x - ref||^2, ||ref||^2 and max |x - ref| over any number of [.., V] blocks."""

    def __init__(self):
        self.diff2 = self.ref2 = self.max_abs = 0.0

    def add(self, x, ref):
        d = x - ref
        self.diff2 += float(np.sum(d * d))
        self.ref2 += float(np.sum(ref * ref))
        self.max_abs = max(self.max_abs, float(np.max(np.abs(d))))

    def merge(self, other):
        self.diff2 += other.diff2
        self.ref2 += other.ref2
        self.max_abs = max(self.max_abs, other.max_abs)

    def result(self):
        return {"rel_l2": (self.diff2 / self.ref2) ** 0.5 if self.ref2 else float("nan"),
                "max_abs": self.max_abs}


class Counts:
    def __init__(self):
        self.steps = self.clear = self.clear_agree = 0
        self.kiln_agree = self.bf16_agree = self.not_own_argmax = 0
        self.disagreements, self.not_own_argmax_steps = [], []
        self.margins = []

    def merge(self, other):
        for key in ("steps", "clear", "clear_agree", "kiln_agree", "bf16_agree", "not_own_argmax"):
            setattr(self, key, getattr(self, key) + getattr(other, key))
        self.disagreements += other.disagreements
        self.not_own_argmax_steps += other.not_own_argmax_steps
        self.margins += other.margins

    def result(self):
        m = np.array(self.margins) if self.margins else np.zeros(1)
        return {
            "steps": self.steps,
            "clear_steps": self.clear,
            "clear_steps_agreeing": self.clear_agree,
            "disagreements_at_clear_steps": len(self.disagreements),
            "kiln_token_equals_fp32_argmax_all_steps": self.kiln_agree,
            "bf16_argmax_equals_fp32_argmax_all_steps": self.bf16_agree,
            "kiln_token_not_argmax_of_kiln_logits": self.not_own_argmax,
            "fp32_margin_median": float(np.median(m)),
            "disagreements": self.disagreements,
            "kiln_token_not_argmax_of_kiln_logits_steps": self.not_own_argmax_steps[:100],
        }


def compare_prompt(batch, b, prompt, tokens, kiln, fp32, bf16, counts):
    """Greedy-agreement bookkeeping of one prompt's N steps (all arrays [N, V])."""
    top2 = np.sort(fp32, axis=-1)[:, -2:]
    margins = top2[:, 1] - top2[:, 0]
    bf16_err = np.max(np.abs(bf16 - fp32), axis=-1)
    fp32_argmax = np.argmax(fp32, axis=-1)
    bf16_argmax = np.argmax(bf16, axis=-1)
    for s, token in enumerate(tokens):
        counts.steps += 1
        counts.margins.append(float(margins[s]))
        counts.kiln_agree += int(token == fp32_argmax[s])
        counts.bf16_agree += int(bf16_argmax[s] == fp32_argmax[s])
        if kiln[s, token] < kiln[s].max():
            counts.not_own_argmax += 1
            counts.not_own_argmax_steps.append({"batch": batch, "prompt": b, "step": s, "token": token,
                                                "kiln_argmax": int(np.argmax(kiln[s]))})
        threshold = CLEAR_FACTOR * bf16_err[s]
        if margins[s] > threshold:
            counts.clear += 1
            if token == fp32_argmax[s]:
                counts.clear_agree += 1
            else:
                ref_token = int(fp32_argmax[s])
                counts.disagreements.append({
                    "batch": batch, "prompt": b, "prompt_len": len(prompt), "step": s,
                    "kiln_token": token, "fp32_token": ref_token,
                    "fp32_margin": float(margins[s]), "clear_threshold": float(threshold),
                    "fp32_logit_of_kiln_token": float(fp32[s, token]),
                    "kiln_logit_of_kiln_token": float(kiln[s, token]),
                    "kiln_logit_of_fp32_token": float(kiln[s, ref_token]),
                })


# ----------------------------------------------------------------------------------------------


def model_summary(config_json):
    """The sizes from config.json (and the experts, the quantization) as the checkpoint states them."""
    keys = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "intermediate_size", "vocab_size", "rms_norm_eps", "architectures",
            "num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
            "quantization_config")
    return {k: config_json[k] for k in keys if k in config_json}


GPTQ_REFERENCE = ("the dense Qwen3ForCausalLM of config.json without quantization_config, whose "
                  "q/k/v/o/gate/up/down weights are the dequantized W' = (q - z) * scale with "
                  "z = stored zero + 1 (= 8), computed in float32 from qweight / qzeros / scales "
                  "(exact); embedding, norms and lm_head: the checkpoint's bf16")


def reference_description(kind, fp32_model, bf16_model):
    fp32_weights = {"dense": "the checkpoint's bf16 weights, upcast",
                    "moe": "the checkpoint's bf16 weights, upcast (Qwen3MoeForCausalLM.from_pretrained)",
                    "gptq": GPTQ_REFERENCE}[kind]
    ref = {
        "float32": {"attn_implementation": "eager", "float32_matmul_precision": "highest",
                    "weights": fp32_weights},
        "bfloat16": {"attn_implementation": "sdpa"},
        "method": "prompt + kiln's tokens[:N-1], teacher-forced, one sequence at a time, no padding, no cache",
    }
    if kind == "gptq":
        ref["bfloat16"]["weights"] = "the float32 reference's weights rounded to bf16 (W' rounded to bf16)"
        ref["note"] = ("transformers cannot run GPTQ without optimum: the reference is the dequantized "
                       "dense model, i.e. what an exact int4 x bf16 -> float GEMM would compute")
    if kind == "moe":
        ref["float32"]["experts_implementation"] = hf_compat.experts_implementation(fp32_model)
        ref["bfloat16"]["experts_implementation"] = hf_compat.experts_implementation(bf16_model)
    return ref


def run(args):
    with open(os.path.join(args.model, "prompts.json")) as f:
        batches = json.load(f)["batches"]
    config_json = kinds.read_config(args.model)
    kind = kinds.kind_of(config_json)
    vocab = config_json["vocab_size"]

    torch.set_float32_matmul_precision("highest")  # no TF32 in the float32 reference
    if fake_kiln.MODE_KIND.get(args.self_test, kind) != kind:
        sys.exit(f"compare: --self-test {args.self_test} is for {fake_kiln.MODE_KIND[args.self_test]} "
                 f"checkpoints; {args.model} is {kind}")
    if args.self_test:
        fake_kiln.write_fake_kiln(args.model, args.kiln, args.self_test, args.new_tokens, args.device)
    # Every file of kiln's is checked before the reference runs, so a bad directory fails at once.
    kiln_output = {b["name"]: read_kiln_batch(args.kiln, b["name"], b["prompts"], vocab) for b in batches}
    fp32_model = hf_compat.load_model(args.model, torch.float32, "eager", args.device)
    bf16_model = hf_compat.load_model(args.model, torch.bfloat16, "sdpa", args.device)

    summary = {
        "pass": False, "failures": [],
        "criteria": {"pass_rule": PASS_RULE, "clear_rule": CLEAR_RULE, "clear_factor": CLEAR_FACTOR},
        "kind": kind,
        "reference": reference_description(kind, fp32_model, bf16_model),
        "model_dir": os.path.abspath(args.model), "kiln_dir": os.path.abspath(args.kiln),
        "model": model_summary(config_json),
        "self_test": args.self_test,
        "environment": hf_compat.environment(args.device),
        "batches": [],
    }

    total_kiln, total_bf16, total_counts = ErrorSum(), ErrorSum(), Counts()
    for batch in batches:
        name, prompts = batch["name"], batch["prompts"]
        tokens, kiln_logits = kiln_output[name]
        kiln_err, bf16_err, counts = ErrorSum(), ErrorSum(), Counts()
        for b, prompt in enumerate(prompts):
            fp32 = reference_logits(fp32_model, prompt, tokens[b], args.device)
            bf16 = reference_logits(bf16_model, prompt, tokens[b], args.device)
            kiln = kiln_logits[b].astype(np.float64)
            kiln_err.add(kiln, fp32)
            bf16_err.add(bf16, fp32)
            compare_prompt(name, b, prompt, tokens[b], kiln, fp32, bf16, counts)
        total_kiln.merge(kiln_err)
        total_bf16.merge(bf16_err)
        total_counts.merge(counts)
        summary["batches"].append({
            "name": name, "prompts": len(prompts), "prompt_lengths": [len(p) for p in prompts],
            "new_tokens": len(tokens[0]),
            "kiln_vs_fp32": kiln_err.result(), "bf16_vs_fp32": bf16_err.result(), **counts.result(),
        })
    summary["overall"] = {"kiln_vs_fp32": total_kiln.result(), "bf16_vs_fp32": total_bf16.result(),
                          **total_counts.result()}

    # The verdict: rel L2 no worse than transformers-bf16's per batch and overall; no clear step lost.
    for label, entry in [(b["name"], b) for b in summary["batches"]] + [("overall", summary["overall"])]:
        kiln_rel, bf16_rel = entry["kiln_vs_fp32"]["rel_l2"], entry["bf16_vs_fp32"]["rel_l2"]
        entry["rel_l2_ratio_kiln_over_bf16"] = kiln_rel / bf16_rel if bf16_rel else float("inf")
        if not kiln_rel <= bf16_rel:
            summary["failures"].append(f"{label}: kiln's rel L2 {kiln_rel:.3e} > transformers-bf16's {bf16_rel:.3e}")
    if total_counts.disagreements:
        summary["failures"].append(f"{len(total_counts.disagreements)} of {total_counts.clear} clear steps: "
                                   "kiln's token is not the float32 argmax")
    summary["pass"] = not summary["failures"]
    return summary


def print_table(summary, max_listed):
    head = (f"{'batch':8} {'prompts':>7} {'steps':>6} {'clear':>6} {'disagree':>8} {'kiln relL2':>11} "
            f"{'bf16 relL2':>11} {'ratio':>6} {'kiln maxabs':>11} {'bf16 maxabs':>11} {'kiln=fp32 tok':>13}")
    print(head)
    rows = summary["batches"] + [dict(summary["overall"], name="all",
                                      prompts=sum(b["prompts"] for b in summary["batches"]))]
    for r in rows:
        print(f"{r['name']:8} {r['prompts']:>7} {r['steps']:>6} {r['clear_steps']:>6} "
              f"{r['disagreements_at_clear_steps']:>8} {r['kiln_vs_fp32']['rel_l2']:>11.3e} "
              f"{r['bf16_vs_fp32']['rel_l2']:>11.3e} {r['rel_l2_ratio_kiln_over_bf16']:>6.3f} "
              f"{r['kiln_vs_fp32']['max_abs']:>11.3e} {r['bf16_vs_fp32']['max_abs']:>11.3e} "
              f"{r['kiln_token_equals_fp32_argmax_all_steps']:>6}/{r['steps']:<6}")
    overall = summary["overall"]
    for d in overall["disagreements"][:max_listed]:
        print(f"  disagreement: {d['batch']} prompt {d['prompt']} step {d['step']}: kiln {d['kiln_token']}, "
              f"fp32 {d['fp32_token']} (margin {d['fp32_margin']:.4f} > {d['clear_threshold']:.4f})")
    if len(overall["disagreements"]) > max_listed:
        print(f"  ... {len(overall['disagreements']) - max_listed} more in the summary")
    if overall["kiln_token_not_argmax_of_kiln_logits"]:
        print(f"  note: at {overall['kiln_token_not_argmax_of_kiln_logits']} of {overall['steps']} steps kiln's "
              "token is not an argmax of kiln's own logits for that step (a few: near-ties, argmax taken over "
              "other numbers than those written; many: logits written a step off?)")
    env = summary["environment"]
    print(f"kind {summary['kind']}; torch {env['torch']}, transformers {env['transformers']}, "
          f"{env.get('gpu', env['device'])}; "
          f"clear rule: margin > {CLEAR_FACTOR:g} x bf16 max abs error at the step")


def main(argv=None):
    args = parse_args(argv)
    try:
        summary = run(args)
    except KilnOutputError as e:
        try:
            kind = kinds.kind_of(kinds.read_config(args.model))
        except (OSError, ValueError, KeyError) as err:
            kind = f"unknown ({err})"
        summary = {"pass": False, "failures": [f"kiln output: {e}"], "error": str(e), "kind": kind,
                   "criteria": {"pass_rule": PASS_RULE, "clear_rule": CLEAR_RULE},
                   "model_dir": os.path.abspath(args.model), "kiln_dir": os.path.abspath(args.kiln),
                   "environment": hf_compat.environment(args.device)}
    else:
        print_table(summary, args.max_listed)
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)
    verdict = "PASS" if summary["pass"] else "FAIL: " + "; ".join(summary["failures"])
    print(f"{verdict}\nsummary: {args.out}")
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
