#!/usr/bin/env python3
"""kiln qkrope vs eager PyTorch, in one process, on the same tensors, timed with CUDA events.

Loads the ctypes bridge (libkiln_bench_qkrope.so, see bench/CMakeLists.txt), then for each dtype
(bf16, fp16) and shape (the bench cases of kernels/qkrope/tests/gpu/cases.h, which the bridge
exports: Qwen3-8B's 32 q / 8 kv heads of 128, 1 / 8 / 64 tokens for decode latency, 512 / 4096 /
16384 for bandwidth, QK norm, theta 1e6, NHD pages of 16):

  1. checks kiln against a float64 reference computed by torch (HF's fp32 inv_freq and angles, cos
     and sin rounded to the dtype; norm and rotation in float64): q_out and the written k cache rows
     by relative L2 within the bounds of docs/performance-method.md, the v cache rows bit for bit,
     before any timing; eager PyTorch's error against the same reference is reported too;
  2. times kiln and eager PyTorch (what a user writes without a fused kernel: split, F.rms_norm of
     q and k, HF's rotate_half rotation with a cos / sin computed from the positions, then
     index_copy_ of k and v into the flat cache rows of slot_mapping) with CUDA events: warm-up,
     then the median of >= 50 runs, rotating through enough input sets that the working set is >=
     4x the L2;
  3. reports latency (us), TB/s of minimum bytes (qkv read, q_out and the k / v cache rows
     written), % of the device-to-device copy bandwidth measured in this run, and kiln / torch.

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

# docs/performance-method.md, Method 2: fp32 inside, 16-bit outputs rounded once.
REL_L2_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
EPS = 1e-6
MAX_POSITION = 32768
# The fields of a bench case, in the bridge's order (kiln_bench_qkrope_case).
CASE_FIELDS = (("tokens", int), ("q_heads", int), ("kv_heads", int), ("head_dim", int),
               ("page_size", int), ("rotary_dim", int), ("qk_norm", bool), ("theta", float))


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        f = self.lib.kiln_bench_qkrope
        f.argtypes = ([ctypes.c_int, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_float, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 11
                      + [ctypes.c_char_p, ctypes.c_size_t])
        f.restype = ctypes.c_int
        self.lib.kiln_bench_variant_count.restype = ctypes.c_int
        self.variants = []
        for i in range(self.lib.kiln_bench_variant_count()):
            name = ctypes.create_string_buffer(128)
            head_dim, dtype = ctypes.c_int(), ctypes.c_int()
            self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(head_dim), ctypes.byref(dtype))
            self.variants.append((name.value.decode(), head_dim.value, dtype.value))
        self.cases = self.read_cases("qkrope", CASE_FIELDS)

    def has(self, head_dim, dtype):
        return any(h == head_dim and d == DTYPE_CODE[dtype] for _, h, d in self.variants)

    def __call__(self, c, s):
        ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
        rc = self.lib.kiln_bench_qkrope(
            DTYPE_CODE[s["qkv"].dtype], c["tokens"], c["q_heads"], c["kv_heads"], c["head_dim"],
            c["rotary_dim"], c["theta"], int(c["qk_norm"]), EPS, c["page_size"], 0,
            s["num_pages"], ptr(s["qkv"]), ptr(s["positions"]), ptr(s["slots"]), ptr(s["wq"]),
            ptr(s["wk"]), ptr(s["q_out"]), ptr(s["k_cache"]), ptr(s["v_cache"]), None, None,
            torch.cuda.current_stream().cuda_stream, self.message, len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln qkrope: {self.message.value.decode()}")


def inv_freq(theta, rotary_dim):
    """HF's _compute_default_rope_parameters in fp32 as rope.h computes it (the exponent and the
    reciprocal in fp32, the power correctly rounded: float64, then fp32), so that kiln, eager
    PyTorch and the reference use the same frequencies."""
    exponent = torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim
    power = (torch.tensor(theta, dtype=torch.float32).double() ** exponent.double()).float()
    return (1.0 / power).cuda()


def rotate(x, cos, sin, rotary_dim):
    """HF's apply_rotary_pos_emb (rotate_half) on the first rotary_dim dims of x [T, H, D]."""
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    x1, x2 = rot[..., : rotary_dim // 2], rot[..., rotary_dim // 2:]
    cos, sin = torch.cat((cos, cos), -1)[:, None], torch.cat((sin, sin), -1)[:, None]
    return torch.cat((rot * cos + torch.cat((-x2, x1), -1) * sin, rest), -1)


def torch_op(c, s):
    """What a user runs in eager PyTorch: the same maths, unfused, in the dtype (HF's order)."""
    hq, hkv, d = c["q_heads"], c["kv_heads"], c["head_dim"]
    r = c["rotary_dim"] or d
    q, k, v = s["qkv"].split([hq, hkv, hkv], dim=1)
    if c["qk_norm"]:
        q = F.rms_norm(q, (d,), s["wq"], EPS)
        k = F.rms_norm(k, (d,), s["wk"], EPS)
    freqs = s["positions"].float()[:, None] * s["inv_freq"][None]
    cos, sin = freqs.cos().to(q.dtype), freqs.sin().to(q.dtype)
    s["q_out"].copy_(rotate(q, cos, sin, r))
    k = rotate(k, cos, sin, r)
    rows = s["slots"]  # every bench slot is valid (no padding)
    s["k_cache"].view(-1, hkv, d).index_copy_(0, rows, k)
    s["v_cache"].view(-1, hkv, d).index_copy_(0, rows, v)


def make_set(c, dtype, gen, wq, wk):
    t, hq, hkv, d, ps = c["tokens"], c["q_heads"], c["kv_heads"], c["head_dim"], c["page_size"]
    num_pages = 2 * ((t + ps - 1) // ps) + 3
    qkv = torch.randn(t, hq + 2 * hkv, d, device="cuda", generator=gen).to(dtype)
    slots = torch.randperm(num_pages * ps, device="cuda", generator=gen)[:t].contiguous()
    positions = torch.randint(0, MAX_POSITION, (t,), device="cuda", generator=gen)
    return {
        "qkv": qkv, "positions": positions, "slots": slots, "wq": wq, "wk": wk,
        "inv_freq": inv_freq(c["theta"], c["rotary_dim"] or d), "num_pages": num_pages,
        "q_out": torch.empty(t, hq, d, device="cuda", dtype=dtype),
        "k_cache": torch.full((num_pages, ps, hkv, d), float("nan"), device="cuda", dtype=dtype),
        "v_cache": torch.full((num_pages, ps, hkv, d), float("nan"), device="cuda", dtype=dtype),
    }


def reference(c, s):
    """float64 q and k as the kernel computes them (reference.h): HF's fp32 angles, cos and sin
    rounded to the dtype, the rest exact."""
    hq, hkv, d = c["q_heads"], c["kv_heads"], c["head_dim"]
    r = c["rotary_dim"] or d
    dtype = s["qkv"].dtype
    q, k, _ = s["qkv"].double().split([hq, hkv, hkv], dim=1)
    if c["qk_norm"]:
        q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + EPS) * s["wq"].double()
        k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + EPS) * s["wk"].double()
    angles = (s["positions"].float()[:, None] * s["inv_freq"][None]).double()
    cos, sin = angles.cos().to(dtype).double(), angles.sin().to(dtype).double()
    return rotate(q, cos, sin, r), rotate(k, cos, sin, r)


