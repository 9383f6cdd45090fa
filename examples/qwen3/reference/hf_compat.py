"""The few transformers calls whose spelling changed between versions, in one place.

The reference scripts run under whatever transformers the GPU machine has (4.5x or 5.x); every
call here works on both, and each checks what it got instead of trusting a keyword to be honoured:

- ``load_model``: ``from_pretrained`` takes ``dtype`` from 4.56 on and ``torch_dtype`` before (an
  unknown keyword would be silently ignored), so the keyword follows the version and the loaded
  parameters' dtype is checked.
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


def load_model(model_dir, dtype, attn_implementation, device):
    """Qwen3ForCausalLM.from_pretrained in ``dtype`` with ``attn_implementation``, on ``device``, eval."""
    import transformers
    from transformers import Qwen3ForCausalLM

    quiet()
    dtype_key = "dtype" if transformers_version() >= (4, 56) else "torch_dtype"
    model = Qwen3ForCausalLM.from_pretrained(
        model_dir, attn_implementation=attn_implementation, **{dtype_key: dtype})
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
