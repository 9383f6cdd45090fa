#!/usr/bin/env python3
"""kiln w4a16 (int4 weight-only GEMM) vs cuBLAS, tinygemm and gemlite, one process, same weights.

Loads the ctypes bridge (libkiln_bench_w4a16.so, see bench/CMakeLists.txt), measures the
device-to-device copy bandwidth and the dense GEMM rate (torch.matmul 8192^3 in each dtype) in the
same run, then for each dtype (bf16; --dtypes bf16,fp16 adds fp16) and each weight shape of the
bench cases of kernels/w4a16/tests/gpu/cases.h, which the bridge exports (the linear layers of
Llama-3-8B: qkv 6144 x 4096, o 4096 x 4096, gate+up 28672 x 4096, down 4096 x 14336, N x K, at
m = 1, 4, 16, 64, 256, 1024, 4096 tokens):

  1. makes random int4 weights q [N, K] in 0..15 and group-128 scales (fp16 values that bf16
     holds exactly, so every dtype sees the same numbers), packs them as a symmetric GPTQ
     checkpoint with torch ops on the GPU (AutoGPTQ's published layout: qweight int32 [K / 8, N],
     K index k in nibble k % 8 of word k / 8; scales fp16 [K / 128, N]; qzeros int32
     [K / 128, N / 8] all 0x77777777, i.e. z - 1 = 7), checks that the packing reads back, and
     dequantizes the checkpoint by the published formula w = s * (q - (qzero + 1)) (exact in fp32);
  2. hands the checkpoint to kiln's repack (kiln_bench_w4a16_repack: kiln::w4a16::repack, GPTQ
     format, qzeros NULL = symmetric; --weights zp passes qzeros and runs the zero-point variant)
     and builds each peer's form of the same weights, outside any timing:
       cublas    torch.nn.functional.linear(x, W, bias), W = the dequantized [N, K] weights in the
                 dtype (what a user runs without int4: cuBLAS fp16 / bf16)
       tinygemm  torch._weight_int4pack_mm(x, torch._convert_weight_to_int4pack(u8, 8), 128, sz)
                 (PyTorch's built-in int4 kernel, bf16 only): u8 [N, K / 2] uint8, byte j holding
                 q[:, 2j] in its high nibble and q[:, 2j + 1] in its low one (gpt-fast's
                 packing; the other nibble order is tried if that one computes wrong), sz
                 [K / 128, N, 2] bf16 = (scale, zero) with tinygemm's w = (q - 8) * scale + zero,
                 so zero = (8 - z) * scale = 0 for symmetric weights
       gemlite   gemlite.helper.A16Wn(device, dtype).from_weights(W_q=q [N, K] uint8, scales=[N,
                 K / 128], zeros=[N, K / 128] (8), W_nbits=4, group_size=128) -> GemLiteLinear,
                 called as layer(x) (gemlite's own choice of GEMV / split-K / GEMM by m and its
                 shipped autotune cache; h100.json on an sm_90 GPU that has none of its own)
  3. per row (m): checks kiln (output poisoned with NaN first), cuBLAS and each peer against an
     fp32 reference (x . W^T with the exact dequantized weights, TF32 off), and against each other
     (rel L2 in the row); bound fp16 2e-3, bf16 1e-2. A wrong kiln output fails the row (exit
     code 1); a peer whose output is wrong, or that raises, records why and is not timed;
  4. times kiln (the runner: the GEMM, plus the split-K reduction when it splits; workspace from
     workspaceSize, allocated once) and each peer with CUDA events: warm-up, then the median of
     10..100 runs (as many as fit ~100 ms, --runs fixes it), rotating through enough weight sets
     (and x / y sets) that the int4 weights exceed 4x the L2; torch.cuda._sleep ahead of each
     timed run keeps the GPU busy while the host enqueues, so the events bracket device time only;
  5. reports us for each, kiln's TB/s on the int4 weight + scale bytes (n * k / 2 + k / 128 * n
     * 2, + the zero points with --weights zp) and % of the copy bandwidth, TFLOP/s (2 m n k) and
     % of the GEMM rate, the floor (max of weight bytes / copy bandwidth and FLOPs / GEMM rate),
     and kiln vs each peer (peer us / kiln us: > 1, kiln is faster).

--quick: m in {1, 16, 256, 4096} for the qkv and down shapes. gemlite is a pure-Python Triton
package: the GPU machine has no network, so its wheel (and tqdm's, which it imports) is carried in
.whl/ and installed into /tmp/site (PYTHONPATH) by scripts/gpu_check.sh's `wheels` step; without
it the gemlite columns record why. gemlite's Triton kernels compile on their first call per shape
(the check run, before timing). SM and memory clocks are logged (nvidia-smi) before and after.
Writes JSON to --json and prints a table last.
"""
import argparse
import ast
import ctypes
import math
import os
import pathlib
import sys
import time

