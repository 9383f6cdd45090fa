#!/usr/bin/env python3
"""kiln rmsnorm vs eager PyTorch, in one process, on the same tensors, timed with CUDA events.

Loads the ctypes bridge (libkiln_bench_rmsnorm.so, see bench/CMakeLists.txt), then for each dtype
(bf16, fp16), op (plain, fused = residual += x then RMSNorm) and shape (the bench cases of
kernels/rmsnorm/tests/gpu/cases.h, which the bridge exports: rows x hidden 1, 8, 32, 128 x 4096
for latency, 4096 x 4096 and 16384 x 8192 for bandwidth):

  1. checks kiln against a float64 reference computed by torch (the residual bit for bit, the
     output by relative L2 within the bounds of docs/performance-method.md) before any timing;
  2. times kiln and torch (F.rms_norm, after residual.add_(x) for the fused op) with CUDA events:
     warm-up, then the median of >= 50 runs, rotating through enough input sets that the working
     set is >= 4x the L2 (60 MB on an H200) for the bandwidth shapes. Before each timed run the
     GPU is kept busy (torch.cuda._sleep) so the host's launch overhead is not timed: the events
     bracket device time only, for both kiln and torch;
  3. reports latency (us) for small row counts and TB/s of minimum bytes (plain: 2, fused: 4
     tensors of rows x hidden), % of the device-to-device copy bandwidth measured in this run,
     and kiln / torch.

SM and memory clocks are logged (nvidia-smi) before and after. Writes JSON to --json and prints
a table. Exit code 1 when a correctness check fails.
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

# docs/performance-method.md, Method 2: fp32 accumulation with 16-bit inputs and outputs rounded
# once.
REL_L2_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
EPS = 1e-6
# The fields of a bench case, in the bridge's order (kiln_bench_rmsnorm_case).
CASE_FIELDS = (("rows", int), ("hidden", int))


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        f = self.lib.kiln_bench_rmsnorm
        f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_float,
                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                      ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        self.lib.kiln_bench_variant_count.restype = ctypes.c_int
        self.variants = []
        for i in range(self.lib.kiln_bench_variant_count()):
            name = ctypes.create_string_buffer(128)
            hidden, dtype = ctypes.c_int(), ctypes.c_int()
            self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(hidden), ctypes.byref(dtype))
            self.variants.append((name.value.decode(), hidden.value, dtype.value))
        self.cases = self.read_cases("rmsnorm", CASE_FIELDS)

    def has(self, hidden, dtype):
        return any(h == hidden and d == DTYPE_CODE[dtype] for _, h, d in self.variants)

    def __call__(self, out, x, residual, weight, eps=EPS):
        rows, hidden = x.shape
        stream = torch.cuda.current_stream().cuda_stream
        rc = self.lib.kiln_bench_rmsnorm(
            DTYPE_CODE[x.dtype], rows, hidden, eps, out.data_ptr(), x.data_ptr(),
            residual.data_ptr() if residual is not None else None, weight.data_ptr(),
            stream, self.message, len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln rmsnorm: {self.message.value.decode()}")


def torch_op(out, x, residual, weight, eps=EPS):
    """What a user runs in eager PyTorch: the residual add in place, then F.rms_norm."""
    if residual is not None:
        residual.add_(x)
        return F.rms_norm(residual, (x.shape[1],), weight, eps)
    return F.rms_norm(x, (x.shape[1],), weight, eps)


def make_set(rows, hidden, dtype, fused, gen):
    x = torch.randn(rows, hidden, dtype=torch.float32, device="cuda", generator=gen).to(dtype)
    residual = (torch.randn(rows, hidden, dtype=torch.float32, device="cuda", generator=gen)
                .to(dtype) if fused else None)
    out = torch.empty(rows, hidden, dtype=dtype, device="cuda")
    return x, residual, out


def check(kiln, rows, hidden, dtype, fused, weight, gen):
    """kiln vs a float64 reference and vs torch; returns (kiln rel L2, torch rel L2, ok, why)."""
    x, residual, out = make_set(rows, hidden, dtype, fused, gen)
    out.fill_(float("nan"))
    residual_in = residual.clone() if fused else None
    kiln(out, x, residual, weight)
    torch.cuda.synchronize()
    if fused:
        v = (x.double() + residual_in.double()).to(dtype)  # the rounded sum the kernel stores
        if not torch.equal(residual.view(torch.int16), v.view(torch.int16)):
            bad = (residual.view(torch.int16) != v.view(torch.int16)).sum().item()
            return math.nan, math.nan, False, f"residual differs from round(x + residual) at {bad}"
        t_res = residual_in.clone()
        t_out = torch_op(None, x, t_res, weight)
    else:
        v = x
        t_out = torch_op(None, x, None, weight)
    v64 = v.double()
    ref = v64 * torch.rsqrt(v64.pow(2).mean(-1, keepdim=True) + EPS) * weight.double()
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    t_rel = ((t_out.double() - ref).norm() / ref.norm()).item()
    ok = torch.isfinite(out).all().item() and rel <= REL_L2_BOUND[dtype]
    why = "" if ok else f"rel L2 {rel:.3g} > {REL_L2_BOUND[dtype]} or non-finite output"
    return rel, t_rel, ok, why


def bench_case(kiln, rows, hidden, dtype, fused, copy_tbps, l2_bytes, gen, busy_cycles):
    weight = (1 + 0.1 * torch.randn(hidden, dtype=torch.float32, device="cuda", generator=gen)
              ).to(dtype)
    rel, t_rel, ok, why = check(kiln, rows, hidden, dtype, fused, weight, gen)
    tensors = 4 if fused else 2
    min_bytes = tensors * rows * hidden * dtype.itemsize
    set_bytes = (3 if fused else 2) * rows * hidden * dtype.itemsize
    nsets = kb.rotation_sets(set_bytes, l2_bytes, 64)
    sets = [make_set(rows, hidden, dtype, fused, gen) for _ in range(nsets)]
    runs = 100 if rows * hidden <= 4096 * 4096 else 50
    k_med, k_min = kb.timed(lambda s: kiln(s[2], s[0], s[1], weight), sets, runs, 10, busy_cycles)
    t_med, t_min = kb.timed(lambda s: torch_op(s[2], s[0], s[1], weight), sets, runs, 10, busy_cycles)
    del sets
    torch.cuda.empty_cache()
    k_tbps = kb.tbps(min_bytes, k_med)
    t_tbps = kb.tbps(min_bytes, t_med)
    return {
        "dtype": DTYPE_NAME[dtype], "op": "fused" if fused else "plain", "rows": rows,
        "hidden": hidden, "min_bytes": min_bytes, "input_sets": nsets, "runs": runs,
        "kiln_us": k_med * 1e3, "kiln_min_us": k_min * 1e3,
        "torch_us": t_med * 1e3, "torch_min_us": t_min * 1e3,
        "kiln_tbps": k_tbps, "torch_tbps": t_tbps,
        "kiln_pct_of_copy": 100 * k_tbps / copy_tbps, "torch_pct_of_copy": 100 * t_tbps / copy_tbps,
        "speedup_vs_torch": t_med / k_med,
        "kiln_rel_l2": rel, "torch_rel_l2": t_rel, "correct": ok, "why": why,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_rmsnorm.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--ops", default="plain,fused")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    kiln = Kiln(args.lib)
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    # ~20 us of GPU work ahead of each timed op at ~2 GHz: more than the host needs to enqueue it.
    busy_cycles = 40000

    result = kb.result_header("rmsnorm_vs_torch", props, l2_bytes, kiln, seed)
    copy_tbps = kb.measure_copy(result)
    print(f"{props.name} sm_{result['sm']}, driver {result['driver']}, torch {torch.__version__}; "
          f"artifact {kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    kb.print_copy(result)

    dtypes = [{"bf16": torch.bfloat16, "fp16": torch.float16}[d] for d in args.dtypes.split(",")]
    ops = [o == "fused" for o in args.ops.split(",")]
    cases = []
    for dtype in dtypes:
        for fused in ops:
            for rows, hidden in ((c["rows"], c["hidden"]) for c in kiln.cases):
                if not kiln.has(hidden, dtype):
                    cases.append({"dtype": DTYPE_NAME[dtype], "op": "fused" if fused else "plain",
                                  "rows": rows, "hidden": hidden, "skipped": "variant not built"})
                    continue
                cases.append(bench_case(kiln, rows, hidden, dtype, fused, copy_tbps, l2_bytes,
                                        gen, busy_cycles))
    result["cases"] = cases
    result["clocks_after"] = kb.clocks()

    header = (f"{'dtype':5} {'op':5} {'rows x hidden':>13} {'kiln us':>9} {'torch us':>9} "
              f"{'kiln TB/s':>9} {'% copy':>7} {'torch TB/s':>10} {'kiln/torch':>10} "
              f"{'rel L2':>9}  ok")
    kb.print_header(header)
    failed = 0
    for c in cases:
        if "skipped" in c:
            print(f"{c['dtype']:5} {c['op']:5} {c['rows']:>6} x {c['hidden']:<5} skipped: "
                  f"{c['skipped']}")
            continue
        failed += not c["correct"]
        print(f"{c['dtype']:5} {c['op']:5} {c['rows']:>6} x {c['hidden']:<5} {c['kiln_us']:9.2f} "
              f"{c['torch_us']:9.2f} {c['kiln_tbps']:9.3f} {c['kiln_pct_of_copy']:6.1f}% "
              f"{c['torch_tbps']:10.3f} {c['speedup_vs_torch']:9.2f}x {c['kiln_rel_l2']:9.2e}  "
              f"{'yes' if c['correct'] else 'NO ' + c['why']}")
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
