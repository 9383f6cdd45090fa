#!/usr/bin/env python3
"""kiln gemv vs torch.nn.functional.linear (cuBLAS), in one process, on the same tensors, in CUDA
graphs.

Loads the ctypes bridge (libkiln_bench_gemv.so, see bench/CMakeLists.txt), measures the
device-to-device copy bandwidth in the same run, then for each dtype (bf16, fp16) and each bench
case of kernels/gemv/tests/gpu/cases.h, which the bridge exports (the Qwen3 test model's qkv 4096 x
2048, o 2048 x 2048, gate+up 12288 x 2048, down 2048 x 6144 and LM head 32000 x 2048 into float32
logits; Llama-3-8B / Qwen3-8B's qkv 6144 x 4096, o 4096 x 4096, gate+up 28672 x 4096, down 4096 x
14336; N x K, each at m = 1, 2, 4, 8 tokens):

  1. makes random x [m, k] and enough weight sets w [n, k] (PyTorch's Linear layout, |w| ~ 0.02)
     that the weights exceed 4x the L2 (up to one set per launch of a graph), each with its own x
     and outputs;
  2. checks kiln before any timing, on set 0, with y poisoned (NaN) first: against an fp32
     reference (F.linear of the fp32 copies, TF32 off), every output within one ulp of the output
     dtype (none for float32 logits) plus 3e-5 of sum_k |x w| (fp32 accumulation over k: kiln's
     own bound, reference.h, is (k / 32 + 38) 2^-24 of it, 2.9e-5 at k 14336; a single misread
     term is ~1 / k of it, 7e-5 there). overlap_launch on must give the same bits. torch's error
     against the same reference is reported, not judged;
  3. times kiln and torch in CUDA graphs of --launches (20) launches each, launch i on set
     i % sets (so consecutive launches read different weights, as a decoder's layers do), one
     graph replay per timed run (bench/kiln_bench.py: torch.cuda._sleep ahead of each, CUDA
     events, median of --runs): kiln with overlap_launch off (each launch waits for the one
     before, as torch's do) and on (each launch is a programmatic dependent of the one before:
     it starts streaming its weights while the one before finishes, as in kiln's decoder);
     torch: F.linear(x, w) in the dtype (for the float32-logit rows too: torch has no fp16 x
     bf16 -> fp32 Linear; the cast after it is not timed);
  4. reports per launch: us for kiln, kiln with overlap and torch; kiln's TB/s on the weight
     bytes (n k 2, what a GEMV at m <= 8 must read) and its % of the copy bandwidth measured in
     this run; torch / kiln (> 1: kiln is faster), and the same with overlap.

Writes JSON to --json (gpu, driver, copy TB/s, artifact tag and fingerprint, one row per case) and
prints a table. Exit code 1 when a correctness check fails.
"""
import argparse
import ctypes
import pathlib
import sys

import torch
import torch.nn.functional as F