import torch
import torch.nn.functional as F

# kiln_bench (the shared timing) lives in the repository's bench/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "bench"))
import kiln_bench as kb  # noqa: E402

GROUP = 128  # K per scale: what GPTQ / AWQ checkpoints ship, and kiln.toml's group_size
# Every output vs the fp32 reference, and every pair of outputs: fp32 accumulation with the
# output rounded once to the dtype (docs/performance-method.md: fp16 2e-3, bf16 1.2e-2; ~3e-4 /
# ~2e-3 in practice). A wrong layout, nibble order or scale is O(1).
CHECK_REL_L2 = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
FORMAT_GPTQ = 0  # the bridge's format code (kiln::w4a16::SourceFormat::kGptq)
PEERS = ("cublas", "tinygemm", "gemlite")
PEER_LABEL = {"cublas": "cuBLAS", "tinygemm": "tinygemm", "gemlite": "gemlite"}
# The fields of a bench case, in the bridge's order (kiln_bench_w4a16_case); splits 0: planned.
CASE_FIELDS = (("m", int), ("n", int), ("k", int), ("bias", bool), ("splits", int))
QUICK_MS = (1, 16, 256, 4096)
QUICK_LAYERS = ("qkv", "down")
MOST_SETS = 16           # weight sets rotated per shape, at most
TARGET_MS = 100.0        # timed device time per measurement when the run count is adaptive
MIN_RUNS, MAX_RUNS = 10, 100
TINYGEMM_INNER_K_TILES = 8  # gpt-fast's choice: 16-byte loads of B


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        f = self.lib.kiln_bench_w4a16
        f.argtypes = [ctypes.c_int, i64, i64, i64, ctypes.c_int, ctypes.c_int] + [vp] * 7 + [
            ctypes.c_size_t, vp, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        r = self.lib.kiln_bench_w4a16_repack
        r.argtypes = [ctypes.c_int] * 3 + [i64, i64, ctypes.c_int] + [vp] * 7 + [
            ctypes.c_char_p, ctypes.c_size_t]
        r.restype = ctypes.c_int
        w = self.lib.kiln_bench_w4a16_workspace
        w.argtypes = [ctypes.c_int, i64, i64, i64] + [ctypes.c_int] * 4
        w.restype = ctypes.c_size_t
        v = self.lib.kiln_bench_variant
        v.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t] + [
            ctypes.POINTER(ctypes.c_int)] * 4
        v.restype = ctypes.c_int
        self.variants = []  # (name, tile_m, group_size, zero_point, dtype code)
        i = 0
        while True:
            name = ctypes.create_string_buffer(128)
            tile_m, group, zp, dtype = (ctypes.c_int() for _ in range(4))
            if v(i, name, 128, ctypes.byref(tile_m), ctypes.byref(group), ctypes.byref(zp),
                 ctypes.byref(dtype)) != 0:
                break
            self.variants.append((name.value.decode(), tile_m.value, group.value, bool(zp.value),
                                  dtype.value))
            i += 1
        self.cases = self.read_cases("w4a16", CASE_FIELDS)

    def has(self, dtype, zero_point):
        return any(g == GROUP and z == zero_point and d == DTYPE_CODE[dtype]
                   for _, _, g, z, d in self.variants)

    def _check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"kiln w4a16 {what}: {self.message.value.decode()}")

    def repack(self, dtype, n, k, qweight, qzeros, src_scales, weight, scales, zeros):
        """kiln::w4a16::repack of a GPTQ checkpoint (src_scales fp16 or bf16) on torch's stream."""
        for t in (qweight, qzeros, src_scales, weight, scales, zeros):
            assert t is None or t.is_contiguous()
        rc = self.lib.kiln_bench_w4a16_repack(
            FORMAT_GPTQ, DTYPE_CODE[dtype], DTYPE_CODE[src_scales.dtype], n, k, GROUP,
            qweight.data_ptr(), qzeros.data_ptr() if qzeros is not None else None,
            src_scales.data_ptr(), weight.data_ptr(), scales.data_ptr(),
            zeros.data_ptr() if zeros is not None else None,
            torch.cuda.current_stream().cuda_stream, self.message, len(self.message))
        self._check(rc, "repack")

    def workspace_bytes(self, dtype, m, n, k, zero_point, splits, multiprocessors=0):
        return self.lib.kiln_bench_w4a16_workspace(DTYPE_CODE[dtype], m, n, k, GROUP,
                                                   int(zero_point), splits, multiprocessors)

    def __call__(self, dtype, m, n, k, splits, x, weight, scales, zeros, bias, y, workspace):
        rc = self.lib.kiln_bench_w4a16(
            DTYPE_CODE[dtype], m, n, k, GROUP, splits, x.data_ptr(), weight.data_ptr(),
            scales.data_ptr(), zeros.data_ptr() if zeros is not None else None,
            bias.data_ptr() if bias is not None else None, y.data_ptr(),
            workspace.data_ptr() if workspace is not None else None,
            workspace.numel() if workspace is not None else 0,
            torch.cuda.current_stream().cuda_stream, self.message, len(self.message))
        self._check(rc, "run")


