"""Build the random-weight Qwen3 checkpoint and the prompts that kiln's Qwen3 program is checked on.

What it writes to --out DIR:

- ``config.json`` + ``model.safetensors`` (one file, bfloat16): a ``Qwen3ForCausalLM`` with random
  weights, saved by transformers' ``save_pretrained``. The architecture is fixed to what kiln's
  loader reads: untied LM head, ``rope_theta`` 1e6, ``rms_norm_eps`` 1e-6, no sliding window, no
  attention bias, SiLU. The sizes come from the flags (the defaults: 4 layers, hidden 2048, 16
  query heads, 8 KV heads, head_dim 128, intermediate 6144, vocab 32000).
- ``prompts.json``: ``{"batches": [{"name": "b1", "prompts": [[ids...]]}, {"name": "b3", ...},
  {"name": "b8", ...}]}``: batches of 1, 3 and 8 prompts of uniform random token ids in
  [0, vocab), with the lengths of ``PROMPT_LENGTHS`` below (1 ... 300, around the KV page size 16).

Everything is deterministic from --seed: the weights are drawn with a seeded CPU torch generator
(not transformers' own initialisation, which differs between versions), the prompts with numpy's
``default_rng(seed)``.

The weights: every linear weight (q/k/v/o, gate/up/down, lm_head) is N(0, init_std^2), with
init_std = 0.01 * sqrt(2048 / hidden) unless --init-std is given; the token embedding
N(0, embed_std^2), embed_std 0.2; every RMSNorm weight (input / post-attention / final norm, and
the per-head q_norm / k_norm) 1 + norm_std * N(0, 1), norm_std 0.1, so that a kernel that
ignores a norm weight is visibly wrong. The weights are rounded to bfloat16 once, so the float32
model that compare.py loads from the checkpoint is exactly the model described here.

Why those stds: the layers must matter against the embedding (else a broken attention or MLP hides
behind it), while bf16's error, which grows with the layers' share, must leave many steps "clear"
(compare.py: float32 top-1/top-2 margin > 4 x bf16's max abs error at the step). A sweep at the
default sizes (b8 prompts): init std 0.01 / embedding 1.0 gave 68% clear positions but q/k-norm
weights ignored moved the logits only 2.3x bf16's rel L2; 0.02 / 0.05 gave 9.5x but 19% clear;
0.01 / 0.2 (the defaults) give 53% clear and 6.8x. With init_std scaled by sqrt(2048 / hidden),
the layers' share (attention ~ std^2 * hidden, MLP ~ std^3 * hidden^1.5) is the same at any width.

The margin check: before saving, the script runs every prompt through the model in float32 and
in bfloat16 (full sequence, every position's next-token logits) and prints the float32 top-1 /
top-2 logit margin (median, 10th and 90th percentile), the bf16-vs-float32 max abs logit error
per position, and the fraction of positions that compare.py's rule would call clear.
--no-stats skips it.

Run (on any machine with torch + transformers; --device picks where the margin check runs):

    python make_model.py --out /tmp/q3
    python make_model.py --out /tmp/q3tiny --layers 2 --hidden 128 --heads 4 --kv-heads 2 \\
        --head-dim 64 --intermediate 256 --vocab 1000
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys

import numpy as np
import torch

import hf_compat

# The prompt lengths of each batch. Together they cover 1, 2, 15, 16, 17, 64, 127, 128, 129 and
# 300 (the lengths on either side of a KV page of 16 tokens, and of 128), in no sorted order, so
# that a runtime that assumes sorted or equal lengths is caught.
PROMPT_LENGTHS = {
    "b1": [17],
    "b3": [300, 1, 128],
    "b8": [16, 129, 2, 64, 15, 127, 200, 33],
}

# The defaults of the sizes (the brief's "small Qwen3" for kiln's checks).
DEFAULTS = dict(layers=4, hidden=2048, heads=16, kv_heads=8, head_dim=128, intermediate=6144,
                vocab=32000)
# init std = INIT_STD_AT_2048 * sqrt(2048 / hidden) unless --init-std says otherwise (the docstring
# says why), so a tiny test model behaves like the default one.
INIT_STD_AT_2048 = 0.01
DEFAULT_EMBED_STD = 0.2
DEFAULT_NORM_STD = 0.1


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory to write the checkpoint and prompts.json to")
    p.add_argument("--layers", type=int, default=DEFAULTS["layers"])
    p.add_argument("--hidden", type=int, default=DEFAULTS["hidden"])
    p.add_argument("--heads", type=int, default=DEFAULTS["heads"], help="query heads")
    p.add_argument("--kv-heads", type=int, default=DEFAULTS["kv_heads"])
    p.add_argument("--head-dim", type=int, default=DEFAULTS["head_dim"])
    p.add_argument("--intermediate", type=int, default=DEFAULTS["intermediate"])
    p.add_argument("--vocab", type=int, default=DEFAULTS["vocab"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-std", type=float, default=None,
                   help="std of every linear weight (q/k/v/o, gate/up/down, lm_head); "
                        f"default {INIT_STD_AT_2048} * sqrt(2048 / hidden)")
    p.add_argument("--embed-std", type=float, default=DEFAULT_EMBED_STD,
                   help="std of the token embedding; default %(default)s")
    p.add_argument("--norm-std", type=float, default=DEFAULT_NORM_STD,
                   help="RMSNorm weights are 1 + norm_std * N(0,1); default %(default)s")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where the margin check runs (default: cuda if available)")
    p.add_argument("--no-stats", action="store_true", help="skip the float32/bf16 margin check")
    args = p.parse_args(argv)
    if args.init_std is None:
        args.init_std = INIT_STD_AT_2048 * (2048 / args.hidden) ** 0.5
    return args


def make_config(args):
    from transformers import Qwen3Config

    config = Qwen3Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        hidden_act="silu",
        max_position_embeddings=40960,
        rms_norm_eps=1e-6,
        rope_theta=1e6,  # transformers 5 moves this into rope_parameters {"rope_type": "default"}
        tie_word_embeddings=False,
        attention_bias=False,
        attention_dropout=0.0,
        use_sliding_window=False,
        sliding_window=None,
        max_window_layers=args.layers,
    )
    config.architectures = ["Qwen3ForCausalLM"]
    theta = getattr(config, "rope_theta", None)
    if theta is None:
        theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta")
    if theta != 1e6:
        sys.exit(f"make_model: this transformers' Qwen3Config did not take rope_theta 1e6 (got {theta})")
    return config


def init_weights(model, args):
    """Draws every parameter from a seeded CPU generator (see the module docstring), rounded to bf16."""
    gen = torch.Generator().manual_seed(args.seed)
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    if tied:
        sys.exit("make_model: lm_head is tied to the embedding; kiln's checks want an untied head")
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
            if name.endswith("norm.weight"):  # input_layernorm, post_attention_layernorm, q/k_norm, norm
                value = 1.0 + args.norm_std * noise
            elif name.endswith("embed_tokens.weight"):
                value = args.embed_std * noise
            elif name.endswith("proj.weight") or name == "lm_head.weight":
                value = args.init_std * noise
            else:
                sys.exit(f"make_model: unexpected parameter {name} {tuple(param.shape)}")
            param.copy_(value.to(torch.bfloat16).to(param.dtype))


def make_prompts(args):
    rng = np.random.default_rng(args.seed)
    batches = []
    for name, lengths in PROMPT_LENGTHS.items():
        prompts = [[int(t) for t in rng.integers(0, args.vocab, size=n)] for n in lengths]
        batches.append({"name": name, "prompts": prompts})
    return {"batches": batches}


def expected_tensors(args):
    """The tensors kiln's loader (examples/qwen3/model/checkpoint.h) expects, name -> shape."""
    h, q, kv, d = args.hidden, args.heads * args.head_dim, args.kv_heads * args.head_dim, args.head_dim
    out = {"model.embed_tokens.weight": [args.vocab, h], "model.norm.weight": [h],
           "lm_head.weight": [args.vocab, h]}
    for i in range(args.layers):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
            p + "self_attn.q_proj.weight": [q, h], p + "self_attn.k_proj.weight": [kv, h],
            p + "self_attn.v_proj.weight": [kv, h], p + "self_attn.o_proj.weight": [h, q],
            p + "self_attn.q_norm.weight": [d], p + "self_attn.k_norm.weight": [d],
            p + "mlp.gate_proj.weight": [args.intermediate, h],
            p + "mlp.up_proj.weight": [args.intermediate, h],
            p + "mlp.down_proj.weight": [h, args.intermediate],
        })
    return out


