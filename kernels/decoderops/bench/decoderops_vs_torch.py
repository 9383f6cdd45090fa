#!/usr/bin/env python3
"""kiln decoderops vs eager PyTorch, in one process, on the same tensors, timed with CUDA events.

Loads the ctypes bridge (libkiln_bench_decoderops.so, see bench/CMakeLists.txt), then for each
dtype (bf16, fp16, fp32) and shape (the bench cases of kernels/decoderops/tests/gpu/cases.h, which
the bridge exports: Qwen3-8B's embedding of 1 / 64 / 4096 tokens from a 151936 x 4096 table, its
MLP activation silu(gate) * up of width 12288 at 1 / 64 / 4096 tokens, greedy sampling over 1 / 64
rows of 151936 logits):

  1. checks kiln before any timing: embed bit for bit against torch.nn.functional.embedding;
     silu_mul against a float64 reference, every output within one rounding (fewer than one ulp
     of the dtype from it; fp32: fewer than 8), eager PyTorch's error against the same reference
     reported too; argmax exactly against the first index of the row maximum (and torch.argmax's
     answer compared);
  2. times kiln and eager PyTorch (F.embedding(ids, table); F.silu(g) * u on the two halves of the
     input; torch.argmax(x, dim=-1)) with CUDA events: warm-up, then the median of >= 50 runs,
     rotating through enough input sets that the working set is >= 4x the L2 (embed: one table,
     fresh random ids per set, so the rows come from HBM);
  3. reports latency (us), TB/s of minimum bytes (embed: the rows read and written and the ids;
     silu_mul: gate and up read, out written; argmax: the logits read and the indices written),
     % of the device-to-device copy bandwidth measured in this run, and kiln / torch.

Writes JSON to --json and prints a table. Exit code 1 when a correctness check fails.
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

DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23}
# silu_mul's acceptance (kernels/decoderops/reference.h): fewer than this many ulps of the dtype.
ULPS_ALLOWED = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 8}
OPS = ("embed", "silu_mul", "argmax")
# The fields of a bench case, in the bridge's order (kiln_bench_decoderops_case).
CASE_FIELDS = (("op", int), ("tokens", int), ("width", int), ("table_rows", int))


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        c_int, c_i64, c_ptr = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
        tail = [ctypes.c_char_p, ctypes.c_size_t]
        self.lib.kiln_bench_decoderops_embed.argtypes = [c_int, c_i64, c_i64, c_i64, c_ptr, c_ptr,
                                                         c_ptr, c_ptr] + tail
        self.lib.kiln_bench_decoderops_silu_mul.argtypes = [c_int, c_i64, c_i64, c_ptr, c_ptr,
                                                            c_ptr] + tail
        self.lib.kiln_bench_decoderops_argmax.argtypes = [c_int, c_i64, c_i64, c_ptr, c_ptr,
                                                          c_ptr] + tail
        for f in ("embed", "silu_mul", "argmax"):
            getattr(self.lib, f"kiln_bench_decoderops_{f}").restype = ctypes.c_int
        self.lib.kiln_bench_variant_count.restype = ctypes.c_int
        self.variants = []
        for i in range(self.lib.kiln_bench_variant_count()):
            name = ctypes.create_string_buffer(128)
            dtype = ctypes.c_int()
            self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(dtype))
            self.variants.append((name.value.decode(), dtype.value))
        self.cases = self.read_cases("decoderops", CASE_FIELDS)

    def has(self, dtype):
        return any(d == DTYPE_CODE[dtype] for _, d in self.variants)

    def _check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"kiln {what}: {self.message.value.decode()}")

    def embed(self, ids, table, out):
        stream = torch.cuda.current_stream().cuda_stream
        self._check(self.lib.kiln_bench_decoderops_embed(
            DTYPE_CODE[table.dtype], ids.numel(), table.shape[0], table.shape[1], ids.data_ptr(),
            table.data_ptr(), out.data_ptr(), stream, self.message, len(self.message)), "embed")

    def silu_mul(self, x, out):
        stream = torch.cuda.current_stream().cuda_stream
        self._check(self.lib.kiln_bench_decoderops_silu_mul(
            DTYPE_CODE[x.dtype], x.shape[0], out.shape[1], x.data_ptr(), out.data_ptr(), stream,
            self.message, len(self.message)), "silu_mul")

    def argmax(self, x, out):
        stream = torch.cuda.current_stream().cuda_stream
        self._check(self.lib.kiln_bench_decoderops_argmax(
            DTYPE_CODE[x.dtype], x.shape[0], x.shape[1], x.data_ptr(), out.data_ptr(), stream,
            self.message, len(self.message)), "argmax")


# ---------------------------------------------------------------- eager PyTorch


def torch_embed(s):
    return F.embedding(s["ids"], s["table"])


def torch_silu_mul(s):
    g, u = s["x"].chunk(2, dim=-1)
    return F.silu(g) * u


def torch_argmax(s):
    return torch.argmax(s["x"], dim=-1)


# ---------------------------------------------------------------- inputs


def make_set(c, dtype, gen, table=None):
    op, t, w = OPS[c["op"]], c["tokens"], c["width"]
    if op == "embed":
        ids = torch.randint(0, c["table_rows"], (t,), device="cuda", generator=gen,
                            dtype=torch.int32)
        return {"ids": ids, "table": table, "out": torch.empty(t, w, device="cuda", dtype=dtype)}
    if op == "silu_mul":
        x = torch.randn(t, 2 * w, device="cuda", generator=gen, dtype=torch.float32).to(dtype)
        return {"x": x, "out": torch.empty(t, w, device="cuda", dtype=dtype)}
    x = torch.randn(t, w, device="cuda", generator=gen, dtype=torch.float32).to(dtype)
    return {"x": x, "out": torch.empty(t, device="cuda", dtype=torch.int32)}


def run_kiln(kiln, op, s):
    if op == "embed":
        kiln.embed(s["ids"], s["table"], s["out"])
    elif op == "silu_mul":
        kiln.silu_mul(s["x"], s["out"])
    else:
        kiln.argmax(s["x"], s["out"])


def run_torch(op, s):
    return {"embed": torch_embed, "silu_mul": torch_silu_mul, "argmax": torch_argmax}[op](s)


def min_bytes(op, c, elem):
    t, w = c["tokens"], c["width"]
    if op == "embed":
        return 2 * t * w * elem + 4 * t
    if op == "silu_mul":
        return 3 * t * w * elem
    return t * w * elem + 4 * t


# ---------------------------------------------------------------- checks


def ulps_from(got, exact, dtype):
    """|got - exact| in ulps of the dtype at exact's magnitude (float64; the spacing of the
    binade of |exact|, the subnormal spacing below the smallest normal)."""
    info = torch.finfo(dtype)
    mag = exact.abs().clamp(min=info.tiny)
    spacing = torch.exp2(torch.floor(torch.log2(mag)) - MANTISSA_BITS[dtype])
    return (got.double() - exact).abs() / spacing


def check(kiln, op, c, s, dtype):
    """kiln (and torch) against the reference; returns a dict of the measured errors, ok, why."""
    run_kiln(kiln, op, s)
    torch.cuda.synchronize()
    if op == "embed":
        want = torch_embed(s)
        bits = torch.int32 if dtype == torch.float32 else torch.int16
        same = torch.equal(s["out"].view(bits), want.view(bits))
        return {"bit_exact": same, "correct": same,
                "why": "" if same else "differs from F.embedding"}
    if op == "silu_mul":
        x = s["x"].double()
        g, u = x.chunk(2, dim=-1)
        exact = g / (1 + torch.exp(-g)) * u
        k_ulps = ulps_from(s["out"], exact, dtype)
        t_ulps = ulps_from(torch_silu_mul(s), exact, dtype)
        allowed = ULPS_ALLOWED[dtype]
        bad = (~(k_ulps < allowed)).sum().item()  # NaN (unwritten) counts as bad
        return {"kiln_max_ulps": k_ulps.max().item(), "torch_max_ulps": t_ulps.max().item(),
                "kiln_over_1ulp": (k_ulps >= 1).sum().item(),
                "torch_over_1ulp": (t_ulps >= 1).sum().item(),
                "correct": bad == 0,
                "why": "" if bad == 0 else f"{bad} outputs {allowed}+ ulps from silu(g) * u"}
    x = s["x"]
    m = x.max(dim=-1, keepdim=True).values
    index = torch.arange(x.shape[1], device="cuda").expand_as(x)
    want = torch.where(x == m, index, x.shape[1]).min(dim=-1).values
    got = s["out"].long()
    wrong = (got != want).sum().item()
    torch_wrong = (torch_argmax(s) != want).sum().item()
    return {"wrong_rows": wrong, "torch_wrong_rows": torch_wrong, "correct": wrong == 0,
            "why": "" if wrong == 0 else f"{wrong} rows not the first maximum"}


def bench_case(kiln, c, dtype, copy_tbps, l2_bytes, gen, busy_cycles):
    op = OPS[c["op"]]
    elem = dtype.itemsize
    table = None
    if op == "embed":
        table = torch.randn(c["table_rows"], c["width"], device="cuda", generator=gen,
                            dtype=torch.float32).to(dtype)
    checked = check(kiln, op, c, make_set(c, dtype, gen, table), dtype)
    nbytes = min_bytes(op, c, elem)
    set_bytes = nbytes if op != "embed" else c["tokens"] * (c["width"] * elem + 4)
    nsets = kb.rotation_sets(set_bytes, l2_bytes, 64)
    sets = [make_set(c, dtype, gen, table) for _ in range(nsets)]
    runs = 100 if nbytes <= 256 * 1024 * 1024 else 50
    k_med, k_min = kb.timed(lambda s: run_kiln(kiln, op, s), sets, runs, 10, busy_cycles)
    t_med, t_min = kb.timed(lambda s: run_torch(op, s), sets, runs, 10, busy_cycles)
    del sets, table
    torch.cuda.empty_cache()
    k_tbps, t_tbps = kb.tbps(nbytes, k_med), kb.tbps(nbytes, t_med)
    row = {
        "name": c["name"], "op": op, "dtype": DTYPE_NAME[dtype], "tokens": c["tokens"],
        "width": c["width"], "table_rows": c["table_rows"], "min_bytes": nbytes,
        "input_sets": nsets, "runs": runs,
        "kiln_us": k_med * 1e3, "kiln_min_us": k_min * 1e3,
        "torch_us": t_med * 1e3, "torch_min_us": t_min * 1e3,
        "kiln_tbps": k_tbps, "torch_tbps": t_tbps,
        "kiln_pct_of_copy": 100 * k_tbps / copy_tbps, "torch_pct_of_copy": 100 * t_tbps / copy_tbps,
        "speedup_vs_torch": t_med / k_med,
    }
    row.update(checked)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_decoderops.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32")
    ap.add_argument("--ops", default="embed,silu_mul,argmax")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    kiln = Kiln(args.lib)
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    busy_cycles = 40000  # ~20 us of GPU work ahead of each timed op: more than the host needs

    result = kb.result_header("decoderops_vs_torch", props, l2_bytes, kiln, seed)
    copy_tbps = kb.measure_copy(result)
    print(f"{props.name} sm_{result['sm']}, driver {result['driver']}, torch {torch.__version__}; "
          f"artifact {kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    kb.print_copy(result)

    names = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    dtypes = [names[d] for d in args.dtypes.split(",")]
    ops = set(args.ops.split(","))
    cases = []
    for dtype in dtypes:
        for c in kiln.cases:
            if OPS[c["op"]] not in ops:
                continue
            if not kiln.has(dtype):
                cases.append({"name": c["name"], "dtype": DTYPE_NAME[dtype],
                              "skipped": "variant not built"})
                continue
            try:
                cases.append(bench_case(kiln, c, dtype, copy_tbps, l2_bytes, gen, busy_cycles))
            except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                cases.append({"name": c["name"], "dtype": DTYPE_NAME[dtype], "correct": False,
                              "why": kb.error_line(e), "error": kb.error_line(e)})
    result["cases"] = cases
    result["clocks_after"] = kb.clocks()

    header = (f"{'dtype':5} {'case':20} {'kiln us':>9} {'torch us':>9} {'kiln TB/s':>9} "
              f"{'% copy':>7} {'torch TB/s':>10} {'kiln/torch':>10}  ok")
    kb.print_header(header)
    failed = 0
    for c in cases:
        if "skipped" in c:
            print(f"{c['dtype']:5} {c['name']:20} skipped: {c['skipped']}")
            continue
        failed += not c["correct"]
        if "error" in c:
            print(f"{c['dtype']:5} {c['name']:20} NO {c['error']}")
            continue
        print(f"{c['dtype']:5} {c['name']:20} {c['kiln_us']:9.2f} {c['torch_us']:9.2f} "
              f"{c['kiln_tbps']:9.3f} {c['kiln_pct_of_copy']:6.1f}% {c['torch_tbps']:10.3f} "
              f"{c['speedup_vs_torch']:9.2f}x  {'yes' if c['correct'] else 'NO ' + c['why']}")
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