def rel_l2(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


def check(kiln, c, s, dtype):
    """kiln and torch vs the float64 reference; returns (kiln q, k rel L2, torch q rel L2, ok, why)."""
    hq, hkv, d = c["q_heads"], c["kv_heads"], c["head_dim"]
    kiln(c, s)
    torch.cuda.synchronize()
    q_ref, k_ref = reference(c, s)
    q_rel = rel_l2(s["q_out"], q_ref)
    k_rows = s["k_cache"].view(-1, hkv, d)[s["slots"]]
    k_rel = rel_l2(k_rows, k_ref)
    v_rows = s["v_cache"].view(-1, hkv, d)[s["slots"]]
    v_ok = torch.equal(v_rows.view(torch.int16), s["qkv"][:, hq + hkv:].view(torch.int16))
    torch_op(c, s)
    t_rel = rel_l2(s["q_out"], q_ref)
    bound = REL_L2_BOUND[dtype]
    ok = q_rel <= bound and k_rel <= bound and v_ok
    why = "" if ok else f"q rel L2 {q_rel:.3g}, k {k_rel:.3g} (bound {bound}), v exact {v_ok}"
    return q_rel, k_rel, t_rel, ok, why


def bench_case(kiln, c, dtype, copy_tbps, l2_bytes, gen, busy_cycles):
    d = c["head_dim"]
    wq = (1 + 0.1 * torch.randn(d, device="cuda", generator=gen)).to(dtype)
    wk = (1 + 0.1 * torch.randn(d, device="cuda", generator=gen)).to(dtype)
    q_rel, k_rel, t_rel, ok, why = check(kiln, c, make_set(c, dtype, gen, wq, wk), dtype)
    t, hq, hkv = c["tokens"], c["q_heads"], c["kv_heads"]
    elem = dtype.itemsize
    # qkv in; q_out, k and v rows out; positions and slots in.
    min_bytes = (2 * t * (hq + 2 * hkv) * d) * elem + 16 * t
    set_bytes = min_bytes
    nsets = kb.rotation_sets(set_bytes, l2_bytes, 64)
    sets = [make_set(c, dtype, gen, wq, wk) for _ in range(nsets)]
    runs = 100 if t <= 4096 else 50
    k_med, k_min = kb.timed(lambda s: kiln(c, s), sets, runs, 10, busy_cycles)
    t_med, t_min = kb.timed(lambda s: torch_op(c, s), sets, runs, 10, busy_cycles)
    del sets
    torch.cuda.empty_cache()
    k_tbps, t_tbps = kb.tbps(min_bytes, k_med), kb.tbps(min_bytes, t_med)
    return {
        "name": c["name"], "dtype": DTYPE_NAME[dtype], "tokens": t, "q_heads": hq,
        "kv_heads": hkv, "head_dim": d, "min_bytes": min_bytes, "input_sets": nsets, "runs": runs,
        "kiln_us": k_med * 1e3, "kiln_min_us": k_min * 1e3,
        "torch_us": t_med * 1e3, "torch_min_us": t_min * 1e3,
        "kiln_tbps": k_tbps, "torch_tbps": t_tbps,
        "kiln_pct_of_copy": 100 * k_tbps / copy_tbps, "torch_pct_of_copy": 100 * t_tbps / copy_tbps,
        "speedup_vs_torch": t_med / k_med,
        "kiln_q_rel_l2": q_rel, "kiln_k_rel_l2": k_rel, "torch_q_rel_l2": t_rel,
        "correct": ok, "why": why,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_qkrope.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    kiln = Kiln(args.lib)
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    busy_cycles = 40000  # ~20 us of GPU work ahead of each timed op: more than the host needs

    result = kb.result_header("qkrope_vs_torch", props, l2_bytes, kiln, seed)
    copy_tbps = kb.measure_copy(result)
    print(f"{props.name} sm_{result['sm']}, driver {result['driver']}, torch {torch.__version__}; "
          f"artifact {kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    kb.print_copy(result)

    dtypes = [{"bf16": torch.bfloat16, "fp16": torch.float16}[d] for d in args.dtypes.split(",")]
    cases = []
    for dtype in dtypes:
        for c in kiln.cases:
            if not kiln.has(c["head_dim"], dtype):
                cases.append({"name": c["name"], "dtype": DTYPE_NAME[dtype],
                              "skipped": "variant not built"})
                continue
            cases.append(bench_case(kiln, c, dtype, copy_tbps, l2_bytes, gen, busy_cycles))
    result["cases"] = cases
    result["clocks_after"] = kb.clocks()

    header = (f"{'dtype':5} {'case':14} {'kiln us':>9} {'torch us':>9} {'kiln TB/s':>9} "
              f"{'% copy':>7} {'torch TB/s':>10} {'kiln/torch':>10} {'q rel L2':>9}  ok")
    kb.print_header(header)
    failed = 0
    for c in cases:
        if "skipped" in c:
            print(f"{c['dtype']:5} {c['name']:14} skipped: {c['skipped']}")
            continue
        failed += not c["correct"]
        print(f"{c['dtype']:5} {c['name']:14} {c['kiln_us']:9.2f} {c['torch_us']:9.2f} "
              f"{c['kiln_tbps']:9.3f} {c['kiln_pct_of_copy']:6.1f}% {c['torch_tbps']:10.3f} "
              f"{c['speedup_vs_torch']:9.2f}x {c['kiln_q_rel_l2']:9.2e}  "
              f"{'yes' if c['correct'] else 'NO ' + c['why']}")
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
