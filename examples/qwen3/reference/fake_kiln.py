"""Write a kiln-format output directory from transformers in bfloat16: compare.py's self-test.

kiln's Qwen3 program writes, per batch of prompts.json, ``<name>.json`` and ``<name>_logits.f32``
(README.md: the file interface). This script writes the same files from transformers' bf16 model
instead, so compare.py can be checked without kiln, and so the C++ side has an example of the
format. ``compare.py --self-test MODE`` calls it; it also runs on its own:

    python fake_kiln.py --model /tmp/q3 --out /tmp/q3-fake --new-tokens 32 --mode exact
    python compare.py --model /tmp/q3 --kiln /tmp/q3-fake --out /tmp/summary.json

Modes (what compare.py must then say):

- ``exact``: greedy tokens from the bf16 model (with its KV cache, as kiln decodes), logits from
  one teacher-forced bf16 forward of prompt + tokens[:N-1], the very computation compare.py's bf16
  reference does, so kiln's rel L2 equals transformers-bf16's: PASS.
- ``noise``: ``exact`` plus Gaussian noise of --noise (default 0.05) x each step's logit RMS:
  the tokens are unchanged, the rel L2 is far above bf16's: FAIL on rel L2 alone.
- ``wrong-token``: in each prompt, at the step where bf16's top-1/top-2 margin is largest, emits
  the runner-up token and continues greedily after it: the logits stay bf16's, so only the
  greedy-agreement rule can fail: FAIL on disagreements at clear steps.
- ``unit-qk-norm``: ``exact`` from a model whose q_norm / k_norm weights are all 1, i.e. a
  kernel that ignores the QK-norm weight: FAIL (make_model.py randomises the norm weights so
  that this shows).
- ``unnormalized-topk`` (moe checkpoints only): ``exact`` from the model with norm_topk_prob
  off, i.e. a MoE kernel that does not renormalise the top-k routing weights (they then sum to
  the top-k share of the softmax, below 1): FAIL.
- ``zeros-off-by-one`` (gptq checkpoints only): ``exact`` from the model dequantized with the
  zero point as stored, 7, instead of stored + 1 = 8 (a gptq_v2 reader of this v1 file, the
  classic GPTQ zero-point slip: every weight moves by + its scale): FAIL.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import torch

import hf_compat
import kinds

MODES = ("exact", "noise", "wrong-token", "unit-qk-norm", "unnormalized-topk", "zeros-off-by-one")
# The modes that only make sense for one checkpoint kind.
MODE_KIND = {"unnormalized-topk": "moe", "zeros-off-by-one": "gptq"}


@torch.inference_mode()
def greedy(model, prompt, new_tokens, device, runner_up_at=None):
    """Greedy decode with the model's KV cache; returns (tokens, each step's top-1/top-2 margin).

    At step ``runner_up_at`` it emits the second-best token instead of the best.
    """
    out = model(input_ids=torch.tensor([prompt], device=device), use_cache=True)
    tokens, margins = [], []
    for step in range(new_tokens):
        top2 = out.logits[0, -1].float().topk(2)
        margins.append(float(top2.values[0] - top2.values[1]))
        tokens.append(int(top2.indices[1 if step == runner_up_at else 0]))
        if step + 1 < new_tokens:
            out = model(input_ids=torch.tensor([[tokens[-1]]], device=device), use_cache=True,
                        **{hf_compat.cache_keyword(model): hf_compat.returned_cache(out)})
    return tokens, margins


@torch.inference_mode()
def teacher_forced_logits(model, prompt, tokens, device):
    """Logits [N, vocab] (float32) at positions len(prompt)-1 .. len(prompt)+N-2 of prompt + tokens[:N-1]."""
    ids = torch.tensor([prompt + tokens[:-1]], device=device)
    logits = model(input_ids=ids, use_cache=False).logits[0]
    return logits[len(prompt) - 1:].float().cpu().numpy()


def write_batch(out_dir, name, tokens, logits, vocab):
    """The two files of one batch, in the format kiln's program writes."""
    logits_file = f"{name}_logits.f32"
    array = np.ascontiguousarray(np.stack(logits), dtype="<f4")  # [prompts, N, vocab]
    array.tofile(os.path.join(out_dir, logits_file))
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump({"name": name, "new_tokens": len(tokens[0]), "vocab": vocab, "tokens": tokens,
                   "logits_file": logits_file}, f)


def write_fake_kiln(model_dir, out_dir, mode, new_tokens, device, noise=0.05, seed=0, model=None):
    """Writes out_dir as kiln would (see the module docstring for the modes). Returns out_dir."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    if new_tokens < 1:
        raise ValueError("new_tokens must be at least 1")
    kind = kinds.kind_of(kinds.read_config(model_dir))
    if MODE_KIND.get(mode, kind) != kind:
        raise ValueError(f"mode {mode} is for {MODE_KIND[mode]} checkpoints; {model_dir} is {kind}")
    if model is None:
        model = hf_compat.load_model(model_dir, torch.bfloat16, "sdpa", device,
                                     gptq_zero_offset=0 if mode == "zeros-off-by-one" else 1)
    if mode == "unit-qk-norm":
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith(("q_norm.weight", "k_norm.weight")):
                    param.fill_(1.0)
    if mode == "unnormalized-topk":
        # transformers 5 keeps the flag on the router (mlp.gate), 4 on the sparse MoE block.
        routers = [m for m in model.modules() if hasattr(m, "norm_topk_prob")]
        if not routers:
            raise RuntimeError("no module with norm_topk_prob in this transformers' MoE model")
        for m in routers:
            m.norm_topk_prob = False
    vocab = model.config.vocab_size
    rng = np.random.default_rng(seed)
    with open(os.path.join(model_dir, "prompts.json")) as f:
        batches = json.load(f)["batches"]
    os.makedirs(out_dir, exist_ok=True)
    for batch in batches:
        all_tokens, all_logits = [], []
        for prompt in batch["prompts"]:
            tokens, margins = greedy(model, prompt, new_tokens, device)
            if mode == "wrong-token":
                tokens, _ = greedy(model, prompt, new_tokens, device,
                                   runner_up_at=int(np.argmax(margins)))
            logits = teacher_forced_logits(model, prompt, tokens, device)
            if mode == "noise":
                rms = np.sqrt(np.mean(logits.astype(np.float64) ** 2, axis=-1, keepdims=True))
                logits = logits + (noise * rms * rng.standard_normal(logits.shape)).astype(np.float32)
            all_tokens.append(tokens)
            all_logits.append(logits)
        write_batch(out_dir, batch["name"], all_tokens, all_logits, vocab)
    return out_dir


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="make_model.py's directory (checkpoint + prompts.json)")
    p.add_argument("--out", required=True, help="the kiln-format directory to write")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--mode", choices=MODES, default="exact")
    p.add_argument("--noise", type=float, default=0.05, help="noise mode: std as a fraction of each step's logit RMS")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    write_fake_kiln(args.model, args.out, args.mode, args.new_tokens, args.device, noise=args.noise)
    print(f"wrote {args.out} ({args.mode}, {args.new_tokens} new tokens per prompt)")


if __name__ == "__main__":
    main()
