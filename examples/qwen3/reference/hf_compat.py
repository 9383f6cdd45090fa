"""The few transformers calls whose spelling changed between versions, in one place.

The reference scripts run under whatever transformers the GPU machine has (4.5x or 5.x); every
call here works on both, and each checks what it got instead of trusting a keyword to be honoured:

- ``load_model``: the model of a checkpoint of any kind (kinds.py). ``from_pretrained`` takes
  ``dtype`` from 4.56 on and ``torch_dtype`` before (an unknown keyword would be silently
  ignored), so the keyword follows the version and the loaded parameters' dtype is checked; a
  missing, unexpected or misshapen tensor is an error, not a logged warning (that is how a
  per-expert MoE file that transformers 5 failed to fuse would show). MoE in float32 runs the
  experts one by one (``experts_implementation="eager"`` where transformers 5 has that choice,
  its default being ``grouped_mm``; transformers 4 only has the loop); MoE in bf16 keeps the
  default. GPTQ: the dequantized dense model (kinds.gptq_reference_model), not from_pretrained.
  The rope_theta it read must be config.json's (4.x would read a 5.x config's rope_parameters
  as its default 10000, silently).
- ``set_experts_eager`` / ``experts_implementation``: the same choice for a model built in memory.
- ``cache_keyword`` / ``returned_cache``: forward()'s KV-cache argument and output are
  ``past_key_values`` in 4.x and early 5.x and ``cache`` in later 5.x (the old name warns).
- ``logits_to_keep_keyword``: ``num_logits_to_keep`` (4.45-4.49), ``logits_to_keep`` (4.50+), or
  none: the keyword that limits the LM head to the last position, for prefill timings.
- ``environment``: versions and the device name for the JSON outputs.
"""

from __future__ import annotations

import inspect
import platform

import numpy as np
import torch


def quiet():
    """No progress bars or info logging from transformers (their bars go to stderr per load)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def transformers_version():
    import transformers

    return tuple(int(x) for x in transformers.__version__.split(".")[:2])


def rope_theta(config):
    """rope_theta of a config object or a parsed config.json: top level (4.x) or in rope_parameters (5.x)."""
    get = config.get if isinstance(config, dict) else (lambda key: getattr(config, key, None))
    theta = get("rope_theta")
    if theta is None:
        theta = (get("rope_parameters") or {}).get("rope_theta")
    return theta


def experts_implementation(model):
    """transformers 5's experts_implementation of the model ("eager", "grouped_mm", ...), or
    "loop (transformers 4)" for a MoE of transformers 4, or None for a dense model."""
    if getattr(model.config, "num_experts", None) is None:
        return None
    return getattr(model.config, "_experts_implementation", None) or "loop (transformers 4)"


def set_experts_eager(model):
    """Makes a transformers-5 MoE run its experts one by one in plain F.linear (no-op on 4.x)."""
    if getattr(model.config, "num_experts", None) is not None and hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")
    return model


def load_model(model_dir, dtype, attn_implementation, device, gptq_zero_offset=1):
    """The model of make_model.py's checkpoint in ``dtype`` with ``attn_implementation``, on ``device``, eval.

    dense / moe: ``Qwen3ForCausalLM`` / ``Qwen3MoeForCausalLM.from_pretrained``. gptq: the dense
    ``Qwen3ForCausalLM`` with the dequantized weights (q - z) * scale in float32, then cast to
    ``dtype`` (bf16: those values rounded to bf16); ``gptq_zero_offset`` 0 reads the zero points
    one too low, as a gptq_v2 reader of this v1 file would (fake_kiln's mode).
    """
    import transformers
    from transformers import Qwen3ForCausalLM, Qwen3MoeForCausalLM

    import kinds

    quiet()
    kind = kinds.kind_of(kinds.read_config(model_dir))
    if kind == "gptq":
        model = kinds.gptq_reference_model(model_dir, attn_implementation, gptq_zero_offset).to(dtype)
    else:
        cls = Qwen3MoeForCausalLM if kind == "moe" else Qwen3ForCausalLM
        dtype_key = "dtype" if transformers_version() >= (4, 56) else "torch_dtype"
        kwargs = {dtype_key: dtype}
        if kind == "moe" and dtype == torch.float32 and hasattr(cls, "set_experts_implementation"):
            kwargs["experts_implementation"] = "eager"
        model, info = cls.from_pretrained(model_dir, attn_implementation=attn_implementation,
                                          output_loading_info=True, **kwargs)
        problems = {k: v for k, v in info.items() if k != "error_msgs" and v}
        if problems or info.get("error_msgs"):
            raise RuntimeError(f"transformers {transformers.__version__} loaded {model_dir} with "
                               f"{problems or info['error_msgs']}")
    # 4.x reads a 5.x config.json (rope_parameters) with its default rope_theta, silently.
    file_theta, read_theta = rope_theta(kinds.read_config(model_dir)), rope_theta(model.config)
    if file_theta != read_theta:
        raise RuntimeError(f"transformers {transformers.__version__} read rope_theta {read_theta} from "
                           f"{model_dir}/config.json, which says {file_theta}: run the transformers that wrote it")
    model = model.to(device).eval()
    got = next(model.parameters()).dtype
    if got != dtype:
        raise RuntimeError(f"transformers {transformers.__version__} loaded {model_dir} as {got}, not {dtype}")
    return model


def cache_keyword(model):
    """forward()'s KV-cache argument: "cache" in later transformers 5, else "past_key_values"."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def returned_cache(out):
    """The KV cache a forward returned (``cache`` in later transformers 5, else ``past_key_values``)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def logits_to_keep_keyword(model):
    """The forward() keyword that computes the LM head for the last N positions only, or None."""
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None


def environment(device):
    """Versions and the device, for the JSON outputs."""
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "numpy": np.__version__, "device": str(device)}
    if str(device).startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(torch.device(device))
        env["cuda"] = torch.version.cuda
        env["bf16_reduced_precision_reduction"] = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    else:
        env["cpu"] = platform.processor() or platform.machine()
    return env