# kiln_bench (the shared timing) lives in the repository's bench/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "bench"))
import kiln_bench as kb  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7}
# The fields of a bench case, in the bridge's order (kiln_bench_gemv_case).
CASE_FIELDS = (("m", int), ("n", int), ("k", int), ("bias", bool), ("out_fp32", bool))
# Of sum_k |x w|: what fp32 accumulation may add to the one rounding of the output (step 2).
ACCUMULATION_SLACK = 3e-5
MAX_SETS = 64


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        c_int, c_i64, c_ptr = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
        self.lib.kiln_bench_gemv_run.argtypes = [c_int, c_int, c_i64, c_i64, c_i64, c_i64, c_i64,
                                                 c_ptr, c_ptr, c_ptr, c_ptr, c_int, c_ptr,
                                                 ctypes.c_char_p, ctypes.c_size_t]
        self.lib.kiln_bench_gemv_run.restype = ctypes.c_int
        self.lib.kiln_bench_variant_count.restype = ctypes.c_int
        self.variants = []
        for i in range(self.lib.kiln_bench_variant_count()):
            name = ctypes.create_string_buffer(128)
            dtype = ctypes.c_int()
            self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(dtype))
            self.variants.append((name.value.decode(), dtype.value))
        self.cases = self.read_cases("gemv", CASE_FIELDS)

    def has(self, dtype):
        return any(d == DTYPE_CODE[dtype] for _, d in self.variants)

    def __call__(self, x, w, bias, y, overlap):
        """y = x . w^T (+ bias) on the current stream; x [m, k], w [n, k], y [m, n] contiguous."""
        stream = torch.cuda.current_stream().cuda_stream
        rc = self.lib.kiln_bench_gemv_run(
            DTYPE_CODE[x.dtype], int(y.dtype == torch.float32), x.shape[0], w.shape[0],
            w.shape[1], x.stride(0), y.stride(0), x.data_ptr(), w.data_ptr(),
            bias.data_ptr() if bias is not None else None, y.data_ptr(), int(overlap), stream,
            self.message, len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln gemv: {self.message.value.decode()}")


# ---------------------------------------------------------------- inputs


def make_set(c, dtype, gen):
    m, n, k = c["m"], c["n"], c["k"]
    x = torch.randn(m, k, device="cuda", generator=gen, dtype=torch.float32).to(dtype)
    w = (0.02 * torch.randn(n, k, device="cuda", generator=gen, dtype=torch.float32)).to(dtype)
    bias = None
    if c["bias"]:
        bias = torch.randn(n, device="cuda", generator=gen, dtype=torch.float32).to(dtype)
    out_dtype = torch.float32 if c["out_fp32"] else dtype
    return {"x": x, "w": w, "bias": bias, "y": torch.empty(m, n, device="cuda", dtype=out_dtype)}


def run_kiln(kiln, s, overlap):
    kiln(s["x"], s["w"], s["bias"], s["y"], overlap)


def run_torch(s):
    return F.linear(s["x"], s["w"], s["bias"])


# ---------------------------------------------------------------- checks


def check(kiln, s, dtype, out_fp32):
    """kiln (overlap off and on) and torch against the fp32 reference; a dict of the measured
    errors, ok, why."""
    x, w, b = s["x"].float(), s["w"].float(), s["bias"]
    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ref = F.linear(x, w, b.float() if b is not None else None)
        scale = F.linear(x.abs(), w.abs(), b.float().abs() if b is not None else None)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    s["y"].fill_(float("nan"))
    run_kiln(kiln, s, False)
    torch.cuda.synchronize()
    got = s["y"].clone()
    s["y"].fill_(float("nan"))
    run_kiln(kiln, s, True)
    torch.cuda.synchronize()
    bits = torch.int32 if out_fp32 else torch.int16
    same = torch.equal(got.view(bits), s["y"].view(bits))
    ulp = 0.0 if out_fp32 else 2.0 ** -MANTISSA_BITS[dtype]
    bound = ulp * ref.abs() + ACCUMULATION_SLACK * scale
    k_err = (got.float() - ref).abs()
    t_err = (run_torch(s).float() - ref).abs()
    # torch's y is in the dtype even for the float32-logit rows: its bound has the dtype's ulp.
    t_bound = 2.0 ** -MANTISSA_BITS[dtype] * ref.abs() + ACCUMULATION_SLACK * scale
    bad = (~(k_err <= bound)).sum().item()  # NaN (unwritten) counts as bad
    rel = lambda e: (e.norm() / ref.norm()).item()  # noqa: E731
    why = []
    if bad:
        why.append(f"{bad} of {ref.numel()} outputs outside the bound")
    if not same:
        why.append("overlap_launch on and off differ")
    return {"kiln_rel_l2": rel(k_err), "torch_rel_l2": rel(t_err),
            "kiln_max_err_over_bound": (k_err / bound).max().item(),
            "torch_outside_bound": (~(t_err <= t_bound)).sum().item(),
            "overlap_bit_exact": same, "correct": not why, "why": "; ".join(why)}


# ---------------------------------------------------------------- timing


def graph_of(fn, sets, launches):
    """A CUDA graph of `launches` calls fn(set i % len(sets)), after one call per set outside
    capture (kiln's module load, cuBLAS's workspace) on the capture's side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in sets:
            fn(s)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for i in range(launches):
            fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    return graph


def timed_graph(fn, sets, launches, runs, busy_cycles):
    """(median us, min us) per launch: replays of a graph of `launches` launches, timed by
    kb.timed."""
    graph = graph_of(fn, sets, launches)
    med, mn = kb.timed(lambda _s: graph.replay(), [None], runs, 3, busy_cycles)
    return med * 1e3 / launches, mn * 1e3 / launches


def bench_case(kiln, c, dtype, copy_tbps, l2_bytes, gen, launches, runs, busy_cycles):
    m, n, k = c["m"], c["n"], c["k"]
    weight_bytes = n * k * dtype.itemsize
    set_bytes = weight_bytes + m * k * dtype.itemsize
    nsets = min(kb.rotation_sets(set_bytes, l2_bytes, MAX_SETS), launches)
    sets = [make_set(c, dtype, gen) for _ in range(nsets)]
    row = {"name": c["name"], "dtype": DTYPE_NAME[dtype], "m": m, "n": n, "k": k,
           "bias": c["bias"], "out": "fp32" if c["out_fp32"] else DTYPE_NAME[dtype],
           "weight_bytes": weight_bytes, "weight_sets": nsets, "launches_per_graph": launches,
           "graph_replays": runs}
    row.update(check(kiln, sets[0], dtype, c["out_fp32"]))
    if not row["correct"]:
        return row
    k_med, k_min = timed_graph(lambda s: run_kiln(kiln, s, False), sets, launches, runs,
                               busy_cycles)
    o_med, o_min = timed_graph(lambda s: run_kiln(kiln, s, True), sets, launches, runs,
                               busy_cycles)
    t_med, t_min = timed_graph(run_torch, sets, launches, runs, busy_cycles)
    del sets
    torch.cuda.empty_cache()
    k_tbps, o_tbps, t_tbps = (kb.tbps(weight_bytes, us * 1e-3) for us in (k_med, o_med, t_med))
    row.update({
        "kiln_us": k_med, "kiln_min_us": k_min,
        "kiln_overlap_us": o_med, "kiln_overlap_min_us": o_min,
        "torch_us": t_med, "torch_min_us": t_min,
        "kiln_tbps": k_tbps, "kiln_overlap_tbps": o_tbps, "torch_tbps": t_tbps,
        "kiln_pct_of_copy": 100 * k_tbps / copy_tbps,
        "kiln_overlap_pct_of_copy": 100 * o_tbps / copy_tbps,
        "torch_pct_of_copy": 100 * t_tbps / copy_tbps,
        "speedup_vs_torch": t_med / k_med, "overlap_speedup_vs_torch": t_med / o_med,
    })
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_gemv.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--cases", default="", help="only the cases whose name contains one of "
                    "these comma-separated strings (e.g. qwen3,_m1)")
    ap.add_argument("--launches", type=int, default=20, help="launches per CUDA graph")
    ap.add_argument("--runs", type=int, default=50, help="timed graph replays (median)")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    kiln = Kiln(args.lib)
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    busy_cycles = 200000  # ~100 us of GPU work ahead of each replay: the host enqueues meanwhile

    result = kb.result_header("gemv_vs_torch", props, l2_bytes, kiln, seed)
    result.update({"launches_per_graph": args.launches, "graph_replays": args.runs})
    copy_tbps = kb.measure_copy(result)
    print(f"{props.name} sm_{result['sm']}, driver {result['driver']}, torch {torch.__version__}; "
          f"artifact {kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    kb.print_copy(result)

    dtypes = [DTYPES[d] for d in args.dtypes.split(",")]
    wanted = [p for p in args.cases.split(",") if p]
    cases = []
    for dtype in dtypes:
        for c in kiln.cases:
            if wanted and not any(p in c["name"] for p in wanted):
                continue
            if not kiln.has(dtype):
                cases.append({"name": c["name"], "dtype": DTYPE_NAME[dtype],
                              "skipped": "variant not built"})
                continue
            try:
                cases.append(bench_case(kiln, c, dtype, copy_tbps, l2_bytes, gen, args.launches,
                                        args.runs, busy_cycles))
            except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                cases.append({"name": c["name"], "dtype": DTYPE_NAME[dtype], "correct": False,
                              "why": kb.error_line(e), "error": kb.error_line(e)})
    result["cases"] = cases
    result["clocks_after"] = kb.clocks()

    header = (f"{'dtype':5} {'case':20} {'kiln us':>8} {'+overlap':>8} {'torch us':>8} "
              f"{'kiln TB/s':>9} {'% copy':>7} {'+overlap':>8} {'torch/kiln':>10} "
              f"{'+overlap':>8}  ok")
    kb.print_header(header)
    failed = 0
    for c in cases:
        if "skipped" in c:
            print(f"{c['dtype']:5} {c['name']:20} skipped: {c['skipped']}")
            continue
        failed += not c["correct"]
        if "kiln_us" not in c:
            print(f"{c['dtype']:5} {c['name']:20} NO {c['why']}")
            continue
        print(f"{c['dtype']:5} {c['name']:20} {c['kiln_us']:8.2f} {c['kiln_overlap_us']:8.2f} "
              f"{c['torch_us']:8.2f} {c['kiln_tbps']:9.3f} {c['kiln_pct_of_copy']:6.1f}% "
              f"{c['kiln_overlap_pct_of_copy']:7.1f}% {c['speedup_vs_torch']:9.2f}x "
              f"{c['overlap_speedup_vs_torch']:7.2f}x  yes")
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
