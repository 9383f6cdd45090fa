#!/usr/bin/env python3
"""kiln gdn (Gated DeltaNet decode) vs flash-linear-attention and plain PyTorch, in one process, on
the same data.

Loads the ctypes bridge (libkiln_bench_gdn.so, see bench/CMakeLists.txt), and from it the rows: the
bench cases of kernels/gdn/tests/gpu/cases.h, each in one of the tables below (its op). bf16 (or
--dtype fp16), H = 16 query/key heads, Hv = 32 value heads, d_k = d_v = 128, a float32 state pool
[num_slots, Hv, 128, 128] indexed by a permuted slot per sequence. The tables:

  decode (gdn_decode, one token per sequence, the state updated in place), batch 1, 8, 32, 256;
  mtp (gdn_decode_mtp, T = 4 draft tokens per sequence, every intermediate state written to a
  cache [B, T, Hv, 128, 128], the pool only read), batch 1, 8, 32, 256;
  final (gdn_decode_mtp over T = 4 tokens with cache_slots (-1, -1, -1, slots[b]) into the pool:
  only the last token's state is kept, in the sequence's own slot, which is the work of
  flash-linear-attention's one call over the T tokens), batch 1, 8, 32, 256;
  gating (gdn_decode_gating: decode from the gating inputs a, b [B, Hv] and A_log, dt_bias [Hv],
  g = -exp(A_log) softplus(a + dt_bias) and beta = sigmoid(b) computed in the kernel), batch 1, 8,
  32, 256, against the same step with the gates computed by a separate kernel first.

Per row:
  1. kiln and every peer are checked against a float64 torch reference of the same recurrence
     (q, k L2-normalised; S <- exp(g) S; u = beta (v - S^T k); S <- S + k u^T; o = scale S^T q):
     relative L2 of the outputs (kiln within the bound of docs/performance-method.md, bf16
     1.2e-2) and of the states (1e-4: fp32 in and out, kernels/gdn/tests/gpu/gdn_numerics_test.cpp),
     before any timing; mtp also checks that the pool is bit-identical afterwards;
  2. times kiln (the runner, one kernel) and the peers with CUDA events: warm-up, then the median
     of the timed runs, rotating through enough input sets that they exceed 4x the L2;
     torch.cuda._sleep ahead of each timed run keeps the GPU busy while the host enqueues, so the
     events bracket device time only. Peers:
       fla          flash-linear-attention's fused recurrent kernel,
                    fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule(q, k, v, g, beta,
                    scale, initial_state, output_final_state=True, use_qk_l2norm_in_kernel=True),
                    on the state gathered by slot beforehand (fla takes one initial state per
                    sequence and returns the final state as a new tensor: no slot indirection, no
                    scatter back, which favours it). For mtp one call over the T tokens returns
                    only the final state, so it moves 2 states per sequence where kiln moves
                    1 + T: reported, but not the same work;
       fla_steps    (mtp only) fla once per token, each call starting from the last one's final
                    state: all T intermediate states, as kiln, at 2 T states moved;
       torch        the recurrence in PyTorch, vectorised over batch and heads, eager;
       torch_graph  the same ops captured in a CUDA graph (one graph per input set).
     fla is optional: without it (ImportError) the rows say so and the other peers run.
     The gating rows' peers compute the gates first, each timed as one call with the step:
       gates_kiln        a Triton gating kernel (one launch, in this file) + kiln's gdn_decode,
       torch_gates_kiln  the gates in eager PyTorch + kiln's gdn_decode,
       fla               the Triton gating kernel + fla's fused recurrent kernel;
     their reference takes the gates in float64 from the same inputs;
  3. reports TB/s of state bytes (decode and final: read + written, 2 B Hv 128^2 4; mtp: the pool
     read once and T states written, (1 + T) B Hv 128^2 4), % of the device-to-device copy bandwidth
     measured in this run, the floor (state bytes / copy bandwidth), and peer / kiln ratios
     (> 1: kiln is faster).

SM and memory clocks are logged (nvidia-smi) before and after. Writes JSON to --json and prints
the tables. Exit code 1 when a kiln correctness check fails (a failing peer is recorded, not
fatal).
"""
import argparse
import ctypes
import math
import pathlib
import sys

import torch
import torch.nn.functional as F

# kiln_bench (the shared timing) lives in the repository's bench/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "bench"))
import kiln_bench as kb  # noqa: E402

try:  # the separate gating kernel of the "gating" rows' peers; torch's GPU install carries it
    import triton
    import triton.language as tl
except Exception as e:  # noqa: BLE001 - no Triton: those peers are recorded as absent
    triton, TRITON_NOTE = None, f"triton is not importable ({type(e).__name__}: {e})"
else:
    TRITON_NOTE = f"triton {triton.__version__}"

