#!/usr/bin/env python3
"""kiln moe (the MoE block) vs a PyTorch block on torch._grouped_mm, in CUDA graphs, one process.

Loads the ctypes bridge (libkiln_bench_moe.so, see bench/CMakeLists.txt), measures the
device-to-device copy bandwidth and the dense GEMM rate (torch.matmul 8192^3 in the dtype) in the
same run, then for each model (--models; Qwen3-30B-A3B: E 128, k 8, H 2048, I 768; Mixtral-8x7B:
E 8, k 2, H 4096, I 14336) and each token count T (--tokens; 1, 8, 64, 512, 4096, 16384), bf16
(--dtype fp16 runs kiln's fp16 variant; torch._grouped_mm may refuse it, which is recorded):

  1. makes the inputs: per model, a few weight sets (w1 [E, 2I, H]: each expert's I gate rows then
     its I up rows; w2 [E, H, I]; torch.randn / sqrt(fan-in) in the dtype), enough that the k
     experts one token activates exceed 4x the L2 when the sets are rotated (2..4 sets); per row,
     x [T, H] (torch.randn) and router logits [T, E] in the dtype, each token's row a random
     permutation of the distinct values (j - E / 2) / 16, j < E: exact in bf16 and fp16, and no
     two experts closer than a factor e^(1/16) in probability, so kiln and PyTorch must pick the
     same experts in the same order. x and the logits are shared by the sets (so is the routing);
  2. the PyTorch block, the same maths as kiln's runner (kiln/runners/moe.h): softmax of the
     logits in fp32, torch.topk(k), the k weights divided by their sum; the token-expert pairs
     sorted by expert (torch.argsort(stable=True) of the flattened ids); offsets = cumsum of the
     per-expert counts as int32 (the counts are bincount's, computed as scatter_add_ of ones into
     E int32 counters: torch.bincount on CUDA reads the ids' min and max back to the host, which a
     CUDA graph cannot capture; the check compares them with torch.bincount); the rows of x
     gathered in that order (index_select); FC1 torch._grouped_mm(rows, w1.transpose(-2, -1),
     offs=offsets) -> [T k, 2I]; F.silu(gate) * up; FC2 torch._grouped_mm(act, w2.transpose(-2,
     -1), offs=offsets) -> [T k, H]; each row times its routing weight in fp32, index_add_ back
     to its token (fp32 [T, H]), rounded once to the dtype;
  3. checks before any timing: kiln's whole block (kiln_bench_moe, every step, logits in the dtype,
     renormalize on, no residual; y poisoned with NaN first) against the PyTorch block's y: finite
     and rel L2 <= 2e-2, else the row fails (exit code 1) and is not timed; kiln's routing
     (topk_ids and topk_weights, read from its workspace at the runner's workspaceLayout) against
     torch.topk's; when torch._grouped_mm raises, the error is recorded in the row and kiln is
     checked against the same maths with one torch.matmul per expert instead (the row says which
     reference it used);
  4. captures each side in one CUDA graph per weight set (a warm-up run of each outside capture
     first, on a side stream: it loads kiln's module, which a capture may not do), checks the
     graphs' outputs of set 0 again (kiln's against the PyTorch block, the PyTorch graph's against
     its eager output) and times graph replay with CUDA events (bench/kiln_bench.py: warm-up, then
     the median of 10..100 runs, as many as fit ~100 ms, --runs fixes it, rotating through the
     weight sets; torch.cuda._sleep ahead of each timed run keeps the GPU busy while the host
     enqueues, so the events bracket device time only);
  5. times the two GEMMs alone, each side in a CUDA graph per set the same way: kiln's steps FC1 |
     FC2 (4 | 8) after one run of route | align (1 | 2) has left the routing in its workspace
     (FC1 gathers the token rows of x itself and applies SiLU(gate) * up in its epilogue); PyTorch's
     two torch._grouped_mm calls on the same permuted rows (the gathered rows and the act of the
     eager block, made before timing; no gather, SiLU or scatter between them). kiln's FC2 output
     (its workspace's down, in slot order) is checked against PyTorch's down;
  6. reports per row: kiln us, torch us, torch / kiln (> 1: kiln is faster), TFLOP/s of each
     (2 T k (2 I H + H I)), and for T <= 64 the bandwidth on the activated experts' weight bytes
     (the distinct experts of the row's routing times (2 I H + H I) * the dtype's bytes) as a % of
     the copy bandwidth (read + written, as every group's % of copy); and the GEMMs alone: us and
     TFLOP/s of each, torch / kiln, and kiln's % of the dense GEMM rate.

A PyTorch failure (torch._grouped_mm refusing a shape or a dtype, a capture error) is recorded in
the row and the run goes on. --quick: T in {1, 64, 4096} on both models. SM and memory clocks are
logged (nvidia-smi) before and after. Writes JSON to --json (the GPU, driver, torch version, copy
bandwidth, every row) and prints a table last. Exit code 1 when a kiln check fails.
"""
import argparse
import ctypes
import pathlib
import sys
import time