def save_checkpoint(model, out_dir):
    """save_pretrained in bf16 as one model.safetensors (whatever this transformers' defaults are)."""
    model.to(torch.bfloat16)
    kwargs = {"max_shard_size": "1000GB"}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kwargs["safe_serialization"] = True  # transformers 4; 5 always writes safetensors
    model.save_pretrained(out_dir, **kwargs)


def check_checkpoint(out_dir, args):
    """Refuses a save that kiln's loader would refuse: the dtype key, one file, every tensor."""
    from safetensors import safe_open

    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    dtypes = {config.get(k) for k in ("torch_dtype", "dtype")} - {None}
    problems = []
    if dtypes != {"bfloat16"}:
        problems.append(f"config.json's torch_dtype/dtype is {dtypes or 'missing'}, not bfloat16")
    if config.get("tie_word_embeddings") is not False:
        problems.append("config.json's tie_word_embeddings is not false")
    if os.path.exists(os.path.join(out_dir, "model.safetensors.index.json")):
        problems.append("the checkpoint was sharded (model.safetensors.index.json)")
    expected = expected_tensors(args)
    with safe_open(os.path.join(out_dir, "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        for name in sorted(names - set(expected)):
            problems.append(f"unexpected tensor {name}")
        for name in sorted(set(expected) - names):
            problems.append(f"missing tensor {name}")
        for name in sorted(names & set(expected)):
            t = f.get_slice(name)
            if t.get_dtype() != "BF16" or list(t.get_shape()) != expected[name]:
                problems.append(f"{name}: {t.get_dtype()} {t.get_shape()}, expected BF16 {expected[name]}")
    if problems:
        sys.exit("make_model: the saved checkpoint is not what kiln's loader reads:\n  "
                 + "\n  ".join(problems))
    return config


@torch.inference_mode()
def margin_stats(model_fp32, prompts, device):
    """float32 top-1/top-2 margins and bf16's error at every position of every prompt."""
    import copy

    model_bf16 = copy.deepcopy(model_fp32).to(torch.bfloat16)
    margins, errors, scales = [], [], []
    for batch in prompts["batches"]:
        for prompt in batch["prompts"]:
            ids = torch.tensor([prompt], device=device)
            ref = model_fp32(input_ids=ids, use_cache=False).logits[0].float()
            low = model_bf16(input_ids=ids, use_cache=False).logits[0].float()
            top2 = ref.topk(2, dim=-1).values
            margins.append((top2[:, 0] - top2[:, 1]).cpu())
            errors.append((low - ref).abs().amax(dim=-1).cpu())
            scales.append(ref.std(dim=-1).cpu())
    del model_bf16
    margins, errors, scales = torch.cat(margins), torch.cat(errors), torch.cat(scales)
    q = lambda t, p: float(t.quantile(p))  # noqa: E731
    return {
        "positions": int(margins.numel()),
        "margin_median": q(margins, 0.5), "margin_p10": q(margins, 0.1), "margin_p90": q(margins, 0.9),
        "logit_std_median": q(scales, 0.5),
        "bf16_max_abs_err_median": q(errors, 0.5),
        "clear_fraction": float((margins > 4 * errors).float().mean()),
    }


def main(argv=None):
    args = parse_args(argv)
    from transformers import Qwen3ForCausalLM

    hf_compat.quiet()
    torch.set_float32_matmul_precision("highest")  # no TF32 in the float32 check
    config = make_config(args)
    torch.manual_seed(args.seed)  # transformers' own init runs first; init_weights overwrites it all
    model = Qwen3ForCausalLM(config).to(torch.float32).eval()
    init_weights(model, args)
    n_params = sum(p.numel() for p in model.parameters())

    prompts = make_prompts(args)
    os.makedirs(args.out, exist_ok=True)

    stats = None
    if not args.no_stats:
        model.to(args.device)
        stats = margin_stats(model, prompts, args.device)
        model.to("cpu")

    save_checkpoint(model, args.out)
    saved = check_checkpoint(args.out, args)
    with open(os.path.join(args.out, "prompts.json"), "w") as f:
        json.dump(prompts, f)

    lengths = {b["name"]: [len(p) for p in b["prompts"]] for b in prompts["batches"]}
    print(f"wrote {args.out}: Qwen3ForCausalLM, {n_params / 1e6:.1f}M parameters, "
          f"dtype {saved.get('dtype', saved.get('torch_dtype'))}, seed {args.seed}")
    print(f"  layers {args.layers} hidden {args.hidden} heads {args.heads}/{args.kv_heads} "
          f"head_dim {args.head_dim} intermediate {args.intermediate} vocab {args.vocab}")
    print(f"  init std {args.init_std:.4g}, embedding std {args.embed_std}, norm weights 1 + {args.norm_std} N(0,1)")
    print(f"  prompts.json lengths: {lengths}")
    if stats:
        print(f"  float32 next-token logits over {stats['positions']} positions (device {args.device}):")
        print(f"    top-1/top-2 margin: median {stats['margin_median']:.4f} "
              f"(p10 {stats['margin_p10']:.4f}, p90 {stats['margin_p90']:.4f}); "
              f"logit std median {stats['logit_std_median']:.3f}")
        print(f"    bf16 max abs logit error per position: median {stats['bf16_max_abs_err_median']:.4f}")
        print(f"    clear (margin > 4 x bf16 max abs error): {100 * stats['clear_fraction']:.1f}% of positions")


if __name__ == "__main__":
    main()
