"""The three checkpoint kinds kiln's Qwen3 program reads, and what the reference scripts need of them.

- ``dense``: ``Qwen3ForCausalLM``, every tensor bf16 (what transformers' save_pretrained writes).
- ``moe``: ``Qwen3MoeForCausalLM``, every tensor bf16, each layer's MLP a sparse MoE block: the
  router ``mlp.gate.weight`` [E, H] and per expert e ``mlp.experts.{e}.gate_proj.weight`` [I, H],
  ``up_proj.weight`` [I, H], ``down_proj.weight`` [H, I] (I = moe_intermediate_size), the layout
  of Qwen's released checkpoints. transformers 5 holds the experts fused in memory
  (``mlp.experts.gate_up_proj`` [E, 2I, H] = [gate_e; up_e], ``mlp.experts.down_proj`` [E, H, I])
  and converts the per-expert names when it loads; transformers 4 holds them per expert.
- ``gptq``: the dense model with the seven projections of every layer (q, k, v, o, gate, up,
  down) in AutoGPTQ's int4 format, symmetric, group 128, no act order (``GPTQ_CONFIG``). For a
  linear y = x W^T with W [N, K] (N out, K in), groups g of 128 along K:
  ``qweight`` int32 [K/8, N]: bits 4j..4j+3 (LSB first) of qweight[k // 8, n] hold q[n, k] for
  k % 8 = j, q in 0..15; ``qzeros`` int32 [K/128, N/8]: nibble j of qzeros[g, n // 8] holds
  z - 1 for n % 8 = j (checkpoint_format "gptq", i.e. v1: the stored value is one less than the
  zero point; symmetric int4 has z = 8, so every word is 0x77777777); ``scales`` float16
  [K/128, N]; no ``g_idx`` (the identity k // 128). The weight is W[n, k] = (q[n, k] - z) *
  scales[k // 128, n]. The embedding, the norms and lm_head stay bf16.

This module has the expected tensor names, dtypes and shapes of each kind (the same list as
kiln's loader, examples/qwen3/model/checkpoint.cpp ``expectedTensors``), the GPTQ quantizer,
packer, unpacker and dequantizer, the copy of per-expert weights into a model of whichever
transformers is installed, and the dequantized dense reference of a GPTQ checkpoint (a float32
``Qwen3ForCausalLM`` whose projection weights are (q - z) * scale, computed in float32, exactly).
"""

from __future__ import annotations

import json
import os
import re

import torch

KINDS = ("dense", "moe", "gptq")

GPTQ_BITS = 4
GPTQ_GROUP = 128
GPTQ_PACK = 32 // GPTQ_BITS  # int4 values per int32
GPTQ_MAXQ = (1 << GPTQ_BITS) - 1  # 15
GPTQ_ZERO = 1 << (GPTQ_BITS - 1)  # 8: the symmetric zero point; v1 files store it as 7
GPTQ_CONFIG = {"quant_method": "gptq", "bits": GPTQ_BITS, "group_size": GPTQ_GROUP, "sym": True,
               "desc_act": False, "checkpoint_format": "gptq"}

# The projections GPTQ quantizes in each layer, in model order.
ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


def read_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def kind_of(config):
    """The kind of a parsed config.json: gptq (a quantization_config), moe, or dense."""
    if config.get("quantization_config") is not None:
        method = config["quantization_config"].get("quant_method")
        if method != "gptq":
            raise ValueError(f"config.json: quantization_config.quant_method {method!r} is not gptq")
        return "gptq"
    archs = config.get("architectures") or []
    if archs == ["Qwen3MoeForCausalLM"]:
        return "moe"
    if archs == ["Qwen3ForCausalLM"]:
        return "dense"
    raise ValueError(f"config.json: architectures {archs} is none of Qwen3ForCausalLM, Qwen3MoeForCausalLM")


def sizes_of(config):
    """The sizes that fix the tensor list, from a parsed config.json."""
    s = {"layers": config["num_hidden_layers"], "hidden": config["hidden_size"],
         "heads": config["num_attention_heads"], "kv_heads": config["num_key_value_heads"],
         "head_dim": config["head_dim"], "intermediate": config["intermediate_size"],
         "vocab": config["vocab_size"]}
    if config.get("architectures") == ["Qwen3MoeForCausalLM"]:
        if config.get("mlp_only_layers") or config.get("decoder_sparse_step", 1) != 1:
            raise ValueError("only MoE configs with every layer sparse (mlp_only_layers [], "
                             "decoder_sparse_step 1) are made and checked here")
        s.update(experts=config["num_experts"], top_k=config["num_experts_per_tok"],
                 moe_intermediate=config["moe_intermediate_size"])
    return s