# ---- the GPTQ checkpoint, with torch ops on the GPU ------------------------------------------

def gptq_pack(q, scales16):
    """AutoGPTQ's (v1) packing of q [N, K] (uint8, 0..15) and scales [K / G, N]: qweight int32
    [K / 8, N] with K index k in nibble k % 8 (bits 4 (k % 8) ..) of word k / 8; qzeros int32
    [K / G, N / 8] holding z - 1 = 7 in every nibble (symmetric: z = 8)."""
    n, k = q.shape
    shifts = (4 * torch.arange(8, device=q.device, dtype=torch.int64)).view(1, 8, 1)
    words = (q.t().reshape(k // 8, 8, n).to(torch.int64) << shifts).sum(dim=1)  # disjoint bits
    qweight = torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32).contiguous()
    qzeros = torch.full((k // GROUP, n // 8), 0x77777777, dtype=torch.int32, device=q.device)
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales16.contiguous()}


def gptq_unpack(words, rows_per_word_axis0):
    """The 4-bit values of int32 words: [A, B] -> [A * 8, B] along axis 0 (qweight: nibble i of
    word [a, b] is row 8 a + i) or, with rows_per_word_axis0 False, [A, B * 8] along axis 1
    (qzeros: nibble i of word [a, b] is column 8 b + i)."""
    shifts = 4 * torch.arange(8, device=words.device, dtype=torch.int32)
    if rows_per_word_axis0:
        v = (words.unsqueeze(1) >> shifts.view(1, 8, 1)) & 0xF
        return v.reshape(words.shape[0] * 8, words.shape[1])
    v = (words.unsqueeze(2) >> shifts.view(1, 1, 8)) & 0xF
    return v.reshape(words.shape[0], words.shape[1] * 8)


def gptq_dequant(ckpt):
    """The published GPTQ dequantization w[k, n] = scales[k / G, n] * (q[k, n] - (qzeros + 1)),
    read from the checkpoint alone, as [N, K] fp32 (exact: 8-bit scales times 5-bit integers)."""
    q = gptq_unpack(ckpt["qweight"], True).to(torch.float32)           # [K, N]
    z = (gptq_unpack(ckpt["qzeros"], False) + 1).to(torch.float32)     # [K / G, N]
    s = ckpt["scales"].to(torch.float32)                               # [K / G, N]
    w = (q - z.repeat_interleave(GROUP, dim=0)) * s.repeat_interleave(GROUP, dim=0)
    return w.t().contiguous()


def make_scales(groups, n, gen):
    """Scales in [0.005, 0.015), fp16 values that bf16 holds exactly (8 significant bits), so the
    fp16 checkpoint's scales are the bf16 model's too and every implementation sees one W."""
    s = 0.005 + 0.01 * torch.rand(groups, n, device="cuda", generator=gen)
    return s.to(torch.bfloat16).to(torch.float16)


# ---- the peers' forms of the weights -------------------------------------------------------

def tinygemm_pack(q, scales_kn, zero_kn, hi_even):
    """torch._convert_weight_to_int4pack of q [N, K] (uint8 [N, K / 2], two K per byte, the even
    one in the high nibble when hi_even) and tinygemm's [K / G, N, 2] bf16 (scale, zero)."""
    even, odd = q[:, 0::2], q[:, 1::2]
    u8 = ((even << 4) | odd) if hi_even else ((odd << 4) | even)
    packed = torch.ops.aten._convert_weight_to_int4pack(u8.contiguous(),
                                                         TINYGEMM_INNER_K_TILES)
    sz = torch.stack([scales_kn.to(torch.bfloat16), zero_kn.to(torch.bfloat16)], dim=2)
    return packed, sz.contiguous()


def tinygemm_call(x, packed, sz, bias):
    y = torch.ops.aten._weight_int4pack_mm(x, packed, GROUP, sz)
    return y if bias is None else y + bias


def load_gemlite(props, cases, seed_configs):
    """(module or None, versions/notes dict). gemlite loads its shipped autotune cache for the GPU
    by name (configs/h100.json on an H100); an sm_90 GPU without one (the H200) gets h100.json.

    That cache misses some of the bench's m buckets (h100.json: GEMV_REVSPLITK, which gemlite runs
    for m <= 4, only at m = 1; GEMM, m >= 64, only from m = 96), and a miss autotunes 17..23
    Triton configs per shape at the first call (tens of seconds each): with seed_configs, each
    missing (m bucket, shape) key of every kernel type is seeded with the cached config of the
    nearest m of the same shape, and the notes list them; without it gemlite autotunes them."""
    info = {}
    try:
        import gemlite  # noqa: PLC0415 - optional peer
        import gemlite.core as glc  # noqa: PLC0415
        from gemlite.triton_kernels.utils import get_closest_m  # noqa: PLC0415
        getattr(gemlite.helper, "A16Wn")  # the API this script calls (gemlite >= 0.4)
    except Exception as e:  # noqa: BLE001 - absent, or an import that fails: recorded
        info["gemlite"] = None
        info["gemlite_error"] = kb.error_line(e)
        return None, info
    info["gemlite"] = getattr(gemlite, "__version__", "unknown")
    tag = getattr(glc, "selected_tag", None)
    if tag is None and props.major == 9:
        path = os.path.join(os.path.dirname(glc.__file__), "configs", "h100.json")
        if gemlite.GemLiteLinear.load_config(path, print_error=False):
            tag = path
    info["gemlite_config"] = os.path.basename(tag) if tag else None
    seeded = []
    caches = getattr(glc, "GEMLITE_TRITON_CONFIG_CACHE", {})
    if seed_configs and tag and isinstance(caches, dict):
        for m in sorted({c["m"] for c in cases}):
            kind, bucket = glc.get_matmul_type(m, 4), get_closest_m(m)  # what forward picks
            cache = caches.get(kind)
            if not isinstance(cache, dict):
                continue
            by_shape = {}  # (N, K, group, elements per sample, type id) -> {m: key}
            for key in cache:
                try:
                    fields = ast.literal_eval(key)
                except (ValueError, SyntaxError):
                    continue
                if (isinstance(fields, tuple) and len(fields) >= 4 and
                        any(fields[1:4] == (c["n"], c["k"], GROUP) for c in cases)):
                    by_shape.setdefault(fields[1:], {})[fields[0]] = key
            for rest, keys in by_shape.items():
                if bucket not in keys:
                    near = min(keys, key=lambda c: (abs(math.log2(c / bucket)), -c))
                    cache[str((bucket,) + rest)] = dict(cache[keys[near]])
                    seeded.append(f"{kind} {(bucket,) + rest} <- m {near}")
    info["gemlite_seeded_configs"] = seeded if seed_configs else "off (gemlite autotunes misses)"
    return gemlite, info


def gemlite_layer(gemlite, q, scales_kn, zeros_kn, dtype, bias):
    """gemlite's A16W4 layer of the same weights: W_q [N, K] uint8, scales and zeros [N, K / G]
    in the dtype, w = (q - zero) * scale (gemlite folds it into q * scale - zero * scale)."""
    device = f"cuda:{torch.cuda.current_device()}"
    return gemlite.helper.A16Wn(device=device, dtype=dtype).from_weights(
        W_q=q, scales=scales_kn.t().to(dtype).contiguous(),
        zeros=zeros_kn.t().to(dtype).contiguous(), W_nbits=4, group_size=GROUP, bias=bias)


# ---- helpers ---------------------------------------------------------------------------------

def rel_l2(got, ref):
    return ((got.double() - ref.double()).norm() / ref.double().norm()).item()


def timed_adaptive(fn, sets, runs, busy_cycles):
    """(median ms, min ms, runs): `runs` timed runs, or when 0 as many as fit TARGET_MS (a short
    probe first, which also warms up), clamped to MIN_RUNS..MAX_RUNS."""
    if runs <= 0:
        probe, _ = kb.timed(fn, sets, 3, 2, busy_cycles)
        runs = max(MIN_RUNS, min(MAX_RUNS, int(TARGET_MS / max(probe, 1e-3))))
    med, mn = kb.timed(fn, sets, runs, 3, busy_cycles)
    return med, mn, runs


def layer_of(case):
    """A bench case's layer: its name's second part (bench_qkv_m16: "qkv")."""
    parts = case["name"].split("_")
    return parts[1] if len(parts) > 2 else case["name"]


# ---- one weight shape: its weight sets, shared by the rows of every m -----------------------

def build_shape(kiln, n, k, dtype, zero_point, nsets, peers, gemlite, gen):
    """nsets weight sets of one (N, K) in every implementation's form, and the notes: each set a
    dict (kiln_weight, kiln_scales, kiln_zeros, w (the dequantized [N, K] in the dtype), tg_packed,
    tg_sz, gl_layer); set 0 keeps w32 (fp32, exact) for the reference. A peer that fails here is
    dropped from the shape with its error in notes[peer + "_error"]."""
    notes = {}
    active = set(peers)
    if "tinygemm" in active and dtype != torch.bfloat16:
        active.discard("tinygemm")
        notes["tinygemm_error"] = "bf16 only (torch._weight_int4pack_mm takes bf16 x)"
    if "gemlite" in active and gemlite is None:
        active.discard("gemlite")
        notes["gemlite_error"] = "gemlite not importable (see the result's gemlite_error)"
    tg_hi_even = None
    sets = []
    for i in range(nsets):
        q = torch.randint(0, 16, (n, k), device="cuda", dtype=torch.uint8, generator=gen)
        ckpt = gptq_pack(q, make_scales(k // GROUP, n, gen))
        if i == 0:
            ok = torch.equal(gptq_unpack(ckpt["qweight"], True), q.t().to(torch.int32))
            notes["gptq_roundtrip"] = bool(ok)
            if not ok:
                raise RuntimeError("the GPTQ packing does not read back (script bug)")
        w32 = gptq_dequant(ckpt)
        s = {"w": w32.to(dtype)}
        if i == 0:
            s["w32"] = w32
        groups = k // GROUP
        s["kiln_weight"] = torch.empty(n * k // 2, dtype=torch.uint8, device="cuda")
        s["kiln_scales"] = torch.empty(groups, n, dtype=dtype, device="cuda")
        s["kiln_zeros"] = (torch.empty(groups, n, dtype=dtype, device="cuda") if zero_point
                           else None)
        kiln.repack(dtype, n, k, ckpt["qweight"], ckpt["qzeros"] if zero_point else None,
                    ckpt["scales"], s["kiln_weight"], s["kiln_scales"], s["kiln_zeros"])
        z_kn = (gptq_unpack(ckpt["qzeros"], False) + 1).to(torch.float32)  # [K / G, N]: 8
        s_kn = ckpt["scales"].to(torch.float32)
        if "tinygemm" in active:
            try:
                zero = (8.0 - z_kn) * s_kn  # tinygemm: w = (q - 8) * scale + zero
                if tg_hi_even is None:  # find the nibble order that computes W (set 0)
                    errors = []
                    for hi_even in (True, False):
                        packed, sz = tinygemm_pack(q, s_kn, zero, hi_even)
                        xp = torch.randn(16, k, device="cuda", generator=gen).to(torch.bfloat16)
                        rel = rel_l2(tinygemm_call(xp, packed, sz, None), xp.float() @ w32.t())
                        if rel <= CHECK_REL_L2[dtype]:
                            tg_hi_even = hi_even
                            break
                        errors.append(f"{'high' if hi_even else 'low'} nibble = even K: rel L2 "
                                      f"{rel:.3g}")
                    if tg_hi_even is None:
                        raise RuntimeError("no nibble order computes W: " + "; ".join(errors))
                    notes["tinygemm_packing"] = (f"uint8 [N, K/2], even K in the "
                                                 f"{'high' if tg_hi_even else 'low'} nibble, "
                                                 f"inner_k_tiles {TINYGEMM_INNER_K_TILES}")
                else:
                    packed, sz = tinygemm_pack(q, s_kn, zero, tg_hi_even)
                s["tg_packed"], s["tg_sz"] = packed, sz
            except Exception as e:  # noqa: BLE001 - the API changed or refuses: recorded
                active.discard("tinygemm")
                notes["tinygemm_error"] = f"convert: {kb.error_line(e)}"
        if "gemlite" in active:
            try:
                s["gl_layer"] = gemlite_layer(gemlite, q, s_kn, z_kn, dtype, None)
            except Exception as e:  # noqa: BLE001
                active.discard("gemlite")
                notes["gemlite_error"] = f"from_weights: {kb.error_line(e)}"
        del q, ckpt, z_kn, s_kn
        sets.append(s)
    for peer in peers:  # a peer that failed on a later set leaves no half-built sets behind
        if peer not in active:
            for s in sets:
                s.pop({"tinygemm": "tg_packed", "gemlite": "gl_layer"}.get(peer, ""), None)
    torch.cuda.synchronize()
    return sets, active, notes


def bench_row(kiln, case, dtype, zero_point, shape_sets, active, shape_notes, gemm, copy_tbps,
              sms, gen, busy_cycles, runs):
    m, n, k, splits = case["m"], case["n"], case["k"], case["splits"]
    bound = CHECK_REL_L2[dtype]
    groups = k // GROUP
    weight_bytes = n * k // 2 + groups * n * dtype.itemsize * (2 if zero_point else 1)
    flops = 2 * m * n * k
    nsets = len(shape_sets)
    r = {"case": case["name"], "layer": layer_of(case), "dtype": DTYPE_NAME[dtype],
         "weights": "zp" if zero_point else "sym", "m": m, "n": n, "k": k, "bias": case["bias"],
         "group_size": GROUP, "weight_bytes": weight_bytes, "flops": flops, "input_sets": nsets,
         "floor_us": max(weight_bytes / (copy_tbps * 1e12), flops / (gemm[dtype] * 1e12)) * 1e6,
         "check_rel_l2": bound}
    r.update(shape_notes)

    ws_bytes = kiln.workspace_bytes(dtype, m, n, k, zero_point, splits)  # fits every device
    ws_here = kiln.workspace_bytes(dtype, m, n, k, zero_point, splits, sms)
    r["kiln_workspace_bytes"] = ws_bytes
    r["kiln_splits"] = ws_here // (m * n * 4) if ws_here else 1
    workspace = torch.empty(ws_bytes, dtype=torch.uint8, device="cuda") if ws_bytes else None
    bias = ((0.1 * torch.randn(n, device="cuda", generator=gen)).to(dtype) if case["bias"]
            else None)
    sets = []
    for s in shape_sets:
        x = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
        sets.append(dict(s, x=x, y=torch.empty(m, n, dtype=dtype, device="cuda")))
    s0 = sets[0]
    ref = s0["x"].float() @ s0["w32"].t()
    if bias is not None:
        ref += bias.float()

    def run_kiln(s):
        kiln(dtype, m, n, k, splits, s["x"], s["kiln_weight"], s["kiln_scales"], s["kiln_zeros"],
             bias, s["y"], workspace)

    calls = {"cublas": lambda s: F.linear(s["x"], s["w"], bias),
             "tinygemm": lambda s: tinygemm_call(s["x"], s["tg_packed"], s["tg_sz"], bias),
             # gemlite's layer adds its bias after the GEMM (out += bias): the same, outside
             "gemlite": lambda s: (s["gl_layer"](s["x"]) if bias is None
                                   else s["gl_layer"](s["x"]) + bias)}

    # Outputs of set 0, then the checks, before any timing.
    outs, r["correct"] = {}, False
    try:
        s0["y"].fill_(float("nan"))
        run_kiln(s0)
        torch.cuda.synchronize()
        outs["kiln"] = s0["y"].clone()
    except Exception as e:  # noqa: BLE001 - a kiln refusal or launch error fails the row
        r["why"] = f"kiln: {kb.error_line(e)}"
    for peer in PEERS:
        if peer not in active:
            continue
        try:
            outs[peer] = calls[peer](s0).reshape(m, n)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            r[f"{peer}_error"] = f"run: {kb.error_line(e)}"
    for name, out in outs.items():
        finite = bool(torch.isfinite(out).all().item())
        rel = rel_l2(out, ref)
        r[f"{name}_rel_l2"] = rel
        r[f"{name}_ok"] = finite and rel <= bound
        if not r[f"{name}_ok"]:
            r[f"{name}_error"] = (f"wrong output: rel L2 {rel:.3g} to the fp32 reference "
                                  f"(bound {bound}){'' if finite else ', non-finite'}")
    for name, out in outs.items():
        for other in ("kiln", "cublas"):
            if other != name and other in outs:
                r[f"{name}_vs_{other}_rel_l2"] = rel_l2(out, outs[other])
        if name not in ("kiln", "cublas") and r[f"{name}_ok"] and r.get("cublas_ok"):
            if r[f"{name}_vs_cublas_rel_l2"] > bound:  # counted only if it agrees with cuBLAS too
                r[f"{name}_ok"] = False
                r[f"{name}_error"] = (f"rel L2 {r[f'{name}_vs_cublas_rel_l2']:.3g} to cuBLAS "
                                      f"> {bound}")
    if "kiln" in outs:
        r["correct"] = r["kiln_ok"]
        if not r["correct"]:
            r["why"] = r["kiln_error"]
    del outs, ref

    timings = []
    if r["correct"]:
        timings.append(("kiln", run_kiln))
    timings += [(p, calls[p]) for p in PEERS if r.get(f"{p}_ok")]
    for name, fn in timings:
        try:
            med, mn, nruns = timed_adaptive(fn, sets, runs, busy_cycles)
        except Exception as e:  # noqa: BLE001
            r[f"{name}_error"] = f"timing: {kb.error_line(e)}"
            if name == "kiln":
                r["correct"], r["why"] = False, r["kiln_error"]
            continue
        r.update({f"{name}_us": med * 1e3, f"{name}_min_us": mn * 1e3, f"{name}_runs": nruns,
                  f"{name}_tflops": flops / (med * 1e-3) / 1e12})
    if "kiln_us" in r:
        r["kiln_tbps"] = kb.tbps(weight_bytes, r["kiln_us"] * 1e-3)
        r["kiln_pct_of_copy"] = 100 * r["kiln_tbps"] / copy_tbps
        r["kiln_pct_of_gemm"] = 100 * r["kiln_tflops"] / gemm[dtype]
        for peer in PEERS:
            if f"{peer}_us" in r:
                r[f"kiln_vs_{peer}"] = r[f"{peer}_us"] / r["kiln_us"]  # > 1: kiln is faster
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_w4a16.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--quick", action="store_true",
                    help=f"m in {{{', '.join(map(str, QUICK_MS))}}} of the "
                         f"{' and '.join(QUICK_LAYERS)} shapes")
    ap.add_argument("--dtypes", default="bf16", help="bf16, fp16 or both (comma separated)")
    ap.add_argument("--weights", default="sym", choices=["sym", "zp"],
                    help="kiln's variant: symmetric (zeros NULL) or zero-point (the checkpoint's "
                         "qzeros repacked; the same weights, z = 8)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"peers to time, comma separated ({', '.join(PEERS)}), or none")
    ap.add_argument("--layers", default="",
                    help="only these layers (qkv, o, gateup, down; default every one)")
    ap.add_argument("--ms", default="", help="only these m (default every bench case's)")
    ap.add_argument("--gemlite-autotune", action="store_true",
                    help="let gemlite autotune the m buckets its shipped cache lacks (slow: tens "
                         "of seconds per shape) instead of seeding them from the nearest m")
    ap.add_argument("--runs", type=int, default=0,
                    help=f"timed runs per measurement (0: adaptive, {MIN_RUNS}..{MAX_RUNS})")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    dtypes = []
    for d in (x for x in args.dtypes.split(",") if x):
        if d not in DTYPES:
            ap.error(f"--dtypes: '{d}' is not one of {', '.join(DTYPES)}")
        dtypes.append(DTYPES[d])
    peers = [] if args.peers == "none" else [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in PEERS:
            ap.error(f"--peers: '{p}' is not one of {', '.join(PEERS)} (or none)")
    zero_point = args.weights == "zp"

    kiln = Kiln(args.lib)
    cases = kiln.cases
    layers = [x for x in args.layers.split(",") if x] or (list(QUICK_LAYERS) if args.quick
                                                          else [])
    ms = [int(x) for x in args.ms.split(",") if x] or (list(QUICK_MS) if args.quick else [])
    known_layers = sorted({layer_of(c) for c in cases})
    for layer in layers:
        if layer not in known_layers:
            ap.error(f"--layers: no bench case has layer '{layer}' ({', '.join(known_layers)})")
    cases = [c for c in cases if (not layers or layer_of(c) in layers) and
             (not ms or c["m"] in ms)]
    if not cases:
        ap.error("no bench case left after --layers / --ms / --quick")
    for c in cases:
        if c["k"] % GROUP or c["n"] % 8 or c["k"] % 8:
            ap.error(f"{c['name']}: n and k must be multiples of 8 and k of {GROUP}")

    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    sms = props.multi_processor_count
    seed, gen = kb.start_seed(args.seed)
    # ~200 us of GPU work ahead of each timed call: ctypes, gemlite's custom op and Triton
    # launcher fit in it.
    busy_cycles = 400000

    gemlite, gl_info = (load_gemlite(props, cases, not args.gemlite_autotune)
                        if "gemlite" in peers else (None, {"gemlite": None}))
    try:
        import triton  # noqa: PLC0415
        triton_version = triton.__version__
    except Exception as e:  # noqa: BLE001
        triton_version = f"absent ({kb.error_line(e)})"
    versions = {"triton": triton_version}
    versions.update(gl_info)
    result = kb.result_header("w4a16_vs_torch", props, l2_bytes, kiln, seed, versions)
    result.update({
        "quick": args.quick, "weights": args.weights, "group_size": GROUP,
        "check_rel_l2": {DTYPE_NAME[k]: v for k, v in CHECK_REL_L2.items()},
        "peers": peers, "kiln_variants": [v[0] for v in kiln.variants],
        "cublas_settings": {
            "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "allow_fp16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "allow_bf16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction},
    })
    copy_tbps = kb.measure_copy(result)
    gemm = {dtype: kb.gemm_tflops(dtype, busy_cycles) for dtype in dtypes}
    torch.cuda.empty_cache()
    result["gemm_tflops"] = {DTYPE_NAME[k]: v for k, v in gemm.items()}
    gl_text = (f"{gl_info['gemlite']} (config {gl_info.get('gemlite_config')})"
               if gl_info.get("gemlite") else "absent")
    print(f"{props.name} sm_{result['sm']} ({sms} SMs), driver {result['driver']}, torch "
          f"{torch.__version__}, triton {triton_version}, gemlite {gl_text}; artifact "
          f"{kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    if gl_info.get("gemlite_error"):
        print(f"gemlite: {gl_info['gemlite_error']}")
    kb.print_copy(result)
    print("dense GEMM " + ", ".join(f"{DTYPE_NAME[k]} {v:.0f} TFLOP/s" for k, v in gemm.items())
          + f" (torch.matmul {kb.GEMM_N}^3)")

    start = time.time()
    rows = []
    failed = 0
    for dtype in dtypes:
        if not kiln.has(dtype, zero_point):
            name = f"w4a16_m*_g{GROUP}{'_zp' if zero_point else ''}_{DTYPE_NAME[dtype]}"
            print(f"{name} not in the artifact: {DTYPE_NAME[dtype]} rows skipped")
            rows += [{"case": c["name"], "dtype": DTYPE_NAME[dtype], "m": c["m"], "n": c["n"],
                      "k": c["k"], "skipped": f"{name} not in the artifact"} for c in cases]
            failed += 1
            continue
        shapes = list(dict.fromkeys((c["n"], c["k"]) for c in cases))
        for n, k in shapes:
            shape_bytes = n * k // 2 + (k // GROUP) * n * dtype.itemsize
            nsets = kb.rotation_sets(shape_bytes, l2_bytes, MOST_SETS)
            try:
                shape_sets, active, notes = build_shape(kiln, n, k, dtype, zero_point, nsets,
                                                        peers, gemlite, gen)
            except Exception as e:  # noqa: BLE001 - a repack refusal fails the shape's rows
                why = f"weights: {kb.error_line(e)}"
                for c in (c for c in cases if (c["n"], c["k"]) == (n, k)):
                    rows.append({"case": c["name"], "dtype": DTYPE_NAME[dtype], "m": c["m"],
                                 "n": n, "k": k, "correct": False, "why": why})
                    failed += 1
                    print(f"  {DTYPE_NAME[dtype]} {c['name']}: NOT OK: {why}", flush=True)
                torch.cuda.empty_cache()
                continue
            for c in (c for c in cases if (c["n"], c["k"]) == (n, k)):
                r = bench_row(kiln, c, dtype, zero_point, shape_sets, active, notes, gemm,
                              copy_tbps, sms, gen, busy_cycles, args.runs)
                rows.append(r)
                failed += not r["correct"]
                got = ", ".join(f"{PEER_LABEL.get(p, p)} {r[p + '_us']:.1f}"
                                for p in ("kiln",) + PEERS if p + "_us" in r)
                print(f"  {r['dtype']} {r['case']:<20} m {m_str(r['m'])} {n} x {k}: {got} us"
                      f"{'' if r['correct'] else '  NOT OK: ' + r.get('why', '')} "
                      f"[{time.time() - start:.0f} s]", flush=True)
            del shape_sets
            torch.cuda.empty_cache()
    result["rows"] = rows
    result["elapsed_s"] = time.time() - start
    result["clocks_after"] = kb.clocks()

    def fmt(row, key, spec):
        return format(row[key], spec) if key in row else "-"

    print()
    header = (f"{'dtype':5} {'layer':>6} {'m':>5} {'N x K':>12} {'floor':>7} {'kiln us':>8} "
              f"{'TB/s':>5} {'%copy':>5} {'TF/s':>5} {'cuBLAS':>8} {'tinygemm':>8} "
              f"{'gemlite':>8} {'/cuBLAS':>7} {'/tinyg':>6} {'/gemlt':>6} {'rel L2':>8}  ok")
    kb.print_header(header)
    for r in rows:
        if "skipped" in r or "floor_us" not in r:
            print(f"{r['dtype']:5} {r['case']}: {r.get('skipped') or 'NO ' + r.get('why', '')}")
            continue
        shape = f"{r['n']} x {r['k']}"
        print(f"{r['dtype']:5} {r['layer']:>6} {m_str(r['m'])} {shape:>12} "
              f"{r['floor_us']:7.1f} {fmt(r, 'kiln_us', '8.1f'):>8} "
              f"{fmt(r, 'kiln_tbps', '5.2f'):>5} {fmt(r, 'kiln_pct_of_copy', '5.1f'):>5} "
              f"{fmt(r, 'kiln_tflops', '5.0f'):>5} {fmt(r, 'cublas_us', '8.1f'):>8} "
              f"{fmt(r, 'tinygemm_us', '8.1f'):>8} {fmt(r, 'gemlite_us', '8.1f'):>8} "
              f"{fmt(r, 'kiln_vs_cublas', '6.2f'):>6}x {fmt(r, 'kiln_vs_tinygemm', '5.2f'):>5}x "
              f"{fmt(r, 'kiln_vs_gemlite', '5.2f'):>5}x {fmt(r, 'kiln_rel_l2', '8.2e'):>8}  "
              f"{'yes' if r['correct'] else 'NO ' + r.get('why', '')}")
        for peer in PEERS:
            if peer in peers and f"{peer}_error" in r and not (
                    peer == "tinygemm" and r["dtype"] != "bf16"):
                print(f"    {PEER_LABEL[peer]}: {r[f'{peer}_error']}")
    print("floor: max(weight bytes / copy bandwidth, FLOPs / GEMM rate), us; TB/s and %copy: kiln "
          "on the int4 weight + scale bytes; TF/s: 2 m n k; /peer: peer us over kiln us (> 1: "
          "kiln is faster); rel L2: kiln vs the fp32 reference")
    return kb.finish(args.json, result, failed)


def m_str(m):
    return f"{m:>5}"


if __name__ == "__main__":
    sys.exit(main())