import torch
import torch.nn.functional as F

# kiln_bench (the shared timing) lives in the repository's bench/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "bench"))
import kiln_bench as kb  # noqa: E402

# kiln vs the PyTorch block: both accumulate in fp32 and round the GEMM outputs to the dtype
# (PyTorch rounds gate, up, SiLU(gate) and the product each; kiln rounds act once), and sum the
# k weighted rows in fp32, rounded once: ~5e-3 apart in bf16. A wrong expert, row or weight is
# O(1).
CHECK_REL_L2 = 2e-2
ROUTING_WEIGHT_TOL = 1e-4  # kiln's fp32 softmax weights vs torch's (both fp32, distinct logits)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
# The runner's Step bits (kiln/runners/moe.h; the bridge static_asserts them).
STEP_ROUTE, STEP_ALIGN, STEP_FC1, STEP_FC2, STEP_FINALIZE = 1, 2, 4, 8, 16
STEP_ALL = 31
# kiln_bench_moe_layout's fields, in its order: byte offsets in the workspace, then its size.
LAYOUT_FIELDS = ("topk_ids", "topk_weights", "expert_offsets", "tile_offsets", "sorted_slots",
                 "act", "down", "bytes")
# The models of issue 27: experts E, top_k k, hidden H, intermediate I (per expert).
MODELS = {
    "qwen3-30b-a3b": {"experts": 128, "top_k": 8, "hidden": 2048, "intermediate": 768},
    "mixtral-8x7b": {"experts": 8, "top_k": 2, "hidden": 4096, "intermediate": 14336},
}
TOKENS = (1, 8, 64, 512, 4096, 16384)
QUICK_TOKENS = (1, 64, 4096)
BANDWIDTH_MAX_T = 64  # rows up to this T report the activated weights' bandwidth
LOGIT_STEP = 1.0 / 16  # the spacing of the distinct logits (exact in bf16 / fp16 for E <= 512)
MOST_SETS = 4  # weight sets rotated per model, at most
TARGET_MS = 100.0  # timed device time per measurement when the run count is adaptive
MIN_RUNS, MAX_RUNS = 10, 100


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        i64, vp, ci = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        shape = [ci, i64, ci, ci, i64, i64]  # dtype, tokens, experts, top_k, hidden, intermediate
        f = self.lib.kiln_bench_moe
        # renormalize, logits_fp32, steps; x, logits, w1, w2, residual, y, workspace; its bytes,
        # the stream, the message buffer and its size
        f.argtypes = shape + [ci, ci, ctypes.c_uint] + [vp] * 7 + [
            ctypes.c_size_t, vp, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ci
        w = self.lib.kiln_bench_moe_workspace
        w.argtypes = shape
        w.restype = ctypes.c_size_t
        lf = self.lib.kiln_bench_moe_layout_fields
        lf.restype = ci
        lay = self.lib.kiln_bench_moe_layout
        lay.argtypes = shape + [ctypes.POINTER(ctypes.c_size_t), ci]
        lay.restype = ci
        if lf() != len(LAYOUT_FIELDS):
            raise RuntimeError(f"kiln_bench_moe_layout has {lf()} fields, the script expects "
                               f"{len(LAYOUT_FIELDS)}: the bridge and the script are from "
                               "different checkouts")
        v = self.lib.kiln_bench_variant
        v.argtypes = [ci, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ci)]
        v.restype = ci
        self.variants = []  # (name, dtype code)
        i = 0
        while True:
            name = ctypes.create_string_buffer(128)
            dtype = ctypes.c_int()
            if v(i, name, 128, ctypes.byref(dtype)) != 0:
                break
            self.variants.append((name.value.decode(), dtype.value))
            i += 1

    def has(self, dtype):
        return any(d == DTYPE_CODE[dtype] for _, d in self.variants)

    @staticmethod
    def _shape(dtype, tokens, m):
        return (DTYPE_CODE[dtype], tokens, m["experts"], m["top_k"], m["hidden"],
                m["intermediate"])

    def workspace_bytes(self, dtype, tokens, m):
        return self.lib.kiln_bench_moe_workspace(*self._shape(dtype, tokens, m))

    def layout(self, dtype, tokens, m):
        """The runner's workspaceLayout: {field: byte offset} and "bytes"."""
        values = (ctypes.c_size_t * len(LAYOUT_FIELDS))()
        if self.lib.kiln_bench_moe_layout(*self._shape(dtype, tokens, m), values,
                                          len(LAYOUT_FIELDS)) != 0:
            raise RuntimeError(f"kiln moe refuses T {tokens} {m} (workspaceLayout is empty)")
        return dict(zip(LAYOUT_FIELDS, values))

    def __call__(self, dtype, tokens, m, steps, x, logits, w1, w2, y, workspace):
        """kiln::moe::run of `steps` on torch's current stream (a capture's, inside one)."""
        rc = self.lib.kiln_bench_moe(
            *self._shape(dtype, tokens, m), 1, 0, steps, x.data_ptr(), logits.data_ptr(),
            w1.data_ptr(), w2.data_ptr(), None, y.data_ptr(), workspace.data_ptr(),
            workspace.numel(), torch.cuda.current_stream().cuda_stream, self.message,
            len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln moe (steps {steps}): {self.message.value.decode()}")


# ---- inputs --------------------------------------------------------------------------------

def make_weights(m, dtype, gen):
    """One weight set: w1 [E, 2I, H] (gate rows, then up rows), w2 [E, H, I]; N(0, 1 / fan-in)."""
    e, h, i = m["experts"], m["hidden"], m["intermediate"]
    w1 = (torch.randn(e, 2 * i, h, device="cuda", generator=gen) * h ** -0.5).to(dtype)
    w2 = (torch.randn(e, h, i, device="cuda", generator=gen) * i ** -0.5).to(dtype)
    return {"w1": w1, "w2": w2}


def make_logits(tokens, experts, dtype, gen):
    """[T, E] of the dtype: each row a random permutation of (j - E / 2) * LOGIT_STEP, j < E
    (integers below 256 in magnitude times a power of two: exact in bf16 and fp16), so no two
    experts of a token tie or nearly tie."""
    perm = torch.argsort(torch.rand(tokens, experts, device="cuda", generator=gen), dim=1)
    return ((perm - experts // 2).to(torch.float32) * LOGIT_STEP).to(dtype)


# ---- the PyTorch block ---------------------------------------------------------------------

def torch_route(logits, m):
    """(weights [T, k] fp32, ids [T, k] int64, order [T k]: the slots t * k + j sorted by expert,
    offsets [E] int32: the cumulative row ends of each expert), with no host synchronisation."""
    probs = torch.softmax(logits.float(), dim=-1)
    weights, ids = torch.topk(probs, m["top_k"], dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    # bincount(flat, minlength=E), but capturable (torch.bincount reads min / max to the host)
    counts = torch.zeros(m["experts"], dtype=torch.int32, device=flat.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
    offsets = torch.cumsum(counts, 0, dtype=torch.int32)
    return weights, ids, order, offsets


def torch_finalize(down, weights, order, tokens, m, dtype):
    """Each expert row of down times its routing weight (fp32), added back to its token."""
    token = order // m["top_k"]
    contrib = down.float() * weights.reshape(-1).index_select(0, order).unsqueeze(1)
    y = torch.zeros(tokens, m["hidden"], dtype=torch.float32, device=down.device)
    y.index_add_(0, token, contrib)
    return y.to(dtype)


def torch_block(s, m, keep=None):
    """The whole block on torch._grouped_mm: logits -> y [T, H]. keep (a dict): the
    intermediates go there (ids, weights, order, offsets, rows, act, down)."""
    x, inter = s["x"], m["intermediate"]
    weights, ids, order, offsets = torch_route(s["logits"], m)
    rows = x.index_select(0, order // m["top_k"])
    h = torch._grouped_mm(rows, s["w1"].transpose(-2, -1), offs=offsets)  # [T k, 2I]
    act = F.silu(h[:, :inter]) * h[:, inter:]
    down = torch._grouped_mm(act, s["w2"].transpose(-2, -1), offs=offsets)  # [T k, H]
    y = torch_finalize(down, weights, order, x.shape[0], m, x.dtype)
    if keep is not None:
        keep.update(ids=ids, weights=weights, order=order, offsets=offsets, rows=rows, act=act,
                    down=down)
    return y


def loop_block(s, m):
    """The same maths with one torch.matmul per expert (the offsets read to the host): kiln's
    check reference when torch._grouped_mm raises. Eager only."""
    x, inter = s["x"], m["intermediate"]
    weights, _, order, offsets = torch_route(s["logits"], m)
    rows = x.index_select(0, order // m["top_k"])
    down = torch.empty(rows.shape[0], m["hidden"], dtype=x.dtype, device=x.device)
    start = 0
    for e, end in enumerate(offsets.tolist()):
        if end > start:
            h = rows[start:end] @ s["w1"][e].t()
            down[start:end] = (F.silu(h[:, :inter]) * h[:, inter:]) @ s["w2"][e].t()
        start = end
    return torch_finalize(down, weights, order, x.shape[0], m, x.dtype)


def torch_gemms(g, s):
    """The two grouped GEMMs alone, on the block's permuted rows and act (g)."""
    h = torch._grouped_mm(g["rows"], s["w1"].transpose(-2, -1), offs=g["offsets"])
    down = torch._grouped_mm(g["act"], s["w2"].transpose(-2, -1), offs=g["offsets"])
    return h, down


# ---- helpers -------------------------------------------------------------------------------

def rel_l2(got, ref):
    return ((got.double() - ref.double()).norm() / ref.double().norm()).item()


def finite(t):
    return bool(torch.isfinite(t).all().item())


def timed_adaptive(fn, sets, runs, busy_cycles):
    """(median ms, min ms, runs): `runs` timed runs, or when 0 as many as fit TARGET_MS (a short
    probe first, which also warms up), clamped to MIN_RUNS..MAX_RUNS."""
    if runs <= 0:
        probe, _ = kb.timed(fn, sets, 3, 2, busy_cycles)
        runs = max(MIN_RUNS, min(MAX_RUNS, int(TARGET_MS / max(probe, 1e-3))))
    med, mn = kb.timed(fn, sets, runs, 3, busy_cycles)
    return med, mn, runs


def capture(fn, sets):
    """fn(set) captured in one CUDA graph per set, after a run of each outside capture on a side
    stream (allocator, cuBLAS / CUTLASS workspaces, kiln's module load): (replay(set), the graphs,
    each graph's output). thread_local capture, as kiln's own graph test."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in sets:
            fn(s)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graphs, outs = [], []
    for s in sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outs.append(fn(s))
        graphs.append(graph)
    torch.cuda.synchronize()
    index = {id(s): i for i, s in enumerate(sets)}
    return (lambda s: graphs[index[id(s)]].replay()), graphs, outs


def time_into(r, key, fn, sets, runs, busy_cycles, flops, weight_bytes, copy_tbps):
    """Times fn over the sets into r[key_us], r[key_tflops] (and the weight bandwidth when
    weight_bytes); a failure goes to r[key_error]. True when it was timed."""
    try:
        med, mn, nruns = timed_adaptive(fn, sets, runs, busy_cycles)
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        r[f"{key}_error"] = f"timing: {kb.error_line(e)}"
        return False
    r.update({f"{key}_us": med * 1e3, f"{key}_min_us": mn * 1e3, f"{key}_runs": nruns,
              f"{key}_tflops": flops / (med * 1e-3) / 1e12})
    if weight_bytes:
        r[f"{key}_weight_tbps"] = kb.tbps(weight_bytes, med)
        r[f"{key}_pct_of_copy"] = 100 * r[f"{key}_weight_tbps"] / copy_tbps
    return True


# ---- one row -------------------------------------------------------------------------------

def bench_row(kiln, model, m, tokens, dtype, wsets, gemm, copy_tbps, gen, busy_cycles, runs):
    e, k, h, i = m["experts"], m["top_k"], m["hidden"], m["intermediate"]
    flops = 2 * tokens * k * (2 * i * h + h * i)
    expert_bytes = (2 * i * h + h * i) * dtype.itemsize
    r = {"model": model, "tokens": tokens, "dtype": DTYPE_NAME[dtype], "experts": e, "top_k": k,
         "hidden": h, "intermediate": i, "flops": flops, "weight_sets": len(wsets),
         "check_rel_l2": CHECK_REL_L2, "correct": False}
    x = torch.randn(tokens, h, device="cuda", generator=gen).to(dtype)
    logits = make_logits(tokens, e, dtype, gen)
    sets = [dict(w, x=x, logits=logits, y=torch.empty(tokens, h, dtype=dtype, device="cuda"))
            for w in wsets]
    s0 = sets[0]

    # The PyTorch block, eager, on set 0: the reference (and the GEMMs' inputs).
    parts, ref = {}, None
    try:
        ref = torch_block(s0, m, parts)
        torch.cuda.synchronize()
        r["reference"] = "torch_grouped_mm"
        counts = torch.bincount(parts["ids"].reshape(-1), minlength=e)
        if not torch.equal(torch.diff(parts["offsets"], prepend=parts["offsets"].new_zeros(1)),
                           counts.to(torch.int32)):
            raise RuntimeError("the scatter_add_ counts differ from torch.bincount (script bug)")
        if not finite(ref):
            raise RuntimeError("non-finite output")
    except Exception as e_:  # noqa: BLE001 - recorded; kiln is checked against the loop instead
        r["torch_error"] = f"eager: {kb.error_line(e_)}"
        parts, ref = {}, None
        torch.cuda.synchronize()
    if ref is None:
        try:
            ref = loop_block(s0, m)
            torch.cuda.synchronize()
            r["reference"] = "torch_matmul_per_expert"
        except Exception as e_:  # noqa: BLE001
            r["why"] = f"no reference: {kb.error_line(e_)}"
            return r
    weights, ids, _, _ = torch_route(logits, m)
    r["experts_hit"] = int(torch.unique(ids).numel())
    weight_bytes = r["experts_hit"] * expert_bytes if tokens <= BANDWIDTH_MAX_T else 0
    if weight_bytes:
        r["activated_weight_bytes"] = weight_bytes

    # kiln, eager, on set 0: the routing and the output.
    ws_bytes = kiln.workspace_bytes(dtype, tokens, m)
    r["kiln_workspace_bytes"] = ws_bytes
    lay = kiln.layout(dtype, tokens, m)
    workspace = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device="cuda")

    def run_kiln(s, steps=STEP_ALL):
        kiln(dtype, tokens, m, steps, s["x"], s["logits"], s["w1"], s["w2"], s["y"], workspace)
        return s["y"]

    def ws_view(field, count, as_dtype):
        start = lay[field]
        return workspace[start:start + count * as_dtype.itemsize].view(as_dtype)

    try:
        s0["y"].fill_(float("nan"))
        run_kiln(s0)
        torch.cuda.synchronize()
        kiln_ids = ws_view("topk_ids", tokens * k, torch.int32).view(tokens, k)
        kiln_w = ws_view("topk_weights", tokens * k, torch.float32).view(tokens, k)
        r["routing_same_ids"] = bool(torch.equal(kiln_ids, ids.to(torch.int32)))
        r["routing_weight_max_diff"] = (kiln_w - weights).abs().max().item()
        rel = rel_l2(s0["y"], ref)
        r["kiln_rel_l2"] = rel
        ok_y = finite(s0["y"]) and rel <= CHECK_REL_L2
        why = []
        if not r["routing_same_ids"]:
            why.append("topk_ids differ from torch.topk's")
        if r["routing_weight_max_diff"] > ROUTING_WEIGHT_TOL:
            why.append(f"topk_weights {r['routing_weight_max_diff']:.3g} from torch's "
                       f"(> {ROUTING_WEIGHT_TOL})")
        if not ok_y:
            why.append(f"y rel L2 {rel:.3g} to {r['reference']} (bound {CHECK_REL_L2})"
                       f"{'' if finite(s0['y']) else ', non-finite'}")
        r["correct"] = not why
        if why:
            r["why"] = "kiln: " + "; ".join(why)
    except Exception as e_:  # noqa: BLE001 - a kiln refusal or launch error fails the row
        r["why"] = f"kiln: {kb.error_line(e_)}"
    del weights, ids

    # The whole block, each side in CUDA graphs, checked again, then timed by replay. (The graphs
    # live as long as their replay function and outputs: both are dropped after each side.)
    replay = outs = None
    if r["correct"]:
        try:
            replay, _, outs = capture(run_kiln, sets)
            s0["y"].fill_(float("nan"))
            replay(s0)
            torch.cuda.synchronize()
            r["kiln_graph_rel_l2"] = rel_l2(outs[0], ref)
            if not (finite(outs[0]) and r["kiln_graph_rel_l2"] <= CHECK_REL_L2):
                r["correct"] = False
                r["why"] = f"kiln graph: y rel L2 {r['kiln_graph_rel_l2']:.3g} to {r['reference']}"
            elif not time_into(r, "kiln", replay, sets, runs, busy_cycles, flops, weight_bytes,
                               copy_tbps):
                r["correct"], r["why"] = False, "kiln " + r["kiln_error"]
        except Exception as e_:  # noqa: BLE001
            r["correct"], r["why"] = False, f"kiln graph: {kb.error_line(e_)}"
    replay = outs = None
    torch.cuda.synchronize()
    if parts:
        try:
            replay, _, outs = capture(lambda s: torch_block(s, m), sets)
            replay(s0)
            torch.cuda.synchronize()
            r["torch_graph_vs_eager_rel_l2"] = rel_l2(outs[0], ref)
            if not r["torch_graph_vs_eager_rel_l2"] <= CHECK_REL_L2:
                r["torch_error"] = (f"graph: rel L2 {r['torch_graph_vs_eager_rel_l2']:.3g} to "
                                    "its eager output")
            else:
                time_into(r, "torch", replay, sets, runs, busy_cycles, flops, weight_bytes,
                          copy_tbps)
        except Exception as e_:  # noqa: BLE001 - recorded, the run goes on
            r["torch_error"] = f"graph: {kb.error_line(e_)}"
    if "kiln_us" in r and "torch_us" in r:
        r["kiln_vs_torch"] = r["torch_us"] / r["kiln_us"]  # > 1: kiln is faster
    replay = outs = None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    # The two GEMMs alone: kiln FC1 | FC2 on the routing a route | align run left in the
    # workspace; PyTorch's two torch._grouped_mm on the block's permuted rows and act.
    if r["correct"]:
        try:
            run_kiln(s0, STEP_ROUTE | STEP_ALIGN)
            replay, _, _ = capture(lambda s: run_kiln(s, STEP_FC1 | STEP_FC2), sets)
            replay(s0)
            torch.cuda.synchronize()
            if parts:  # FC2's output, slot order, vs PyTorch's (expert-row order)
                torch_down = torch.empty_like(parts["down"])
                torch_down[parts["order"]] = parts["down"]
                kiln_down = ws_view("down", tokens * k * h, dtype).view(tokens * k, h)
                r["kiln_gemms_down_rel_l2"] = rel_l2(kiln_down, torch_down)
                if not r["kiln_gemms_down_rel_l2"] <= CHECK_REL_L2:
                    r["kiln_gemms_error"] = (f"down rel L2 {r['kiln_gemms_down_rel_l2']:.3g} to "
                                             "PyTorch's")
            if "kiln_gemms_error" not in r:
                time_into(r, "kiln_gemms", replay, sets, runs, busy_cycles, flops, weight_bytes,
                          copy_tbps)
        except Exception as e_:  # noqa: BLE001
            r["kiln_gemms_error"] = kb.error_line(e_)
        if "kiln_gemms_error" in r:
            r["correct"], r["why"] = False, "kiln GEMMs alone: " + r["kiln_gemms_error"]
    replay = None
    torch.cuda.synchronize()
    if parts:
        try:
            gin = {"rows": parts["rows"], "act": parts["act"], "offsets": parts["offsets"]}
            replay, _, _ = capture(lambda s: torch_gemms(gin, s), sets)
            time_into(r, "torch_gemms", replay, sets, runs, busy_cycles, flops, weight_bytes,
                      copy_tbps)
        except Exception as e_:  # noqa: BLE001
            r["torch_gemms_error"] = f"graph: {kb.error_line(e_)}"
    if "kiln_gemms_us" in r:
        r["kiln_gemms_pct_of_gemm"] = 100 * r["kiln_gemms_tflops"] / gemm
        if "torch_gemms_us" in r:
            r["kiln_vs_torch_gemms"] = r["torch_gemms_us"] / r["kiln_gemms_us"]
    replay = gin = parts = sets = workspace = None  # freed before the next row's allocations
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_moe.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--quick", action="store_true",
                    help=f"T in {{{', '.join(map(str, QUICK_TOKENS))}}} of every model asked for")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma separated, of {', '.join(MODELS)}")
    ap.add_argument("--tokens", default="",
                    help=f"comma separated T (default {','.join(map(str, TOKENS))})")
    ap.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    ap.add_argument("--runs", type=int, default=0,
                    help=f"timed runs per measurement (0: adaptive, {MIN_RUNS}..{MAX_RUNS})")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    models = [x for x in args.models.split(",") if x]
    for name in models:
        if name not in MODELS:
            ap.error(f"--models: '{name}' is not one of {', '.join(MODELS)}")
    try:
        tokens = [int(x) for x in args.tokens.split(",") if x]
    except ValueError:
        ap.error(f"--tokens: '{args.tokens}' is not a list of integers")
    tokens = tokens or list(QUICK_TOKENS if args.quick else TOKENS)
    if any(t < 1 for t in tokens):
        ap.error("--tokens: every T must be >= 1")
    dtype = DTYPES[args.dtype]

    kiln = Kiln(args.lib)
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    # ~200 us of GPU work ahead of each timed replay: the host's replay call fits in it.
    busy_cycles = 400000

    result = kb.result_header("moe_vs_torch", props, l2_bytes, kiln, seed)
    result.update({
        "quick": args.quick, "dtype": DTYPE_NAME[dtype], "check_rel_l2": CHECK_REL_L2,
        "models": {name: MODELS[name] for name in models}, "tokens": tokens,
        "kiln_variants": [n for n, _ in kiln.variants],
        "torch_grouped_mm": hasattr(torch, "_grouped_mm"),
    })
    copy_tbps = kb.measure_copy(result)
    gemm = kb.gemm_tflops(dtype, busy_cycles)
    torch.cuda.empty_cache()
    result["gemm_tflops"] = {DTYPE_NAME[dtype]: gemm}
    print(f"{props.name} sm_{result['sm']} ({props.multi_processor_count} SMs), driver "
          f"{result['driver']}, torch {torch.__version__} (CUDA {torch.version.cuda}); artifact "
          f"{kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    kb.print_copy(result)
    print(f"dense GEMM {DTYPE_NAME[dtype]} {gemm:.0f} TFLOP/s (torch.matmul {kb.GEMM_N}^3)")

    start = time.time()
    rows = []
    failed = 0
    if not kiln.has(dtype):
        print(f"moe_{DTYPE_NAME[dtype]} not in the artifact: every row skipped")
        rows = [{"model": name, "tokens": t, "dtype": DTYPE_NAME[dtype],
                 "skipped": f"moe_{DTYPE_NAME[dtype]} not in the artifact"}
                for name in models for t in tokens]
        failed = len(rows)
    for name in models if kiln.has(dtype) else []:
        m = MODELS[name]
        expert_bytes = (3 * m["intermediate"] * m["hidden"]) * dtype.itemsize
        nsets = kb.rotation_sets(m["top_k"] * expert_bytes, l2_bytes, MOST_SETS)
        wsets = [make_weights(m, dtype, gen) for _ in range(nsets)]
        torch.cuda.synchronize()
        for t in tokens:
            try:
                r = bench_row(kiln, name, m, t, dtype, wsets, gemm, copy_tbps, gen, busy_cycles,
                              args.runs)
            except Exception as e:  # noqa: BLE001 - out of memory, or a script bug: the row fails
                r = {"model": name, "tokens": t, "dtype": DTYPE_NAME[dtype], "correct": False,
                     "why": kb.error_line(e)}
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            rows.append(r)
            failed += not r["correct"]
            got = ", ".join(f"{label} {r[key]:.1f}" for label, key in (
                ("kiln", "kiln_us"), ("torch", "torch_us"), ("kiln GEMMs", "kiln_gemms_us"),
                ("torch GEMMs", "torch_gemms_us")) if key in r)
            print(f"  {name} T {t}: {got or 'not timed'} us"
                  f"{'' if r['correct'] else '  NOT OK: ' + r.get('why', '')} "
                  f"[{time.time() - start:.0f} s]", flush=True)
            for key in ("torch_error", "torch_gemms_error"):
                if key in r:
                    print(f"    {key}: {r[key]}")
        del wsets
        torch.cuda.empty_cache()
    result["rows"] = rows
    result["elapsed_s"] = time.time() - start
    result["clocks_after"] = kb.clocks()

    def fmt(row, key, spec):
        return format(row[key], spec) if key in row else "-"

    print()
    header = (f"{'model':<14} {'T':>5} {'hit':>3} {'kiln us':>9} {'torch us':>9} {'t/k':>5} "
              f"{'kTF/s':>5} {'tTF/s':>5} {'k%cp':>5} {'t%cp':>5} | {'kGEMM us':>9} "
              f"{'tGEMM us':>9} {'t/k':>5} {'kTF/s':>5} {'tTF/s':>5} {'rel L2':>8}  ok")
    kb.print_header(header)
    for r in rows:
        if "skipped" in r:
            print(f"{r['model']:<14} {r['tokens']:>5}: {r['skipped']}")
            continue
        print(f"{r['model']:<14} {r['tokens']:>5} {fmt(r, 'experts_hit', '3d'):>3} "
              f"{fmt(r, 'kiln_us', '9.1f'):>9} {fmt(r, 'torch_us', '9.1f'):>9} "
              f"{fmt(r, 'kiln_vs_torch', '5.2f'):>5} {fmt(r, 'kiln_tflops', '5.0f'):>5} "
              f"{fmt(r, 'torch_tflops', '5.0f'):>5} {fmt(r, 'kiln_pct_of_copy', '5.1f'):>5} "
              f"{fmt(r, 'torch_pct_of_copy', '5.1f'):>5} | {fmt(r, 'kiln_gemms_us', '9.1f'):>9} "
              f"{fmt(r, 'torch_gemms_us', '9.1f'):>9} {fmt(r, 'kiln_vs_torch_gemms', '5.2f'):>5} "
              f"{fmt(r, 'kiln_gemms_tflops', '5.0f'):>5} {fmt(r, 'torch_gemms_tflops', '5.0f'):>5} "
              f"{fmt(r, 'kiln_rel_l2', '8.2e'):>8}  "
              f"{'yes' if r['correct'] else 'NO ' + r.get('why', '')}")
        for key in ("torch_error", "torch_gemms_error"):
            if key in r:
                print(f"    {key}: {r[key]}")
    print("hit: distinct experts routed; t/k: torch us over kiln us (> 1: kiln is faster); TF/s: "
          "2 T k (2 I H + H I) / time; %cp (T <= 64): the activated experts' weight bytes per "
          "second as a % of the copy bandwidth; GEMM: FC1 + FC2 alone (kiln steps 4 | 8, torch's "
          "two _grouped_mm); rel L2: kiln's y vs the reference (the PyTorch block)")
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