def linears(kind, s):
    """(name prefix, out features N, in features K) of every linear but lm_head, in model order."""
    h, q, kv = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    out = []
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj", q, h), (p + "self_attn.k_proj", kv, h),
                (p + "self_attn.v_proj", kv, h), (p + "self_attn.o_proj", h, q)]
        if kind == "moe":
            out.append((p + "mlp.gate", s["experts"], h))  # the router
            for e in range(s["experts"]):
                x = f"{p}mlp.experts.{e}."
                m = s["moe_intermediate"]
                out += [(x + "gate_proj", m, h), (x + "up_proj", m, h), (x + "down_proj", h, m)]
        else:
            m = s["intermediate"]
            out += [(p + "mlp.gate_proj", m, h), (p + "mlp.up_proj", m, h), (p + "mlp.down_proj", h, m)]
    return out


def float_tensors(kind, s):
    """name -> shape of the model's weights before any quantization (gptq: the dense model's)."""
    base = "moe" if kind == "moe" else "dense"
    h, d = s["hidden"], s["head_dim"]
    out = {"model.embed_tokens.weight": [s["vocab"], h], "model.norm.weight": [h],
           "lm_head.weight": [s["vocab"], h]}
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        out.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                    p + "self_attn.q_norm.weight": [d], p + "self_attn.k_norm.weight": [d]})
    for prefix, n, k in linears(base, s):
        out[prefix + ".weight"] = [n, k]
    return out


def is_quantized(kind, name):
    """Whether GPTQ quantizes the weight ``name`` (the seven projections of every layer)."""
    return kind == "gptq" and name.endswith("_proj.weight")


