"""Build the random-weight Qwen3 checkpoint and the prompts that kiln's Qwen3 program is checked on.

What it writes to --out DIR, for --kind (kinds.py has the tensor layouts):

- ``dense`` (the default): ``config.json`` + ``model.safetensors`` (one file, bfloat16): a
  ``Qwen3ForCausalLM`` with random weights, saved by transformers' ``save_pretrained``. The
  architecture is fixed to what kiln's loader reads: untied LM head, ``rope_theta`` 1e6,
  ``rms_norm_eps`` 1e-6, no sliding window, no attention bias, SiLU. The sizes come from the flags
  (the defaults: 4 layers, hidden 2048, 16 query heads, 8 KV heads, head_dim 128, intermediate
  6144, vocab 32000).
- ``moe``: a ``Qwen3MoeForCausalLM`` (model_type qwen3_moe) with the same attention and sizes,
  every layer's MLP a sparse MoE block: --experts 16 experts of --moe-intermediate 768, the top
  --top-k 4 per token, norm_topk_prob true, decoder_sparse_step 1, mlp_only_layers []
  (intermediate_size stays in the config, unused). The safetensors file (bf16) is written here, in
  the per-expert layout of Qwen's checkpoints (``mlp.gate.weight`` [E, H], ``mlp.experts.{e}.
  gate_proj / up_proj .weight`` [I, H], ``down_proj.weight`` [H, I]) whatever layout this
  transformers holds in memory; config.json is transformers' with ``num_experts`` (transformers 5
  writes ``num_local_experts``, which kiln's loader and transformers 4 do not read). After
  writing, the checkpoint is loaded back with ``from_pretrained`` and must equal, parameter for
  parameter, the model built in memory.
- ``gptq``: the ``dense`` model (the same weights for the same seed), its seven projections per
  layer quantized to int4 (symmetric, group 128, AutoGPTQ's v1 packing, kinds.py) and written
  here: ``qweight`` / ``qzeros`` / ``scales`` per projection, embedding / norms / lm_head bf16,
  config.json with the quantization_config of kinds.GPTQ_CONFIG. Its reference model is the dense
  ``Qwen3ForCausalLM`` with the dequantized weights (q - 8) * scale (kinds.gptq_reference_model);
  the margins below are that model's, and after writing, the file is read back, unpacked and
  checked against the in-memory q and scales, nibble by nibble.
- ``prompts.json``: ``{"batches": [{"name": "b1", "prompts": [[ids...]]}, {"name": "b3", ...},
  {"name": "b8", ...}]}``: batches of 1, 3 and 8 prompts of uniform random token ids in
  [0, vocab), with the lengths of ``PROMPT_LENGTHS`` below (1 ... 300, around the KV page size 16).

Everything is deterministic from --seed: the weights are drawn with a seeded CPU torch generator
(not transformers' own initialisation, which differs between versions), the prompts with numpy's
``default_rng(seed)``.

The weights: every linear weight (q/k/v/o, gate/up/down, lm_head) is N(0, init_std^2), with
init_std = 0.01 * sqrt(2048 / hidden) unless --init-std is given (moe: the experts' gate/up/down
N(0, expert_std^2), expert_std = init_std unless --expert-std, and the router N(0, router_std^2),
router_std = 1 / sqrt(hidden) unless --router-std, so that the router logits have a std of about 1
at any width: the router reads an RMS-normalised hidden state); the token embedding
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

The MoE's stds, from a sweep at the default moe sizes (float32 vs bf16 logits over every position,
CPU): with the experts at init_std (0.01) the MoE block's output is about 1/5 of the dense MLP's
(RMS 0.017 vs 0.086 against a residual of 0.2-0.27), 53% of positions are clear, bf16's rel L2 is
1.0%, and a kernel that skips norm_topk_prob moves the logits 6.1x bf16's rel L2 (top-3 instead of
top-4: 5.0x). Raising the experts' std to 0.013 / 0.017 (the latter matches the dense MLP's
share) drops the clear positions to 48% / 35% and raises bf16's rel L2 to 2.0% / 5.2% (bf16's
top-4 set differs from float32's at more (position, layer) pairs, and a swapped expert moves the
hidden state of that position and, through attention, of later ones), while the two faults stay
at 5-7x: no better caught, with fewer clear steps. Router logits of std 2 or 3 (top-1 weight 0.55
/ 0.65 instead of 0.41) did not help either (35% / 33% clear at expert std 0.017). Each layer's
expert load stays within about 0.6x-1.4x of uniform (the prompts are random tokens).

The margin check: before saving, the script runs every prompt through the model in float32 and
in bfloat16 (full sequence, every position's next-token logits) and prints the float32 top-1 /
top-2 logit margin (median, 10th and 90th percentile), the bf16-vs-float32 max abs logit error
per position, and the fraction of positions that compare.py's rule would call clear; for moe
also each layer's expert load (the share of the float32 model's top-k picks that went to each
expert, over every position), the mean routing weight of the 1st and the k-th pick, and how
often bf16's top-k set differs from float32's. --no-stats skips it.

Run (on any machine with torch + transformers; --device picks where the margin check runs):

    python make_model.py --out /tmp/q3
    python make_model.py --out /tmp/q3tiny --layers 2 --hidden 128 --heads 4 --kv-heads 2 \\
        --head-dim 64 --intermediate 256 --vocab 1000
    python make_model.py --kind moe --out /tmp/q3moe
    python make_model.py --kind gptq --out /tmp/q3gptq
    python make_model.py --kind moe --out /tmp/q3moetiny --layers 2 --hidden 256 --heads 4 \\
        --kv-heads 2 --head-dim 64 --intermediate 512 --vocab 1000 --experts 8 --top-k 2 \\
        --moe-intermediate 128
    python make_model.py --kind gptq --out /tmp/q3gptqtiny --layers 2 --hidden 256 --heads 4 \\
        --kv-heads 2 --head-dim 64 --intermediate 512 --vocab 1000
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
import kinds

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
# moe only: the experts (Qwen3-30B-A3B's expert width, fewer experts).
MOE_DEFAULTS = dict(experts=16, top_k=4, moe_intermediate=768)
# init std = INIT_STD_AT_2048 * sqrt(2048 / hidden) unless --init-std says otherwise (the docstring
# says why), so a tiny test model behaves like the default one.
INIT_STD_AT_2048 = 0.01
DEFAULT_EMBED_STD = 0.2
DEFAULT_NORM_STD = 0.1
# moe only: the router's std is ROUTER_LOGIT_STD / sqrt(hidden), router logits of std about
# ROUTER_LOGIT_STD at any width (the router reads an RMS-normalised hidden state); the experts'
# std is init_std times EXPERT_STD_FACTOR (the docstring says why 1).
ROUTER_LOGIT_STD = 1.0
EXPERT_STD_FACTOR = 1.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory to write the checkpoint and prompts.json to")
    p.add_argument("--kind", choices=kinds.KINDS, default="dense",
                   help="dense Qwen3, Qwen3-MoE, or the dense model with GPTQ int4 projections (default %(default)s)")
    p.add_argument("--layers", type=int, default=DEFAULTS["layers"])
    p.add_argument("--hidden", type=int, default=DEFAULTS["hidden"])
    p.add_argument("--heads", type=int, default=DEFAULTS["heads"], help="query heads")
    p.add_argument("--kv-heads", type=int, default=DEFAULTS["kv_heads"])
    p.add_argument("--head-dim", type=int, default=DEFAULTS["head_dim"])
    p.add_argument("--intermediate", type=int, default=DEFAULTS["intermediate"])
    p.add_argument("--vocab", type=int, default=DEFAULTS["vocab"])
    p.add_argument("--experts", type=int, default=MOE_DEFAULTS["experts"], help="moe: num_experts")
    p.add_argument("--top-k", type=int, default=MOE_DEFAULTS["top_k"], help="moe: num_experts_per_tok")
    p.add_argument("--moe-intermediate", type=int, default=MOE_DEFAULTS["moe_intermediate"],
                   help="moe: moe_intermediate_size, each expert's width")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-std", type=float, default=None,
                   help="std of every linear weight (q/k/v/o, gate/up/down, lm_head); "
                        f"default {INIT_STD_AT_2048} * sqrt(2048 / hidden)")
    p.add_argument("--embed-std", type=float, default=DEFAULT_EMBED_STD,
                   help="std of the token embedding; default %(default)s")
    p.add_argument("--norm-std", type=float, default=DEFAULT_NORM_STD,
                   help="RMSNorm weights are 1 + norm_std * N(0,1); default %(default)s")
    p.add_argument("--router-std", type=float, default=None,
                   help=f"moe: std of the router weight; default {ROUTER_LOGIT_STD} / sqrt(hidden)")
    p.add_argument("--expert-std", type=float, default=None,
                   help=f"moe: std of the experts' gate/up/down; default {EXPERT_STD_FACTOR} x init std")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where the margin check runs (default: cuda if available)")
    p.add_argument("--no-stats", action="store_true", help="skip the float32/bf16 margin check")
    args = p.parse_args(argv)
    if args.init_std is None:
        args.init_std = INIT_STD_AT_2048 * (2048 / args.hidden) ** 0.5
    if args.router_std is None:
        args.router_std = ROUTER_LOGIT_STD / args.hidden ** 0.5
    if args.expert_std is None:
        args.expert_std = EXPERT_STD_FACTOR * args.init_std
    if args.kind == "moe" and not 1 <= args.top_k <= args.experts:
        p.error(f"--top-k {args.top_k} must be in 1 .. --experts {args.experts}")
    if args.kind == "gptq":
        bad = kinds.gptq_shape_problems(sizes(args))
        if bad:
            p.error(f"--kind gptq needs every linear's in features a multiple of {kinds.GPTQ_GROUP} and out "
                    f"features a multiple of {kinds.GPTQ_PACK}; these are not: {', '.join(bad[:4])}")
    return args


def sizes(args):
    s = {k: getattr(args, k) for k in DEFAULTS}
    if args.kind == "moe":
        s.update({k: getattr(args, k) for k in MOE_DEFAULTS})
    return s


def make_config(args):
    """The transformers config of the model (gptq: of the dense model it dequantizes to)."""
    from transformers import Qwen3Config, Qwen3MoeConfig

    common = dict(
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
    )
    if args.kind == "moe":
        config = Qwen3MoeConfig(
            **common,
            num_experts=args.experts,
            num_experts_per_tok=args.top_k,
            moe_intermediate_size=args.moe_intermediate,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            output_router_logits=False,
        )
        config.architectures = ["Qwen3MoeForCausalLM"]
    else:
        config = Qwen3Config(**common, max_window_layers=args.layers)
        config.architectures = ["Qwen3ForCausalLM"]
    theta = getattr(config, "rope_theta", None)
    if theta is None:
        theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta")
    if theta != 1e6:
        sys.exit(f"make_model: this transformers' {type(config).__name__} did not take rope_theta 1e6 (got {theta})")
    return config


def init_std_of(name, args):
    """The std (or, for norms, the spread around 1) of one weight; see the module docstring."""
    if name.endswith("norm.weight"):  # input_layernorm, post_attention_layernorm, q/k_norm, norm
        return args.norm_std
    if name.endswith("embed_tokens.weight"):
        return args.embed_std
    if name.endswith(".mlp.gate.weight"):  # the MoE router
        return args.router_std
    if ".mlp.experts." in name:
        return args.expert_std
    if name.endswith("proj.weight") or name == "lm_head.weight":
        return args.init_std
    sys.exit(f"make_model: unexpected parameter {name}")


def draw_weights(args):
    """Every float weight (kinds.float_tensors: gptq's before quantization), drawn in sorted name
    order from one seeded CPU generator and rounded to bf16 once; name -> float32 tensor."""
    gen = torch.Generator().manual_seed(args.seed)
    weights = {}
    for name, shape in sorted(kinds.float_tensors(args.kind, sizes(args)).items()):
        noise = torch.randn(shape, generator=gen, dtype=torch.float32)
        std = init_std_of(name, args)
        value = 1.0 + std * noise if name.endswith("norm.weight") else std * noise
        weights[name] = value.to(torch.bfloat16).to(torch.float32)
    return weights


def quantize_gptq(weights):
    """Splits the weights into the file's tensors and the reference's.

    Returns (file tensors: bf16 or GPTQ's qweight / qzeros / scales; reference weights: float32,
    the quantized projections replaced by (q - 8) * scale; {name: (q, scale)} of each projection;
    the quantization error ||W' - W|| / ||W|| over every projection and the range of q).
    """
    file_tensors, reference, quantized = {}, {}, {}
    err2 = ref2 = 0.0
    q_min, q_max = kinds.GPTQ_MAXQ, 0
    for name, w in weights.items():
        if not kinds.is_quantized("gptq", name):
            file_tensors[name] = w.to(torch.bfloat16)
            reference[name] = w
            continue
        q, scale = kinds.gptq_quantize(w)
        prefix = name[: -len(".weight")]
        qweight, qzeros, scales = kinds.gptq_pack(q, scale)
        file_tensors.update({prefix + ".qweight": qweight, prefix + ".qzeros": qzeros,
                             prefix + ".scales": scales})
        # Straight from q and the scales, not through the packing that verify_gptq checks.
        reference[name] = (q - kinds.GPTQ_ZERO).float() * scale.float().repeat_interleave(kinds.GPTQ_GROUP, dim=1)
        quantized[name] = (q, scale)
        err2 += float((reference[name] - w).double().pow(2).sum())
        ref2 += float(w.double().pow(2).sum())
        q_min, q_max = min(q_min, int(q.min())), max(q_max, int(q.max()))
    return file_tensors, reference, quantized, {"rel_l2": (err2 / ref2) ** 0.5, "q_min": q_min, "q_max": q_max}


def make_prompts(args):
    rng = np.random.default_rng(args.seed)
    batches = []
    for name, lengths in PROMPT_LENGTHS.items():
        prompts = [[int(t) for t in rng.integers(0, args.vocab, size=n)] for n in lengths]
        batches.append({"name": name, "prompts": prompts})
    return {"batches": batches}


def save_checkpoint(model, out_dir):
    """save_pretrained in bf16 as one model.safetensors (whatever this transformers' defaults are)."""
    model.to(torch.bfloat16)
    kwargs = {"max_shard_size": "1000GB"}
    if "safe_serialization" in inspect.signature(model.save_pretrained).parameters:
        kwargs["safe_serialization"] = True  # transformers 4; 5 always writes safetensors
    model.save_pretrained(out_dir, **kwargs)


def write_checkpoint(config, tensors, out_dir, kind):
    """moe / gptq: config.json as transformers writes it (dtype bfloat16; moe: num_experts, not
    transformers 5's num_local_experts; gptq: plus quantization_config) and model.safetensors
    written here from ``tensors`` (metadata format "pt", as save_pretrained's)."""
    from safetensors.torch import save_file

    setattr(config, "dtype" if hf_compat.transformers_version() >= (4, 56) else "torch_dtype", torch.bfloat16)
    config.save_pretrained(out_dir)
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        data = json.load(f)
    if kind == "moe" and "num_local_experts" in data:
        data["num_experts"] = data.pop("num_local_experts")
    if kind == "gptq":
        data["quantization_config"] = dict(kinds.GPTQ_CONFIG)
    with open(path, "w") as f:
        f.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    for stale in ("model.safetensors.index.json", "generation_config.json"):
        if os.path.exists(os.path.join(out_dir, stale)):
            os.remove(os.path.join(out_dir, stale))
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})


def check_checkpoint(out_dir, args):
    """Refuses a save that kiln's loader would refuse: the config keys, one file, every tensor."""
    from safetensors import safe_open

    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    dtypes = {config.get(k) for k in ("torch_dtype", "dtype")} - {None}
    problems = []
    if dtypes != {"bfloat16"}:
        problems.append(f"config.json's torch_dtype/dtype is {dtypes or 'missing'}, not bfloat16")
    if config.get("tie_word_embeddings") is not False:
        problems.append("config.json's tie_word_embeddings is not false")
    if kinds.kind_of(config) != args.kind:
        problems.append(f"config.json reads as kind {kinds.kind_of(config)}, not {args.kind}")
    if args.kind == "moe":
        want = {"num_experts": args.experts, "num_experts_per_tok": args.top_k,
                "moe_intermediate_size": args.moe_intermediate, "norm_topk_prob": True,
                "decoder_sparse_step": 1, "mlp_only_layers": [], "model_type": "qwen3_moe"}
        problems += [f"config.json's {k} is {config.get(k)!r}, not {v!r}" for k, v in want.items()
                     if config.get(k) != v]
    if args.kind == "gptq" and config.get("quantization_config") != kinds.GPTQ_CONFIG:
        problems.append(f"config.json's quantization_config is {config.get('quantization_config')}")
    if os.path.exists(os.path.join(out_dir, "model.safetensors.index.json")):
        problems.append("the checkpoint was sharded (model.safetensors.index.json)")
    expected = kinds.expected_tensors(args.kind, sizes(args))
    with safe_open(os.path.join(out_dir, "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        for name in sorted(names - set(expected)):
            problems.append(f"unexpected tensor {name}")
        for name in sorted(set(expected) - names):
            problems.append(f"missing tensor {name}")
        for name in sorted(names & set(expected)):
            t = f.get_slice(name)
            dtype, shape = expected[name]
            if t.get_dtype() != dtype or list(t.get_shape()) != shape:
                problems.append(f"{name}: {t.get_dtype()} {t.get_shape()}, expected {dtype} {shape}")
    if problems:
        sys.exit("make_model: the saved checkpoint is not what kiln's loader reads:\n  "
                 + "\n  ".join(problems))
    return config


def verify_gptq(out_dir, quantized):
    """Reads the written file back: every projection's nibbles, zero words and scales must be the
    in-memory q (z - 1 = 7) and scales, by the layout spelled out bit by bit; returns a summary."""
    tensors = kinds.read_safetensors(out_dir)
    gen = torch.Generator().manual_seed(1)
    problems, spot = [], 0
    zero_word = sum((kinds.GPTQ_ZERO - 1) << (4 * j) for j in range(8))
    for name, (q, scale) in quantized.items():
        prefix = name[: -len(".weight")]
        qweight, qzeros, scales = (tensors[prefix + s] for s in (".qweight", ".qzeros", ".scales"))
        unpacked, zeros = kinds.gptq_unpack(qweight, qzeros)
        if not torch.equal(unpacked, q):
            problems.append(f"{prefix}: unpacked qweight differs from q")
        if not bool((zeros == kinds.GPTQ_ZERO - 1).all()):
            problems.append(f"{prefix}: a stored zero is not {kinds.GPTQ_ZERO - 1}")
        if not torch.equal(scales, scale.t()):
            problems.append(f"{prefix}: scales differ")
        # The layout written out literally, at random (n, k): nibble k % 8 of qweight[k // 8, n],
        # counted from the least significant bit; qzeros[k // 128, n // 8] == 0x77777777.
        n_out, k_in = q.shape
        for n, k in zip(torch.randint(0, n_out, (64,), generator=gen).tolist(),
                        torch.randint(0, k_in, (64,), generator=gen).tolist()):
            word = int(qweight[k // 8, n]) & 0xFFFFFFFF
            zword = int(qzeros[k // 128, n // 8]) & 0xFFFFFFFF
            if (word >> (4 * (k % 8))) & 0xF != int(q[n, k]) or zword != zero_word \
                    or float(scales[k // 128, n]) != float(scale[n, k // 128]):
                problems.append(f"{prefix}: the packing at n={n}, k={k} is not AutoGPTQ's")
            spot += 1
    if problems:
        sys.exit("make_model: the GPTQ tensors do not read back:\n  " + "\n  ".join(problems[:12]))
    return spot


@torch.inference_mode()
def verify_reload(out_dir, model, prompts):
    """Loads the written checkpoint as compare.py does (hf_compat.load_model, float32) and checks
    it against the model built in memory: every parameter equal, the logits of prompt b1 close."""
    loaded = hf_compat.load_model(out_dir, torch.float32, "eager", "cpu")
    mine = dict(model.named_parameters())
    theirs = dict(loaded.named_parameters())
    problems = []
    if set(mine) != set(theirs):
        problems.append(f"parameter names differ: {sorted(set(mine) ^ set(theirs))[:4]}")
    problems += [f"{n} differs" for n in sorted(set(mine) & set(theirs))
                 if not torch.equal(mine[n].detach().cpu(), theirs[n].detach())]
    ids = torch.tensor([prompts["batches"][0]["prompts"][0]])
    device = next(model.parameters()).device
    a = model(input_ids=ids.to(device), use_cache=False).logits[0].float().cpu()
    b = loaded(input_ids=ids, use_cache=False).logits[0].float()
    diff = float((a - b).abs().max())
    if diff > 1e-4 * float(a.abs().max()):
        problems.append(f"logits of prompt b1 differ by {diff:.3e}")
    if problems:
        sys.exit(f"make_model: {out_dir} does not load back as the model built in memory:\n  "
                 + "\n  ".join(problems[:12]))
    return {"parameters": len(mine), "logits_max_abs_diff": diff}


class RouterTap:
    """Forward hooks on every MoE router (``mlp.gate``): the router logits of each call, [T, E]."""

    def __init__(self, model):
        self.calls, self.handles = [], []
        for name, module in model.named_modules():
            if name.endswith(".mlp.gate"):
                self.handles.append(module.register_forward_hook(self.hook))

    def hook(self, module, inputs, output):
        logits = output[0] if isinstance(output, tuple) else output  # 5.x: (logits, scores, indices)
        self.calls.append(logits.detach().float().reshape(-1, logits.shape[-1]).cpu())

    def take(self):
        calls, self.calls = self.calls, []
        return calls

    def remove(self):
        for h in self.handles:
            h.remove()


@torch.inference_mode()
def margin_stats(model_fp32, prompts, device, top_k=None):
    """float32 top-1/top-2 margins and bf16's error at every position of every prompt; for a
    MoE (top_k set) also the expert load and routing statistics."""
    import copy

    model_bf16 = copy.deepcopy(model_fp32).to(torch.bfloat16)
    taps = (RouterTap(model_fp32), RouterTap(model_bf16)) if top_k else None
    margins, errors, scales = [], [], []
    picks, weights, flips = None, [], []
    for batch in prompts["batches"]:
        for prompt in batch["prompts"]:
            ids = torch.tensor([prompt], device=device)
            ref = model_fp32(input_ids=ids, use_cache=False).logits[0].float()
            low = model_bf16(input_ids=ids, use_cache=False).logits[0].float()
            top2 = ref.topk(2, dim=-1).values
            margins.append((top2[:, 0] - top2[:, 1]).cpu())
            errors.append((low - ref).abs().amax(dim=-1).cpu())
            scales.append(ref.std(dim=-1).cpu())
            if taps:
                # The selection transformers makes: top-k of softmax(router logits in float32).
                ref_calls, low_calls = taps[0].take(), taps[1].take()
                if picks is None:
                    picks = [torch.zeros(c.shape[-1], dtype=torch.int64) for c in ref_calls]
                for layer, (r, l) in enumerate(zip(ref_calls, low_calls)):
                    p = torch.softmax(r, dim=-1)
                    top = p.topk(top_k, dim=-1)
                    picks[layer] += torch.bincount(top.indices.flatten(), minlength=r.shape[-1])
                    w = top.values / top.values.sum(dim=-1, keepdim=True)
                    weights.append(w)
                    low_set = torch.softmax(l, dim=-1).topk(top_k, dim=-1).indices.sort(dim=-1).values
                    flips.append((low_set != top.indices.sort(dim=-1).values).any(dim=-1))
    if taps:
        for tap in taps:
            tap.remove()
    del model_bf16
    margins, errors, scales = torch.cat(margins), torch.cat(errors), torch.cat(scales)
    q = lambda t, p: float(t.quantile(p))  # noqa: E731
    stats = {
        "positions": int(margins.numel()),
        "margin_median": q(margins, 0.5), "margin_p10": q(margins, 0.1), "margin_p90": q(margins, 0.9),
        "logit_std_median": q(scales, 0.5),
        "bf16_max_abs_err_median": q(errors, 0.5),
        "clear_fraction": float((margins > 4 * errors).float().mean()),
    }
    if taps:
        w = torch.cat(weights)
        stats["expert_load"] = [(c.double() / c.sum()).tolist() for c in picks]
        stats["routing_weight_first_mean"] = float(w[:, 0].mean())
        stats["routing_weight_last_mean"] = float(w[:, -1].mean())
        stats["bf16_topk_set_differs_fraction"] = float(torch.cat(flips).float().mean())
    return stats


def main(argv=None):
    args = parse_args(argv)
    from transformers import Qwen3ForCausalLM, Qwen3MoeForCausalLM

    hf_compat.quiet()
    torch.set_float32_matmul_precision("highest")  # no TF32 in the float32 check
    config = make_config(args)
    torch.manual_seed(args.seed)  # transformers' own init runs first; the weights overwrite it all
    cls = Qwen3MoeForCausalLM if args.kind == "moe" else Qwen3ForCausalLM
    model = cls(config).to(torch.float32).eval()
    if model.get_output_embeddings().weight is model.get_input_embeddings().weight:
        sys.exit("make_model: lm_head is tied to the embedding; kiln's checks want an untied head")
    hf_compat.set_experts_eager(model)  # moe on transformers 5: the float32 experts one by one
    weights = draw_weights(args)
    file_tensors, quantized, qstats = None, None, None
    if args.kind == "gptq":
        file_tensors, weights, quantized, qstats = quantize_gptq(weights)
    elif args.kind == "moe":
        file_tensors = {name: w.to(torch.bfloat16) for name, w in weights.items()}
    try:
        kinds.load_state(model, weights)
    except ValueError as e:
        sys.exit(f"make_model: {e}")
    n_params = sum(p.numel() for p in model.parameters())

    prompts = make_prompts(args)
    os.makedirs(args.out, exist_ok=True)

    stats = None
    if not args.no_stats:
        model.to(args.device)
        stats = margin_stats(model, prompts, args.device, top_k=args.top_k if args.kind == "moe" else None)
        model.to("cpu")

    if args.kind == "dense":
        save_checkpoint(model, args.out)
    else:
        write_checkpoint(config, file_tensors, args.out, args.kind)
    saved = check_checkpoint(args.out, args)
    with open(os.path.join(args.out, "prompts.json"), "w") as f:
        json.dump(prompts, f)
    spot = verify_gptq(args.out, quantized) if args.kind == "gptq" else None
    reload = verify_reload(args.out, model, prompts) if args.kind != "dense" else None

    lengths = {b["name"]: [len(p) for p in b["prompts"]] for b in prompts["batches"]}
    arch = saved["architectures"][0] + (" with GPTQ int4 projections" if args.kind == "gptq" else "")
    print(f"wrote {args.out}: {arch}, {n_params / 1e6:.1f}M parameters, "
          f"dtype {saved.get('dtype', saved.get('torch_dtype'))}, seed {args.seed}")
    print(f"  layers {args.layers} hidden {args.hidden} heads {args.heads}/{args.kv_heads} "
          f"head_dim {args.head_dim} intermediate {args.intermediate} vocab {args.vocab}")
    print(f"  init std {args.init_std:.4g}, embedding std {args.embed_std}, norm weights 1 + {args.norm_std} N(0,1)")
    if args.kind == "moe":
        print(f"  experts {args.experts}, top-k {args.top_k}, moe_intermediate {args.moe_intermediate}, "
              f"norm_topk_prob true; router std {args.router_std:.4g}, expert std {args.expert_std:.4g}")
    if args.kind == "gptq":
        print(f"  GPTQ int4, symmetric, group {kinds.GPTQ_GROUP}, v1 zeros: {len(quantized)} projections; "
              f"||W' - W|| / ||W|| = {qstats['rel_l2']:.4f} (W' = (q - 8) * scale, the reference's weights); "
              f"q spans {qstats['q_min']}..{qstats['q_max']}; {spot} nibbles checked against the layout")
    print(f"  prompts.json lengths: {lengths}")
    if stats:
        print(f"  float32 next-token logits over {stats['positions']} positions (device {args.device}):")
        print(f"    top-1/top-2 margin: median {stats['margin_median']:.4f} "
              f"(p10 {stats['margin_p10']:.4f}, p90 {stats['margin_p90']:.4f}); "
              f"logit std median {stats['logit_std_median']:.3f}")
        print(f"    bf16 max abs logit error per position: median {stats['bf16_max_abs_err_median']:.4f}")
        print(f"    clear (margin > 4 x bf16 max abs error): {100 * stats['clear_fraction']:.1f}% of positions")
    if stats and "expert_load" in stats:
        e = args.experts
        print(f"  expert load (share of the float32 top-{args.top_k} picks per expert, x {e} so 1.00 = uniform):")
        for layer, load in enumerate(stats["expert_load"]):
            print(f"    layer {layer}: " + " ".join(f"{e * x:.2f}" for x in load)
                  + f"  (min {e * min(load):.2f}, max {e * max(load):.2f})")
        print(f"  routing weight (after norm_topk_prob) of the 1st pick: mean "
              f"{stats['routing_weight_first_mean']:.3f}, of the last (#{args.top_k}): "
              f"{stats['routing_weight_last_mean']:.3f}; bf16's top-{args.top_k} set differs from "
              f"float32's at {100 * stats['bf16_topk_set_differs_fraction']:.1f}% of (position, layer)")
    if reload:
        how = ("Qwen3MoeForCausalLM.from_pretrained" if args.kind == "moe"
               else "the GPTQ reader (kinds.gptq_reference_model, as compare.py)")
        print(f"  reloaded with {how}: {reload['parameters']} parameters equal the in-memory model's; "
              f"prompt b1 logits max abs diff {reload['logits_max_abs_diff']:.2e}")


if __name__ == "__main__":
    main()