REL_L2_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}  # docs/performance-method.md
STATE_BOUND = 1e-4  # the state is fp32 in and out (kernels/gdn/tests/gpu/gdn_numerics_test.cpp says why)
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
OPS = ("decode", "mtp", "final", "gating")  # a case's op code (kiln::gdn::cases::BenchOp) -> name
# The fields of a bench case, in the bridge's order (kiln_bench_gdn_case).
CASE_FIELDS = (("op", int), ("batch", int), ("tokens", int), ("heads_qk", int), ("heads_v", int),
               ("head_dim_k", int), ("head_dim_v", int))
L2_EPS = 1e-6
RUNS = 50
GATING_INPUTS = ("a", "b", "A_log", "dt_bias")  # the fused-gating variants' inputs, in ABI order
SOFTPLUS_THRESHOLD = 20.0  # torch.nn.functional.softplus's default, as the models call it
FLA_INSTALL = ("pip install --no-index --no-deps --target /tmp/site .whl/*.whl; "
               "PYTHONPATH=/tmp/site (bench/README.md)")


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        self.lib.kiln_bench_gdn_shape_fields.restype = ctypes.c_int
        self.lib.kiln_bench_gdn_mtp_shape_fields.restype = ctypes.c_int
        self.fields = self.lib.kiln_bench_gdn_shape_fields()
        self.mtp_fields = self.lib.kiln_bench_gdn_mtp_shape_fields()
        f = self.lib.kiln_bench_gdn
        f.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_float] + [ctypes.c_void_p] * 10 + [
            ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        f = self.lib.kiln_bench_gdn_mtp
        f.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_float] + [ctypes.c_void_p] * 11 + [
            ctypes.c_longlong, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        self.variants = []  # (name, dk, dv, dtype code, max_tokens, fused_gating)
        i = 0
        while True:
            name = ctypes.create_string_buffer(128)
            dk, dv, dtype, tokens, fused = (ctypes.c_int() for _ in range(5))
            if self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(dk), ctypes.byref(dv),
                                           ctypes.byref(dtype), ctypes.byref(tokens),
                                           ctypes.byref(fused)) != 0:
                break
            self.variants.append((name.value.decode(), dk.value, dv.value, dtype.value,
                                  tokens.value, bool(fused.value)))
            i += 1
        self.cases = self.read_cases("gdn", CASE_FIELDS)
        for case in self.cases:
            case["op"] = OPS[case["op"]]

    def has(self, dk, dv, dtype, tokens, fused=False):
        """A variant of these dims and dtype for `tokens` tokens: 1 is gdn_decode (max_tokens 1),
        more is gdn_decode_mtp (max_tokens >= tokens); fused: the gating inputs form."""
        return any(a == dk and b == dv and d == DTYPE_CODE[dtype] and f == fused and
                   ((t == 1) if tokens == 1 else (t > 1 and t >= tokens))
                   for _, a, b, d, t, f in self.variants)

    def shape(self, dtype, case, num_slots):
        values = [DTYPE_CODE[dtype], case["batch"], case["heads_qk"], case["heads_v"],
                  case["head_dim_k"], case["head_dim_v"], num_slots]
        assert len(values) == self.fields
        return (ctypes.c_int * self.fields)(*values)

    def mtp_shape(self, dtype, case, num_slots, tokens):
        values = [DTYPE_CODE[dtype], case["batch"], case["heads_qk"], case["heads_v"],
                  case["head_dim_k"], case["head_dim_v"], num_slots, tokens]
        assert len(values) == self.mtp_fields
        return (ctypes.c_int * self.mtp_fields)(*values)

    @staticmethod
    def gates(s, fused):
        """(g, beta, gating) pointers: the given gates, or the gating inputs {a, b, A_log,
        dt_bias} of a fused-gating variant (kept in the set: ctypes must not free them)."""
        if not fused:
            return s["g"].data_ptr(), s["beta"].data_ptr(), None
        if "gating_ptrs" not in s:
            s["gating_ptrs"] = (ctypes.c_void_p * 4)(*(s[n].data_ptr() for n in GATING_INPUTS))
        return None, None, s["gating_ptrs"]

    def __call__(self, shape, scale, s, fused=False):
        stream = torch.cuda.current_stream().cuda_stream
        rc = self.lib.kiln_bench_gdn(
            shape, scale, s["q"].data_ptr(), s["k"].data_ptr(), s["v"].data_ptr(),
            *self.gates(s, fused), s["out"].data_ptr(), s["state"].data_ptr(),
            s["slots"].data_ptr(), stream, self.message, len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln gdn: {self.message.value.decode()}")

    def mtp(self, shape, scale, s, final=False):
        """Every token's state into s["cache"] [B, T, ...], or with final only the last one, into
        the pool at the sequence's own slot (cache_slots s["final_slots"])."""
        stream = torch.cuda.current_stream().cuda_stream
        cache, cache_slots, entries = ((s["state"].data_ptr(), s["final_slots"].data_ptr(),
                                        s["num_slots"]) if final else
                                       (s["cache"].data_ptr(), None, 0))
        rc = self.lib.kiln_bench_gdn_mtp(
            shape, scale, s["q"].data_ptr(), s["k"].data_ptr(), s["v"].data_ptr(),
            *self.gates(s, False), s["out"].data_ptr(), s["state"].data_ptr(),
            s["slots"].data_ptr(), cache, cache_slots, entries, stream, self.message,
            len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln gdn mtp: {self.message.value.decode()}")


def load_fla():
    """(fused_recurrent_gated_delta_rule or None, a note saying which or why not)."""
    try:
        import fla
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    except Exception as e:  # noqa: BLE001 - any import failure means: no fla peer
        return None, (f"flash-linear-attention is not importable ({type(e).__name__}: "
                      f"{str(e).splitlines()[0][:200]}): not benchmarked; to install it: "
                      f"{FLA_INSTALL}")
    return fused_recurrent_gated_delta_rule, (
        f"flash-linear-attention {getattr(fla, '__version__', '?')}: "
        "fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule")


# ---- the recurrence in PyTorch ----------------------------------------------------------------

def normalise(x, group, compute):
    """x [.., H, dk] -> L2-normalised in `compute`, repeated to [.., Hv, dk] (value head hv reads
    query/key head hv // group)."""
    xf = x.to(compute)
    xf = xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + L2_EPS)
    return xf.repeat_interleave(group, dim=-2)


def rule_step(S, qf, kf, v, g, beta, scale, compute):
    """One token on S [B, Hv, dk, dv] (returned updated); qf, kf [B, Hv, dk] normalised; v [B, Hv,
    dv]; g, beta [B, Hv]. Returns (S, o [B, Hv, dv] in `compute`)."""
    S = S * torch.exp(g.to(compute))[..., None, None]
    kv = torch.einsum("bhk,bhkv->bhv", kf, S)
    u = beta.to(compute)[..., None] * (v.to(compute) - kv)
    S = S + kf[..., :, None] * u[..., None, :]
    return S, scale * torch.einsum("bhk,bhkv->bhv", qf, S)


def torch_gdn(q, k, v, g, beta, state, slots, scale, compute=torch.float32):
    """Decode, vectorised over batch and heads; state updated in place. q, k [B, H, dk]; v [B, Hv,
    dv]; g, beta [B, Hv]; state [N, Hv, dk, dv]; slots [B] int64. Returns o [B, Hv, dv] in
    `compute` (the caller casts)."""
    group = v.shape[1] // q.shape[1]
    S = state.index_select(0, slots).to(compute)  # [B, Hv, dk, dv]
    S, o = rule_step(S, normalise(q, group, compute), normalise(k, group, compute), v, g, beta,
                     scale, compute)
    state.index_copy_(0, slots, S.to(state.dtype))
    return o


def torch_mtp(q, k, v, g, beta, state, slots, scale, cache=None, compute=torch.float32):
    """Multi-token verify: q, k [B, T, H, dk]; v [B, T, Hv, dv]; g, beta [B, T, Hv]; state [N, Hv,
    dk, dv] only read; cache [B, T, Hv, dk, dv], if given, gets the state after each token. Returns
    o [B, T, Hv, dv] and the final state [B, Hv, dk, dv], both in `compute`."""
    group = v.shape[2] // q.shape[2]
    qf, kf = normalise(q, group, compute), normalise(k, group, compute)
    S = state.index_select(0, slots).to(compute)
    outs = []
    for t in range(q.shape[1]):
        S, o = rule_step(S, qf[:, t], kf[:, t], v[:, t], g[:, t], beta[:, t], scale, compute)
        if cache is not None:
            cache[:, t].copy_(S)
        outs.append(o)
    return torch.stack(outs, dim=1), S


# ---- the gates from the gating inputs ---------------------------------------------------------

def torch_gates(a, b, A_log, dt_bias, compute=torch.float32):
    """g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b), as Qwen3-Next's gated DeltaNet
    layer computes them: a, b [.., Hv]; A_log, dt_bias [Hv] float32."""
    x = a.to(compute) + dt_bias.to(compute)
    g = -torch.exp(A_log.to(compute)) * F.softplus(x, threshold=SOFTPLUS_THRESHOLD)
    return g, torch.sigmoid(b.to(compute))


def torch_gates_into(s):
    """The gates in eager PyTorch (4 to 6 kernels), into the set's g and beta."""
    g, beta = torch_gates(s["a"], s["b"], s["A_log"], s["dt_bias"])
    s["g"].copy_(g)
    s["beta"].copy_(beta)


if triton is not None:
    @triton.jit
    def _gates_kernel(a_ptr, b_ptr, a_log_ptr, dt_bias_ptr, g_ptr, beta_ptr, n, heads,
                      threshold, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = offs < n
        head = offs % heads
        x = tl.load(a_ptr + offs, mask=live).to(tl.float32) + tl.load(dt_bias_ptr + head, mask=live)
        softplus = tl.where(x > threshold, x, tl.log(1.0 + tl.exp(x)))
        tl.store(g_ptr + offs, -tl.exp(tl.load(a_log_ptr + head, mask=live)) * softplus, mask=live)
        b = tl.load(b_ptr + offs, mask=live).to(tl.float32)
        tl.store(beta_ptr + offs, tl.sigmoid(b), mask=live)


def triton_gates_into(s):
    """The gates in one Triton kernel (what a runtime without fused gating launches ahead of the
    recurrence, as vLLM's fused_gdn_gating does), into the set's g and beta."""
    n, block = s["a"].numel(), 1024
    _gates_kernel[(triton.cdiv(n, block),)](s["a"], s["b"], s["A_log"], s["dt_bias"], s["g"],
                                            s["beta"], n, s["a"].shape[-1], SOFTPLUS_THRESHOLD,
                                            BLOCK=block)


# ---- inputs and checks ------------------------------------------------------------------------

def make_set(case, dtype, gen, tokens=None, gating=False, final=False):
    """One input set of `case` (its batch, heads and head dims); tokens None: the decode layouts,
    else [B, T, ...] and a cache, or with final the cache_slots (-1, .., -1, slots[b]) that keep
    only the last state, in place; gating: also the gating inputs (a, b in the activation dtype,
    every 97th a past the softplus threshold; A_log and dt_bias float32 in [-2, 1]), whose gates
    the split peers write into g and beta."""
    batch, hq, hv = case["batch"], case["heads_qk"], case["heads_v"]
    dk, dv = case["head_dim_k"], case["head_dim_v"]
    num_slots = batch + batch // 4 + 2
    perm = torch.randperm(num_slots, device="cuda", generator=gen)[:batch]
    lead = (batch,) if tokens is None else (batch, tokens)
    q = torch.randn(*lead, hq, dk, device="cuda", generator=gen).to(dtype)
    k = torch.randn(*lead, hq, dk, device="cuda", generator=gen).to(dtype)
    v = torch.randn(*lead, hv, dv, device="cuda", generator=gen).to(dtype)
    g = -torch.rand(*lead, hv, device="cuda", generator=gen)  # in (-1, 0]
    beta = torch.rand(*lead, hv, device="cuda", generator=gen)
    state = torch.randn(num_slots, hv, dk, dv, device="cuda", generator=gen) * 0.5
    s = {"q": q, "k": k, "v": v, "g": g, "beta": beta, "state": state,
         "slots": perm.to(torch.int32).contiguous(), "slots64": perm.contiguous(),
         "out": torch.empty(*lead, hv, dv, dtype=dtype, device="cuda"),
         "num_slots": num_slots}
    if tokens is not None and final:
        s["final_slots"] = torch.full((batch, tokens), -1, dtype=torch.int32, device="cuda")
        s["final_slots"][:, -1] = s["slots"]
    elif tokens is not None:
        s["cache"] = torch.empty(batch, tokens, hv, dk, dv, device="cuda")
    if gating:
        for name in ("a", "b"):
            s[name] = torch.randn(*lead, hv, device="cuda", generator=gen).to(dtype)
        s["a"].view(-1)[::97] = 24.0
        for name in ("A_log", "dt_bias"):
            s[name] = torch.rand(hv, device="cuda", generator=gen) * 3 - 2
    return s


def rel_l2(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


def finite(x):
    return bool(torch.isfinite(x).all().item())


def timed_into(row, key, fn, sets, busy_cycles, state_bytes):
    """Times fn over the sets into row[key_us], row[key_tbps] and the kiln ratio; a failure is
    recorded as row[key_error]."""
    try:
        med, mn = kb.timed(fn, sets, RUNS, 10, busy_cycles)
    except Exception as e:  # noqa: BLE001 - a peer's failure is recorded, the run goes on
        row[f"{key}_error"] = f"timing: {kb.error_line(e)}"
        return
    row.update({f"{key}_us": med * 1e3, f"{key}_min_us": mn * 1e3,
                f"{key}_tbps": kb.tbps(state_bytes, med)})
    if key != "kiln" and "kiln_us" in row:
        row[f"kiln_vs_{key}"] = med / (row["kiln_us"] * 1e-3)  # > 1: kiln is faster


def graph_peer(row, sets, fn):
    """fn(set) captured in one CUDA graph per set; returns a replay function, or None (the
    capture error recorded in row)."""
    graphs = {}
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for s in sets:  # warm-up outside capture (allocator, kernels)
                fn(s)
        torch.cuda.current_stream().wait_stream(side)
        for i, s in enumerate(sets):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn(s)
            graphs[i] = graph
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a capture failure is recorded, the run goes on
        row["torch_graph_error"] = f"capture: {kb.error_line(e)}"
        return None, graphs
    index = {id(s): i for i, s in enumerate(sets)}
    return (lambda s: graphs[index[id(s)]].replay()), graphs


def record_check(row, name, ok, why):
    row[f"{name}_correct"] = ok
    if not ok:
        row[f"{name}_why"] = why
    return ok


# ---- decode rows ------------------------------------------------------------------------------

def torch_eager(s, scale):
    s["out"].copy_(torch_gdn(s["q"], s["k"], s["v"], s["g"], s["beta"], s["state"], s["slots64"],
                             scale))


def fla_decode(fla_fn, s, scale):
    """fla on one token per sequence, from the states gathered by slot (s["h0"])."""
    o, ht = fla_fn(s["q"][:, None], s["k"][:, None], s["v"][:, None], g=s["g"][:, None],
                   beta=s["beta"][:, None], scale=scale, initial_state=s["h0"],
                   output_final_state=True, use_qk_l2norm_in_kernel=True)
    return o[:, 0], ht


def decode_peers(kiln, fla_fn, shape, scale, fused):
    """{name: fn(set)} of a decode row's peers. Given gates (fused False): fla and the recurrence in
    PyTorch. Gating inputs (fused True): the gates computed by a separate kernel, then the given-
    gates recurrence: gates_kiln (Triton gates + kiln's gdn_decode), torch_gates_kiln (eager
    PyTorch gates + kiln) and fla (Triton gates + fla), each checked and timed as one call."""
    if not fused:
        peers = {"torch": lambda s: torch_eager(s, scale)}
        if fla_fn is not None:
            peers["fla"] = lambda s: fla_decode(fla_fn, s, scale)
        return peers

    def then(gates, step):
        def run(s):
            gates(s)
            return step(s)
        return run

    given = lambda s: kiln(shape, scale, s)  # noqa: E731 - the given-gates variant, returns None
    peers = {"torch_gates_kiln": then(torch_gates_into, given)}
    if triton is not None:
        peers["gates_kiln"] = then(triton_gates_into, given)
        if fla_fn is not None:
            peers["fla"] = then(triton_gates_into, lambda s: fla_decode(fla_fn, s, scale))
    return peers


def bench_row(kiln, fla_fn, case, dtype, copy_tbps, l2_bytes, gen, busy_cycles):
    """One row that updates the state in place, of a case of op decode (given gates, gdn_decode),
    gating (the gating inputs: the fused-gating gdn_decode against the gates computed
    separately) or final (gdn_decode_mtp over the case's T tokens keeping only the last state, in
    the sequence's own slot, against fla's one call)."""
    batch, dk, dv = case["batch"], case["head_dim_k"], case["head_dim_v"]
    fused, final = case["op"] == "gating", case["op"] == "final"
    tokens = case["tokens"] if final else 1
    scale = 1.0 / math.sqrt(dk)
    state_bytes = 2 * batch * case["heads_v"] * dk * dv * 4  # read + written
    nsets = kb.rotation_sets(state_bytes // 2, l2_bytes, 8)
    sets = [make_set(case, dtype, gen, tokens if final else None, gating=fused, final=final)
            for _ in range(nsets)]
    s0 = sets[0]
    shape = (kiln.mtp_shape(dtype, case, s0["num_slots"], tokens) if final else
             kiln.shape(dtype, case, s0["num_slots"]))
    row = {"op": case["op"],
           "dtype": DTYPE_NAME[dtype], "batch": batch,
           "tokens": tokens, "heads_qk": case["heads_qk"], "heads_v": case["heads_v"],
           "head_dim_k": dk, "head_dim_v": dv, "num_slots": s0["num_slots"],
           "state_bytes": state_bytes,
           "input_sets": nsets, "floor_us": state_bytes / (copy_tbps * 1e12) * 1e6}

    # Correctness on set 0, before any timing: each implementation on its own copy of the state.
    state0 = s0["state"].clone()
    ref_state = state0.double()
    if fused:
        ref_g, ref_beta = torch_gates(*(s0[n] for n in GATING_INPUTS), compute=torch.float64)
    else:
        ref_g, ref_beta = s0["g"], s0["beta"]
    live = s0["slots64"]
    if final:  # T tokens, of which only the last state is kept
        ref_out, ref_final = torch_mtp(s0["q"], s0["k"], s0["v"], ref_g, ref_beta, ref_state, live,
                                       scale, compute=torch.float64)
    else:
        ref_out = torch_gdn(s0["q"], s0["k"], s0["v"], ref_g, ref_beta, ref_state, live, scale,
                            compute=torch.float64)
        ref_final = ref_state[live]
    bound = REL_L2_BOUND[dtype]
    # Slots no sequence owns must stay bit-identical.
    unowned = torch.ones(s0["num_slots"], dtype=torch.bool, device="cuda")
    unowned[live] = False

    def check(name, fn):
        """fn(set) writes out and the state in place, or returns (o, final states) as fla does."""
        s0["state"].copy_(state0)
        s0["out"].fill_(float("nan"))
        try:
            got = fn(s0)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a peer's failure is recorded, the run goes on
            row[f"{name}_error"] = f"check: {kb.error_line(e)}"
            return False
        out, state = (s0["out"], s0["state"][live]) if got is None else got
        out_rel, st_rel = rel_l2(out, ref_out), rel_l2(state, ref_final)
        untouched = bool(torch.equal(s0["state"][unowned], state0[unowned]))
        row.update({f"{name}_rel_l2": out_rel, f"{name}_state_rel_l2": st_rel})
        return record_check(
            row, name, finite(out) and out_rel <= bound and st_rel <= STATE_BOUND and untouched,
            f"out rel L2 {out_rel:.3g} (bound {bound}), state rel L2 {st_rel:.3g} (bound "
            f"{STATE_BOUND}), unowned slots {'untouched' if untouched else 'CHANGED'}")

    if fla_fn is not None:  # fla's initial states, gathered once, before any check or timing
        for s in sets:
            s["h0"] = s["state"].index_select(0, s["slots64"])
    if final:
        kiln_fn = lambda s: kiln.mtp(shape, scale, s, final=True)  # noqa: E731
        peers = {} if fla_fn is None else {"fla": lambda s: fla_mtp(fla_fn, s, scale)}
    else:
        kiln_fn = lambda s: kiln(shape, scale, s, fused)  # noqa: E731
        peers = decode_peers(kiln, fla_fn, shape, scale, fused)
    ok = check("kiln", kiln_fn)
    row["correct"] = ok
    if not ok:
        row["why"] = row["kiln_why"]
    passed = [name for name, fn in peers.items() if check(name, fn)]
    s0["state"].copy_(state0)
    del ref_state, ref_out, ref_final, state0

    if ok:
        timed_into(row, "kiln", kiln_fn, sets, busy_cycles, state_bytes)
        row["kiln_pct_of_copy"] = 100 * row["kiln_tbps"] / copy_tbps if "kiln_tbps" in row else None
    for name in passed:
        timed_into(row, name, peers[name], sets, busy_cycles, state_bytes)
    graphs = {}
    if "torch" in peers:  # the PyTorch recurrence in a CUDA graph: the same ops, checked there
        replay, graphs = graph_peer(row, sets, peers["torch"])
        row["torch_graph_rel_l2_note"] = "same ops as torch (eager), checked there"
        if replay is not None and "torch" in passed:
            timed_into(row, "torch_graph", replay, sets, busy_cycles, state_bytes)
    del sets, graphs
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return row


# ---- mtp rows ---------------------------------------------------------------------------------

def torch_mtp_eager(s, scale):
    s["out"].copy_(torch_mtp(s["q"], s["k"], s["v"], s["g"], s["beta"], s["state"], s["slots64"],
                             scale, s["cache"])[0])


def fla_mtp(fla_fn, s, scale):
    """fla over the T tokens in one call: outputs and the final state only."""
    return fla_fn(s["q"], s["k"], s["v"], g=s["g"], beta=s["beta"], scale=scale,
                  initial_state=s["h0"], output_final_state=True, use_qk_l2norm_in_kernel=True)


def fla_mtp_steps(fla_fn, s, scale):
    """fla once per token: outputs [B, T, Hv, dv] and the T intermediate states (a list)."""
    h, outs, states = s["h0"], [], []
    for t in range(s["q"].shape[1]):
        o, h = fla_fn(s["q"][:, t:t + 1], s["k"][:, t:t + 1], s["v"][:, t:t + 1],
                      g=s["g"][:, t:t + 1], beta=s["beta"][:, t:t + 1], scale=scale,
                      initial_state=h, output_final_state=True, use_qk_l2norm_in_kernel=True)
        outs.append(o)
        states.append(h)
    return torch.cat(outs, dim=1), states


def mtp_row(kiln, fla_fn, case, dtype, copy_tbps, l2_bytes, gen, busy_cycles):
    batch, tokens, hv = case["batch"], case["tokens"], case["heads_v"]
    dk, dv = case["head_dim_k"], case["head_dim_v"]
    scale = 1.0 / math.sqrt(dk)
    head_bytes = hv * dk * dv * 4
    state_bytes = (1 + tokens) * batch * head_bytes  # the pool read once, T states written
    nsets = kb.rotation_sets(state_bytes, l2_bytes, 8)
    sets = [make_set(case, dtype, gen, tokens) for _ in range(nsets)]
    s0 = sets[0]
    shape = kiln.mtp_shape(dtype, case, s0["num_slots"], tokens)
    row = {"op": "mtp", "dtype": DTYPE_NAME[dtype], "batch": batch, "tokens": tokens,
           "heads_qk": case["heads_qk"], "heads_v": hv, "head_dim_k": dk, "head_dim_v": dv,
           "num_slots": s0["num_slots"], "state_bytes": state_bytes, "input_sets": nsets,
           "floor_us": state_bytes / (copy_tbps * 1e12) * 1e6,
           "fla_bytes_note": "fla (one call) writes only the final state: 2 states per sequence "
                             "moved, not 1 + T; fla_steps writes all T: 2 T states moved",
           "fla_state_bytes": 2 * batch * head_bytes,
           "fla_steps_state_bytes": 2 * tokens * batch * head_bytes}

    state0 = s0["state"].clone()
    ref_cache = torch.empty(batch, tokens, hv, dk, dv, dtype=torch.float64, device="cuda")
    ref_out, _ = torch_mtp(s0["q"], s0["k"], s0["v"], s0["g"], s0["beta"], state0.double(),
                           s0["slots64"], scale, ref_cache, compute=torch.float64)
    bound = REL_L2_BOUND[dtype]

    def check(name, fn):
        s0["out"].fill_(float("nan"))
        s0["cache"].fill_(float("nan"))
        fn(s0)
        torch.cuda.synchronize()
        out_rel = rel_l2(s0["out"], ref_out)
        cache_rel = max(rel_l2(s0["cache"][:, t], ref_cache[:, t]) for t in range(tokens))
        pool_same = bool(torch.equal(s0["state"], state0))
        row.update({f"{name}_rel_l2": out_rel, f"{name}_state_rel_l2": cache_rel})
        return record_check(
            row, name, finite(s0["out"]) and finite(s0["cache"]) and out_rel <= bound and
            cache_rel <= STATE_BOUND and pool_same,
            f"out rel L2 {out_rel:.3g} (bound {bound}), worst token's cached state rel L2 "
            f"{cache_rel:.3g} (bound {STATE_BOUND}), pool {'untouched' if pool_same else 'CHANGED'}")

    ok = check("kiln", lambda s: kiln.mtp(shape, scale, s))
    row["correct"] = ok
    if not ok:
        row["why"] = row["kiln_why"]
    torch_ok = check("torch", lambda s: torch_mtp_eager(s, scale))
    s0["state"].copy_(state0)

    fla_ok = fla_steps_ok = False
    if fla_fn is not None:
        for s in sets:
            s["h0"] = s["state"].index_select(0, s["slots64"])
        try:
            o, ht = fla_mtp(fla_fn, s0, scale)
            torch.cuda.synchronize()
            out_rel, st_rel = rel_l2(o, ref_out), rel_l2(ht, ref_cache[:, tokens - 1])
            row.update({"fla_rel_l2": out_rel, "fla_state_rel_l2": st_rel})
            fla_ok = record_check(row, "fla", finite(o) and out_rel <= bound and st_rel <= STATE_BOUND,
                                  f"out rel L2 {out_rel:.3g}, final state rel L2 {st_rel:.3g}")
            o, states = fla_mtp_steps(fla_fn, s0, scale)
            torch.cuda.synchronize()
            out_rel = rel_l2(o, ref_out)
            st_rel = max(rel_l2(h, ref_cache[:, t]) for t, h in enumerate(states))
            row.update({"fla_steps_rel_l2": out_rel, "fla_steps_state_rel_l2": st_rel})
            fla_steps_ok = record_check(
                row, "fla_steps", finite(o) and out_rel <= bound and st_rel <= STATE_BOUND,
                f"out rel L2 {out_rel:.3g}, worst token's state rel L2 {st_rel:.3g}")
            del o, states
        except Exception as e:  # noqa: BLE001
            row["fla_error"] = f"check: {kb.error_line(e)}"
    del ref_cache, ref_out, state0

    if ok:
        timed_into(row, "kiln", lambda s: kiln.mtp(shape, scale, s), sets, busy_cycles, state_bytes)
        row["kiln_pct_of_copy"] = 100 * row["kiln_tbps"] / copy_tbps if "kiln_tbps" in row else None
    if fla_ok:
        timed_into(row, "fla", lambda s: fla_mtp(fla_fn, s, scale), sets, busy_cycles,
                   row["fla_state_bytes"])
    if fla_steps_ok:
        timed_into(row, "fla_steps", lambda s: fla_mtp_steps(fla_fn, s, scale), sets, busy_cycles,
                   row["fla_steps_state_bytes"])
    timed_into(row, "torch", lambda s: torch_mtp_eager(s, scale), sets, busy_cycles, state_bytes)
    replay, graphs = graph_peer(row, sets, lambda s: torch_mtp_eager(s, scale))
    row["torch_graph_rel_l2_note"] = "same ops as torch (eager), checked there"
    if replay is not None:
        timed_into(row, "torch_graph", replay, sets, busy_cycles, state_bytes)
    if not torch_ok:
        row["torch_note"] = "the torch peer failed its own correctness check: " + row["torch_why"]
    del sets, graphs
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return row


# ---- output -----------------------------------------------------------------------------------

def print_table(title, rows, peers):
    def fmt(row, key, spec):
        return format(row[key], spec) if row.get(key) is not None else "-"

    print(f"\n{title}")
    header = (f"{'B':>4} {'T':>2} {'floor us':>8} {'kiln us':>8} {'TB/s':>6} {'% copy':>6} " +
              " ".join(f"{p + ' us':>12}" for p in peers) + " " +
              " ".join(f"{'/' + p:>12}" for p in peers) + f" {'out L2':>8} {'state L2':>8}  ok")
    kb.print_header(header)
    for r in rows:
        print(f"{r['batch']:>4} {r['tokens']:>2} {r['floor_us']:8.1f} {fmt(r, 'kiln_us', '8.1f'):>8} "
              f"{fmt(r, 'kiln_tbps', '6.2f'):>6} {fmt(r, 'kiln_pct_of_copy', '5.1f'):>5}% " +
              " ".join(f"{fmt(r, p + '_us', '12.1f'):>12}" for p in peers) + " " +
              " ".join(f"{fmt(r, 'kiln_vs_' + p, '11.2f'):>11}x" for p in peers) +
              f" {fmt(r, 'kiln_rel_l2', '8.2e'):>8} {fmt(r, 'kiln_state_rel_l2', '8.2e'):>8}  "
              f"{'yes' if r['correct'] else 'NO ' + r.get('why', '')}")
        for key in [p + s for p in ["kiln"] + peers for s in ("_error", "_why", "_note")]:
            if key in r:
                print(f"    {key}: {r[key]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_gdn.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--ops", default=",".join(OPS),
                    help="comma list of decode, mtp, final, gating (the tables, of the bench "
                         "cases of kernels/gdn/tests/gpu/cases.h)")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    ops = [o for o in args.ops.split(",") if o]

    kiln = Kiln(args.lib)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    busy_cycles = 400000  # ~200 us of GPU work ahead of each timed call

    fla_fn, fla_note = load_fla()
    result = kb.result_header("gdn_vs_torch", props, l2_bytes, kiln, seed,
                              {"fla": fla_note, "triton": TRITON_NOTE})
    copy_tbps = kb.measure_copy(result)
    print(f"{props.name} sm_{result['sm']} ({props.multi_processor_count} SMs), driver "
          f"{result['driver']}, torch {torch.__version__}; artifact {kiln.tag} "
          f"{kiln.fingerprint[:16]}; seed {seed}")
    print(fla_note)
    kb.print_copy(result)

    rows, failed = [], 0
    # op: the variants its rows need, as (tokens: 1 or the case's, fused_gating, family)
    needs = {"decode": [(1, False, "gdn_decode")],
             "mtp": [(None, False, "gdn_decode_mtp")],
             "final": [(None, False, "gdn_decode_mtp")],
             "gating": [(1, True, "gdn_decode_gating"), (1, False, "gdn_decode")]}
    for op in OPS:
        if op not in ops:
            continue
        cases = [c for c in kiln.cases if c["op"] == op]
        missing = sorted({f"{family}_dk{c['head_dim_k']}_dv{c['head_dim_v']}_{args.dtype}"
                          for c in cases for t, fused, family in needs[op]
                          if not kiln.has(c["head_dim_k"], c["head_dim_v"], dtype,
                                          t or c["tokens"], fused)})
        if missing:
            print(f"{op}: {', '.join(missing)} not in the artifact")
            failed += 1
            continue
        for case in cases:
            if op == "mtp":
                rows.append(mtp_row(kiln, fla_fn, case, dtype, copy_tbps, l2_bytes, gen,
                                    busy_cycles))
            else:
                rows.append(bench_row(kiln, fla_fn, case, dtype, copy_tbps, l2_bytes, gen,
                                      busy_cycles))
    result["rows"] = rows
    result["clocks_after"] = kb.clocks()

    decode_rows = [r for r in rows if r["op"] == "decode"]
    mtp_rows = [r for r in rows if r["op"] == "mtp"]
    final_rows = [r for r in rows if r["op"] == "final"]
    gating_rows = [r for r in rows if r["op"] == "gating"]
    if decode_rows:
        print_table("decode (gdn_decode: one token, state in place; bytes: the state read + "
                    "written)", decode_rows, ["fla", "torch", "torch_graph"])
    if mtp_rows:
        tokens = "/".join(str(t) for t in dict.fromkeys(r["tokens"] for r in mtp_rows))
        print_table(f"mtp (gdn_decode_mtp: T = {tokens} tokens, every state to the cache; "
                    "bytes: the pool read + T states written; fla writes the final state only)",
                    mtp_rows, ["fla", "fla_steps", "torch", "torch_graph"])
    if final_rows:
        tokens = "/".join(str(t) for t in dict.fromkeys(r["tokens"] for r in final_rows))
        print_table(f"final (gdn_decode_mtp: T = {tokens} tokens, only the last state kept, in "
                    "place, by cache_slots; bytes as decode; fla: the same work in one call)",
                    final_rows, ["fla"])
    if gating_rows:
        print_table("gating (gdn_decode_gating: the gates from a, b, A_log, dt_bias in the kernel; "
                    "peers compute them in a separate kernel first; bytes as decode)",
                    gating_rows, ["gates_kiln", "torch_gates_kiln", "fla"])
    failed += sum(not r["correct"] for r in rows)
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