def expected_tensors(kind, s):
    """name -> (safetensors dtype, shape) of the checkpoint file: kiln's loader's list."""
    out = {}
    for name, shape in float_tensors(kind, s).items():
        if not is_quantized(kind, name):
            out[name] = ("BF16", shape)
            continue
        n, k = shape
        prefix = name[: -len(".weight")]
        out[prefix + ".qweight"] = ("I32", [k // GPTQ_PACK, n])
        out[prefix + ".qzeros"] = ("I32", [k // GPTQ_GROUP, n // GPTQ_PACK])
        out[prefix + ".scales"] = ("F16", [k // GPTQ_GROUP, n])
    return out


def gptq_shape_problems(s):
    """Linears whose dims do not tile GPTQ's packing: K % 128 and N % 8 must both be 0."""
    return [f"{prefix} [{n} x {k}]" for prefix, n, k in linears("dense", s)
            if k % GPTQ_GROUP or n % GPTQ_PACK]


# ----------------------------------------------------------------------------------------------
# GPTQ int4


def _to_int32(words):
    """int64 tensor of values in [0, 2^32) -> int32 of the same bits."""
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)


def gptq_quantize(w):
    """Symmetric int4 per (row, group of 128 along K) of w [N, K] (float32).

    scale = max |w| over the group / 7, rounded to float16 (must be nonzero);
    q = clamp(round(w / scale) + 8, 0, 15) (round half to even; w / scale in float32).
    Returns q [N, K] int64 and scale [N, K/128] float16.
    """
    n, k = w.shape
    g = w.float().reshape(n, k // GPTQ_GROUP, GPTQ_GROUP)
    scale = (g.abs().amax(dim=-1) / (GPTQ_ZERO - 1)).to(torch.float16)
    if not bool((scale > 0).all()) or not bool(torch.isfinite(scale).all()):
        raise ValueError("a group's scale is zero or not finite in float16")
    q = torch.clamp(torch.round(g / scale.float()[..., None]) + GPTQ_ZERO, 0, GPTQ_MAXQ)
    return q.to(torch.int64).reshape(n, k), scale


def gptq_pack(q, scale):
    """q [N, K] in 0..15 and scale [N, K/128] fp16 -> (qweight, qzeros, scales) as AutoGPTQ stores them."""
    n, k = q.shape
    shifts = (GPTQ_BITS * torch.arange(GPTQ_PACK, dtype=torch.int64)).view(1, GPTQ_PACK, 1)
    qweight = (q.t().reshape(k // GPTQ_PACK, GPTQ_PACK, n) << shifts).sum(dim=1)  # [K/8, N]
    zero_word = sum((GPTQ_ZERO - 1) << (GPTQ_BITS * j) for j in range(GPTQ_PACK))  # 0x77777777
    qzeros = torch.full((k // GPTQ_GROUP, n // GPTQ_PACK), zero_word, dtype=torch.int64)
    return _to_int32(qweight), _to_int32(qzeros), scale.t().contiguous()


def gptq_unpack(qweight, qzeros):
    """(q [N, K], stored zeros [K/128, N]): the nibbles of qweight [K/8, N] and qzeros [K/128, N/8]."""
    shifts = (GPTQ_BITS * torch.arange(GPTQ_PACK, dtype=torch.int64))
    kp, n = qweight.shape
    q = (qweight.to(torch.int64).view(kp, 1, n) >> shifts.view(1, GPTQ_PACK, 1)) & GPTQ_MAXQ
    groups, np_ = qzeros.shape
    z = (qzeros.to(torch.int64).view(groups, np_, 1) >> shifts.view(1, 1, GPTQ_PACK)) & GPTQ_MAXQ
    return q.reshape(kp * GPTQ_PACK, n).t().contiguous(), z.reshape(groups, np_ * GPTQ_PACK)


def gptq_dequantize(qweight, qzeros, scales, zero_offset=1):
    """W' [N, K] float32 = (q - z) * scale, z = stored zero + zero_offset (1: checkpoint_format
    "gptq", v1). Exact: (q - z) is a small integer and scale a float16, so the product is a float32."""
    q, stored = gptq_unpack(qweight, qzeros)  # [N, K], [G, N]
    z = (stored + zero_offset).t().repeat_interleave(GPTQ_GROUP, dim=1)  # [N, K]
    s = scales.float().t().repeat_interleave(GPTQ_GROUP, dim=1)
    return (q - z).float() * s


def gptq_reference_state(tensors, zero_offset=1):
    """A GPTQ checkpoint's tensors -> the dense model's state dict in float32: every quantized
    linear dequantized (gptq_dequantize), every other tensor upcast. A g_idx must be the identity."""
    state = {}
    for name, t in tensors.items():
        if name.endswith(".qweight"):
            prefix = name[: -len(".qweight")]
            gidx = tensors.get(prefix + ".g_idx")
            k = t.shape[0] * GPTQ_PACK
            if gidx is not None and not torch.equal(gidx.to(torch.int64), torch.arange(k) // GPTQ_GROUP):
                raise ValueError(f"{prefix}.g_idx is not the identity (act order is not supported)")
            state[prefix + ".weight"] = gptq_dequantize(t, tensors[prefix + ".qzeros"],
                                                        tensors[prefix + ".scales"], zero_offset)
        elif not name.endswith((".qzeros", ".scales", ".g_idx")):
            state[name] = t.float()
    return state


def read_safetensors(model_dir):
    from safetensors.torch import load_file

    return load_file(os.path.join(model_dir, "model.safetensors"))


# ----------------------------------------------------------------------------------------------
# models in memory


_FUSED_EXPERTS = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def load_state(model, tensors):
    """Copies checkpoint-layout tensors (per-expert names) into ``model``'s parameters, whichever
    layout this transformers uses: per expert (4.x) or fused (5.x: ``experts.gate_up_proj``
    [E, 2I, H] = [gate_e; up_e] along dim 1, ``experts.down_proj`` [E, H, I]). Every parameter
    must be set and every tensor used."""
    used = set()
    with torch.no_grad():
        for name, param in model.named_parameters():
            fused = _FUSED_EXPERTS.match(name)
            if name in tensors:
                value = tensors[name]
                used.add(name)
            elif fused:
                prefix, which = fused.groups()
                parts = []
                for e in range(param.shape[0]):
                    names = ([f"{prefix}.{e}.gate_proj.weight", f"{prefix}.{e}.up_proj.weight"]
                             if which == "gate_up_proj" else [f"{prefix}.{e}.down_proj.weight"])
                    used.update(names)
                    parts.append(torch.cat([tensors[n] for n in names], dim=0))
                value = torch.stack(parts)
            else:
                raise ValueError(f"no checkpoint tensor for the model's parameter {name}")
            if tuple(value.shape) != tuple(param.shape):
                raise ValueError(f"{name}: checkpoint gives {tuple(value.shape)}, the model has {tuple(param.shape)}")
            param.copy_(value.to(param.dtype))
    unused = sorted(set(tensors) - used)
    if unused:
        raise ValueError(f"{len(unused)} checkpoint tensors have no parameter, e.g. {unused[:3]}")


def dense_config(config_dict):
    """The Qwen3Config of a config.json without its quantization_config (the GPTQ reference's)."""
    from transformers import Qwen3Config

    d = {k: v for k, v in config_dict.items() if k != "quantization_config"}
    d.pop("transformers_version", None)
    return Qwen3Config.from_dict(d)


def gptq_reference_model(model_dir, attn_implementation, zero_offset=1):
    """The float32 Qwen3ForCausalLM (on the CPU, eval) that a GPTQ checkpoint dequantizes to."""
    from transformers import Qwen3ForCausalLM

    config = dense_config(read_config(model_dir))
    config._attn_implementation = attn_implementation
    model = Qwen3ForCausalLM(config).to(torch.float32).eval()
    load_state(model, gptq_reference_state(read_safetensors(model_dir), zero_offset))
    return model
