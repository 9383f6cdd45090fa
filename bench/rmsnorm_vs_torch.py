#!/usr/bin/env python3
"""kiln rmsnorm vs eager PyTorch, in one process, on the same tensors, timed with CUDA events.

Loads the ctypes bridge (libkiln_bench_rmsnorm.so, see bench/CMakeLists.txt), then for each dtype
(bf16, fp16), op (plain, fused = residual += x then RMSNorm) and shape:

  1. checks kiln against a float64 reference computed by torch (the residual bit for bit, the
     output by relative L2 within the PERF.md bounds) before any timing;
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
import datetime
import json
import math
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

L2_BYTES = 60 * 1024 * 1024  # H200; only sizes the rotation, read from the device when possible
# PERF.md, Method 2: fp32 accumulation with 16-bit inputs and outputs rounded once.
REL_L2_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
EPS = 1e-6

LATENCY_SHAPES = [(1, 4096), (8, 4096), (32, 4096), (128, 4096)]
BANDWIDTH_SHAPES = [(4096, 4096), (16384, 8192)]


class Kiln:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.kiln_bench_rmsnorm
        f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_float,
                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                      ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        self.lib.kiln_bench_artifact_tag.restype = ctypes.c_char_p
        self.lib.kiln_bench_artifact_fingerprint.restype = ctypes.c_char_p
        self.lib.kiln_bench_variant_count.restype = ctypes.c_int
        self.message = ctypes.create_string_buffer(1024)
        self.tag = self.lib.kiln_bench_artifact_tag().decode()
        self.fingerprint = self.lib.kiln_bench_artifact_fingerprint().decode()
        self.variants = []
        for i in range(self.lib.kiln_bench_variant_count()):
            name = ctypes.create_string_buffer(128)
            hidden, dtype = ctypes.c_int(), ctypes.c_int()
            self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(hidden), ctypes.byref(dtype))
            self.variants.append((name.value.decode(), hidden.value, dtype.value))

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


def clocks():
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20).stdout.strip()
        return text
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"


def timed(fn, sets, runs, warmup, busy_cycles):
    """Median device time (ms) of fn(set) over `runs` runs, rotating through `sets`."""
    for i in range(warmup):
        fn(sets[i % len(sets)])
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        torch.cuda._sleep(busy_cycles)  # the host enqueues the events and the op meanwhile
        starts[i].record()
        fn(sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(times), min(times)


def copy_bandwidth(gib=2.0, runs=20):
    """Device-to-device copy of `gib` GiB: bytes read + written per second (TB/s)."""
    n = int(gib * (1 << 30))
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    src.fill_(1)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    med, _ = timed(lambda _s: dst.copy_(src), [None], runs, 2, 1000)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / (med * 1e-3) / 1e12


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
    nsets = max(2, min(64, math.ceil(4 * l2_bytes / set_bytes)))
    sets = [make_set(rows, hidden, dtype, fused, gen) for _ in range(nsets)]
    runs = 100 if rows * hidden <= 4096 * 4096 else 50
    k_med, k_min = timed(lambda s: kiln(s[2], s[0], s[1], weight), sets, runs, 10, busy_cycles)
    t_med, t_min = timed(lambda s: torch_op(s[2], s[0], s[1], weight), sets, runs, 10, busy_cycles)
    del sets
    torch.cuda.empty_cache()
    k_tbps = min_bytes / (k_med * 1e-3) / 1e12
    t_tbps = min_bytes / (t_med * 1e-3) / 1e12
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
    l2_bytes = getattr(props, "L2_cache_size", L2_BYTES) or L2_BYTES
    seed = args.seed if args.seed is not None else int(datetime.datetime.now().timestamp())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    # ~20 us of GPU work ahead of each timed op at ~2 GHz: more than the host needs to enqueue it.
    busy_cycles = 40000

    result = {
        "bench": "rmsnorm_vs_torch", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "gpu": props.name, "sm": props.major * 10 + props.minor,
        "multiprocessors": props.multi_processor_count, "l2_bytes": l2_bytes,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                  "--format=csv,noheader"], capture_output=True,
                                 text=True).stdout.strip(),
        "artifact_tag": kiln.tag, "artifact_fingerprint": kiln.fingerprint, "seed": seed,
        "clocks_before": clocks(),
    }
    copy_tbps = copy_bandwidth()
    result["copy_tbps"] = copy_tbps
    result["clocks_after_copy"] = clocks()
    print(f"{props.name} sm_{result['sm']}, driver {result['driver']}, torch {torch.__version__}; "
          f"artifact {kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    print(f"device-to-device copy: {copy_tbps:.2f} TB/s (2 GiB, read + written); "
          f"clocks (sm, mem): {result['clocks_after_copy']}")

    dtypes = [{"bf16": torch.bfloat16, "fp16": torch.float16}[d] for d in args.dtypes.split(",")]
    ops = [o == "fused" for o in args.ops.split(",")]
    cases = []
    for dtype in dtypes:
        for fused in ops:
            for rows, hidden in LATENCY_SHAPES + BANDWIDTH_SHAPES:
                if not kiln.has(hidden, dtype):
                    cases.append({"dtype": DTYPE_NAME[dtype], "op": "fused" if fused else "plain",
                                  "rows": rows, "hidden": hidden, "skipped": "variant not built"})
                    continue
                cases.append(bench_case(kiln, rows, hidden, dtype, fused, copy_tbps, l2_bytes,
                                        gen, busy_cycles))
    result["cases"] = cases
    result["clocks_after"] = clocks()

    header = (f"{'dtype':5} {'op':5} {'rows x hidden':>13} {'kiln us':>9} {'torch us':>9} "
              f"{'kiln TB/s':>9} {'% copy':>7} {'torch TB/s':>10} {'kiln/torch':>10} "
              f"{'rel L2':>9}  ok")
    print(header)
    print("-" * len(header))
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
    print(f"clocks (sm, mem) after: {result['clocks_after']}")
    result["failed_checks"] = failed
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
