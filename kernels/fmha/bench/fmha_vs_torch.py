#!/usr/bin/env python3
"""kiln fmha (prefill attention) vs cuDNN and FlashAttention-2 (torch SDPA), one process, same data.

Loads the ctypes bridge (libkiln_bench_fmha.so, see bench/CMakeLists.txt), measures the
device-to-device copy bandwidth and the dense GEMM rate (torch.matmul 8192^3 in each dtype: the
tensor-core ceiling) in the same run, then for each row:

  1. builds q [B*S, Hq, d], k / v [B*S, Hkv, d] (torch.randn in the dtype) packed as kiln takes
     them, with cu_seqlens = [0, S, 2S, ..., B*S] (every sequence S tokens); the peers get the
     same memory as [B, H, S, d] views (q.view(B, S, H, d).transpose(1, 2)); a backend that
     refuses the view gets contiguous [B, H, S, d] copies made before any timing, and the row
     says which layout ran (--peer-layout forces one);
  2. runs kiln (out poisoned with NaN first) and each peer once: kiln's output must be finite and
     within rel L2 2e-2 of cuDNN's (of FlashAttention's when cuDNN does not run); each peer's
     distance to cuDNN is reported too;
  3. times kiln (the runner: one kernel, no lse) and each peer
     (torch.nn.functional.scaled_dot_product_attention under sdpa_kernel(CUDNN_ATTENTION) and
     sdpa_kernel(FLASH_ATTENTION), is_causal for the causal rows: sq == sk, so torch's top-left
     mask is kiln's bottom-right one; GQA rows pass enable_gqa=True, and a backend that refuses it
     gets K / V expanded to Hq heads outside the timed region) with CUDA events: warm-up, then the
     median of the timed runs, rotating through 2-3 input sets (each set is >= 4x the L2 at every
     row, and the problems are compute bound); torch.cuda._sleep ahead of each timed run keeps
     the GPU busy while the host enqueues, so the events bracket device time only;
  4. reports us, TFLOP/s (4 * B * Hq * S^2 * d, halved for causal), % of the GEMM rate, the
     floor (max of FLOPs / GEMM rate and bytes of q, k, v, out / copy bandwidth) and the ratios
     kiln / cuDNN and kiln / FA2 of TFLOP/s (= peer us / kiln us; > 1: kiln is faster).

Rows: the bench cases of kernels/fmha/tests/gpu/cases.h, which the bridge exports: the
FlashAttention-3 paper's workload (cases fa3_*: 16k tokens = B x S, hidden 2048: Hq = Hkv =
2048 / d; S = 512 ... 16k; d 64 and 128) for fp16 and bf16, full and causal; plus GQA (gqa_*:
32 query / 8 KV heads, d 128, bf16, B 4, S 4k), full and causal. --quick: the cases cases.h marks
quick (d128 S 4k and 16k, in bf16, and the GQA rows), both masks.

A peer that fails records its error and the run continues. SM and memory clocks are logged
(nvidia-smi) before and after. Writes JSON to --json and prints a table last. Exit code 1 when a
kiln check fails (wrong output, a run error, or a variant missing from the artifact).
"""
import argparse
import ctypes
import math
import re
import pathlib
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# kiln_bench (the shared timing) lives in the repository's bench/.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "bench"))
import kiln_bench as kb  # noqa: E402

# kiln vs cuDNN: two fp32-accumulating kernels that each round P and the output to the dtype
# (each within the bound of docs/performance-method.md of the exact answer: bf16 1.2e-2, fp16
# 2e-3; ~3e-3 / ~4e-4 in practice), so their distance stays well under 2e-2; a wrong mask, head
# mapping or tile is O(1).
CHECK_REL_L2 = 2e-2
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
CODE_DTYPE = {0: torch.float16, 1: torch.bfloat16}  # a case's dtype code (-1: any)
# The fields of a bench case, in the bridge's order (kiln_bench_fmha_case): `batch` sequences of
# `seq` queries and keys; dtype -1 any, 0 fp16, 1 bf16; mask -1 any, 0 full, 1 causal.
CASE_FIELDS = (("batch", int), ("seq", int), ("q_heads", int), ("kv_heads", int),
               ("head_dim", int), ("dtype", int), ("mask", int), ("scale_factor", float),
               ("quick", bool), ("seq_q", int), ("mma_only", bool), ("page_size", int),
               ("window_left", int))
KERNEL_CODE = {"auto": -1, "wgmma": 0, "mma": 1}


def workload(case):
    """A bench case's workload: its name's first part (fa3_d128_s4096: "fa3")."""
    return case["name"].split("_")[0]


def workload_rows(cases, head_dims, dtypes, masks, seq_lens, quick):
    """The rows as dicts (workload, batch, seq, q_heads, kv_heads, head_dim, dtype, causal,
    scale_factor), from the bridge's bench cases: each fa3 case of a head dim in `head_dims` and
    an S in `seq_lens` (None: every one), in each dtype and mask asked for, in that order; then
    every other case in its own dtype (or each asked for) and each mask asked for. quick: only the
    cases marked quick, the fa3 ones in bf16, both masks."""
    if quick:
        cases = [c for c in cases if c["quick"]]
        dtypes, masks, seq_lens = [torch.bfloat16], [False, True], None
        head_dims = list(dict.fromkeys(c["head_dim"] for c in cases if workload(c) == "fa3"))
    fa3 = [c for c in cases if workload(c) == "fa3"]
    if seq_lens is None:
        seq_lens = list(dict.fromkeys(c["seq"] for c in fa3))

    def row(c, dtype, causal):
        return {"workload": workload(c), "name": c["name"], "batch": c["batch"], "seq": c["seq"],
                "seq_q": c["seq_q"], "q_heads": c["q_heads"], "kv_heads": c["kv_heads"],
                "head_dim": c["head_dim"], "dtype": dtype, "causal": causal,
                "scale_factor": c["scale_factor"], "kernel": "mma" if c["mma_only"] else "auto",
                "page_size": c["page_size"], "window_left": c["window_left"]}

    def allowed(c, dtype, causal):
        return c["dtype"] in (-1, DTYPE_CODE[dtype]) and c["mask"] in (-1, int(causal))

    rows = []
    for d in head_dims:
        for dtype in dtypes:
            for causal in masks:
                for s in seq_lens:
                    rows += [row(c, dtype, causal) for c in fa3
                             if c["head_dim"] == d and c["seq"] == s and allowed(c, dtype, causal)]
    for c in cases:
        if workload(c) == "fa3":
            continue
        for causal in masks:
            for dtype in ([CODE_DTYPE[c["dtype"]]] if c["dtype"] >= 0 else dtypes):
                if allowed(c, dtype, causal):
                    rows.append(row(c, dtype, causal))
    return rows


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        self.lib.kiln_bench_fmha_shape_fields.restype = ctypes.c_int
        self.fields = self.lib.kiln_bench_fmha_shape_fields()
        shape_t = ctypes.POINTER(ctypes.c_int)
        f = self.lib.kiln_bench_fmha
        f.argtypes = [shape_t, ctypes.c_float] + [ctypes.c_void_p] * 10 + [
            ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        self.lib.kiln_bench_fmha_workspace.argtypes = [shape_t, ctypes.c_float]
        self.lib.kiln_bench_fmha_workspace.restype = ctypes.c_size_t
        v = self.lib.kiln_bench_variant
        v.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t] + [
            ctypes.POINTER(ctypes.c_int)] * 4
        v.restype = ctypes.c_int
        self.variants = []
        i = 0
        while True:
            name = ctypes.create_string_buffer(128)
            head_dim, dtype, mask, kernel = (ctypes.c_int(), ctypes.c_int(), ctypes.c_int(),
                                             ctypes.c_int())
            if v(i, name, 128, ctypes.byref(head_dim), ctypes.byref(dtype), ctypes.byref(mask),
                 ctypes.byref(kernel)) != 0:
                break
            self.variants.append((name.value.decode(), head_dim.value, dtype.value, mask.value,
                                  kernel.value))
            i += 1
        self.cases = self.read_cases("fmha", CASE_FIELDS)

    def variant(self, row):
        """The name of the artifact's variant the row runs (its kernel, else the runner's choice
        on sm_90: wgmma where it serves the row), or None."""
        wanted = row["kernel"]
        if wanted == "auto" and row["page_size"] > 0:
            wanted = "mma"
        found = {}
        for name, h, d, m, k in self.variants:
            if h == row["head_dim"] and d == DTYPE_CODE[row["dtype"]] and m == int(row["causal"]):
                found[k] = name
        if wanted == "auto":
            return found.get(0, found.get(1))
        return found.get(KERNEL_CODE[wanted])

    def shape(self, row, paged):
        total_q = row["batch"] * row["seq_q"]
        total_k = 0 if paged else row["batch"] * row["seq"]
        values = [DTYPE_CODE[row["dtype"]], int(row["causal"]), row["head_dim"], row["batch"],
                  row["q_heads"], row["kv_heads"], total_q, total_k, row["seq_q"],
                  KERNEL_CODE[row["kernel"]], row["window_left"], row["page_size"],
                  paged["max_pages"] if paged else 0, paged["num_pages"] if paged else 0]
        assert len(values) == self.fields
        return (ctypes.c_int * self.fields)(*values)

    def workspace_bytes(self, shape, scale):
        return self.lib.kiln_bench_fmha_workspace(shape, scale)

    def args(self, s, workspace):
        """The raw pointers of one input set, checked once: the bridge reads every tensor in the
        row-major layout of kiln/runners/fmha.h."""
        paged = "page_table" in s
        names = ("out", "q", "k_cache", "v_cache", "cu_seqlens_q", "page_table", "seq_lens") \
            if paged else ("out", "q", "k", "v", "cu_seqlens_q", "cu_seqlens")
        for name in names:
            t = s[name]
            if not t.is_contiguous():
                raise RuntimeError(f"kiln fmha: {name} is not contiguous "
                                   f"(shape {tuple(t.shape)}, strides {t.stride()})")
        k, v = (s["k_cache"], s["v_cache"]) if paged else (s["k"], s["v"])
        return (s["out"].data_ptr(), None, s["q"].data_ptr(), k.data_ptr(), v.data_ptr(),
                s["cu_seqlens_q"].data_ptr(), None if paged else s["cu_seqlens"].data_ptr(),
                s["page_table"].data_ptr() if paged else None,
                s["seq_lens"].data_ptr() if paged else None,
                workspace.data_ptr() if workspace is not None else None,
                workspace.numel() if workspace is not None else 0)

    def __call__(self, shape, scale, args):
        rc = self.lib.kiln_bench_fmha(shape, scale, *args,
                                      torch.cuda.current_stream().cuda_stream, self.message,
                                      len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln fmha: {self.message.value.decode()}")


def make_set(row, gen):
    """One input set: kiln's packed tensors, and the peers' [B, H, S, d] views of them; for a
    paged row also K and V scattered over pages of the cache (NHD) in random order, and the page
    table and key counts."""
    b, s, sq, hq, hkv, d, dtype = (row["batch"], row["seq"], row["seq_q"], row["q_heads"],
                                   row["kv_heads"], row["head_dim"], row["dtype"])
    q = torch.randn(b * sq, hq, d, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(b * s, hkv, d, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(b * s, hkv, d, device="cuda", dtype=dtype, generator=gen)
    out = torch.empty(b * sq, hq, d, device="cuda", dtype=dtype)
    r = {"q": q, "k": k, "v": v, "out": out,
         "cu_seqlens_q": torch.arange(0, b * sq + 1, sq, device="cuda", dtype=torch.int32),
         "cu_seqlens": torch.arange(0, b * s + 1, s, device="cuda", dtype=torch.int32),
         "q_bhsd": q.view(b, sq, hq, d).transpose(1, 2),
         "k_bhsd": k.view(b, s, hkv, d).transpose(1, 2),
         "v_bhsd": v.view(b, s, hkv, d).transpose(1, 2)}
    ps = row["page_size"]
    if ps > 0:
        if s % ps:
            raise RuntimeError(f"paged row: S {s} is not a multiple of the page size {ps}")
        pages = b * (s // ps)
        perm = torch.randperm(pages, device="cuda", generator=gen)
        for name, t in (("k_cache", k), ("v_cache", v)):
            cache = torch.empty(pages, ps, hkv, d, device="cuda", dtype=dtype)
            cache[perm] = t.view(pages, ps, hkv, d)
            r[name] = cache
        r["page_table"] = perm.to(torch.int32).view(b, s // ps).contiguous()
        r["seq_lens"] = torch.full((b,), s, device="cuda", dtype=torch.int32)
    return r


def paged_shape(row):
    if row["page_size"] <= 0:
        return None
    return {"max_pages": row["seq"] // row["page_size"],
            "num_pages": row["batch"] * (row["seq"] // row["page_size"])}


def visible_pairs(row):
    """(query, key) pairs the mask lets through, per (sequence, query head): the FLOPs count."""
    s, sq, w = row["seq"], row["seq_q"], row["window_left"]
    if not row["causal"]:
        return sq * s
    total = 0
    for i in range(sq):
        end = min(s, i + s - sq + 1)
        begin = max(0, i + s - sq - w) if w >= 0 else 0
        total += max(0, end - begin)
    return total


def torch_reference(s, row, scale):
    """Set 0's attention in fp32 with an explicit bottom-right causal (and window) mask, one
    (sequence, query head) at a time: the check of rows no SDPA backend runs (sq < sk causal,
    windows). [B, Hq, sq, d] in the dtype."""
    b, sk, sq, hq, hkv, d = (row["batch"], row["seq"], row["seq_q"], row["q_heads"],
                             row["kv_heads"], row["head_dim"])
    g = hq // hkv
    i = torch.arange(sq, device="cuda")[:, None]
    j = torch.arange(sk, device="cuda")[None, :]
    visible = j <= i + sk - sq
    if row["window_left"] >= 0:
        visible &= j >= i + sk - sq - row["window_left"]
    out = torch.empty(b, hq, sq, d, device="cuda", dtype=row["dtype"])
    for bi in range(b):
        for h in range(hq):
            q = s["q_bhsd"][bi, h].float()
            k = s["k_bhsd"][bi, h // g].float()
            v = s["v_bhsd"][bi, h // g].float()
            scores = (q @ k.T) * scale
            scores = scores.masked_fill(~visible, float("-inf"))
            out[bi, h] = (torch.softmax(scores, dim=-1) @ v).to(row["dtype"])
    return out


def kiln_out_bhsd(s, row):
    return s["out"].view(row["batch"], row["seq_q"], row["q_heads"],
                         row["head_dim"]).transpose(1, 2)


def rel_l2(got, ref):
    return ((got.double() - ref.double()).norm() / ref.double().norm()).item()


class Peer:
    """torch SDPA under one backend, on the [B, H, S, d] view of kiln's tensors or on contiguous
    copies; GQA through enable_gqa, or K / V expanded to Hq heads when the backend refuses it."""

    def __init__(self, name, backend, layouts):
        self.name, self.backend, self.layouts = name, backend, layouts
        self.layout, self.gqa = layouts[0], "none"

    def tensors(self, s):
        suffix = "_bhsd" if self.layout == "view" else "_contig"
        kv = "_expanded" if self.gqa == "expanded" else ""
        return s["q" + suffix], s["k" + suffix + kv], s["v" + suffix + kv]

    def __call__(self, s, row, scale):
        q, k, v = self.tensors(s)
        extra = {"enable_gqa": True} if self.gqa == "enable_gqa" else {}
        with sdpa_kernel(self.backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=row["causal"], scale=scale,
                                                  **extra)

    def prepare(self, sets, row, scale):
        """Finds a (layout, GQA mode) that runs; returns (output of set 0 or None, notes)."""
        errors = []
        grouped = row["q_heads"] != row["kv_heads"]
        for gqa in (["enable_gqa", "expanded"] if grouped else ["none"]):
            for layout in self.layouts:
                self.layout, self.gqa = layout, gqa
                try:
                    for s in sets:
                        if layout == "contiguous" and "q_contig" not in s:
                            for t in ("q", "k", "v"):
                                s[t + "_contig"] = s[t + "_bhsd"].contiguous()
                        if gqa == "expanded":
                            g = row["q_heads"] // row["kv_heads"]
                            suffix = "_bhsd" if layout == "view" else "_contig"
                            for t in ("k", "v"):
                                if t + suffix + "_expanded" not in s:
                                    s[t + suffix + "_expanded"] = (
                                        s[t + suffix].repeat_interleave(g, dim=1))
                    out = self(sets[0], row, scale)
                    torch.cuda.synchronize()
                    return out, "; ".join(errors)
                except Exception as e:  # noqa: BLE001 - any backend refusal is recorded
                    errors.append(f"{layout}/{gqa}: {kb.error_line(e)}")
        return None, "; ".join(errors)


def bench_row(kiln, row, gemm, copy_tbps, l2_bytes, gen, busy_cycles, peers, runs):
    b, s, sq, hq, hkv, d, dtype = (row["batch"], row["seq"], row["seq_q"], row["q_heads"],
                                   row["kv_heads"], row["head_dim"], row["dtype"])
    causal = row["causal"]
    scale = row["scale_factor"] / math.sqrt(d)
    flops = 4 * b * hq * visible_pairs(row) * d
    elem = dtype.itemsize
    kv_bytes = b * s * 2 * hkv * d * elem
    nbytes = b * sq * 2 * hq * d * elem + kv_bytes  # q, out, k, v
    nsets = kb.rotation_sets(nbytes, l2_bytes, 3)
    r = {"workload": row["workload"], "case": row["name"], "dtype": DTYPE_NAME[dtype],
         "mask": "causal" if causal else "full", "batch": b, "seq": s, "seq_q": sq,
         "q_heads": hq, "kv_heads": hkv, "head_dim": d, "kernel": row["kernel"],
         "page_size": row["page_size"], "window_left": row["window_left"], "flops": flops,
         "bytes": nbytes, "kv_bytes": kv_bytes, "input_sets": nsets, "gemm_tflops": gemm[dtype],
         "floor_us": max(flops / (gemm[dtype] * 1e12), nbytes / (copy_tbps * 1e12)) * 1e6}
    r["variant"] = kiln.variant(row)
    sets = [make_set(row, gen) for _ in range(nsets)]
    s0 = sets[0]
    # SDPA's is_causal aligns the mask to the top left: the peers run (and check kiln) where that
    # is kiln's mask (sq == sk) and there is no window; elsewhere an fp32 torch reference checks.
    peers = peers if sq == s and row["window_left"] < 0 else []

    # Every peer once (outputs of set 0), then kiln's check against cuDNN's, before any timing.
    outs = {}
    if not peers:
        outs["torch_fp32"] = torch_reference(s0, row, scale)
    for peer in peers:
        out, notes = peer.prepare(sets, row, scale)
        if out is None:
            r[f"{peer.name}_error"] = notes
            continue
        r[f"{peer.name}_layout"] = peer.layout
        if peer.gqa != "none":
            r[f"{peer.name}_gqa"] = peer.gqa
        if notes:
            r[f"{peer.name}_note"] = notes
        outs[peer.name] = out
    check_peer = next((n for n in ("cudnn", "flash", "torch_fp32") if n in outs), None)
    r["checked_against"] = check_peer
    if check_peer is not None:
        for name, out in outs.items():
            if name != check_peer:
                r[f"{name}_vs_{check_peer}_rel_l2"] = rel_l2(out, outs[check_peer])

    r["correct"] = False
    if r["variant"] is None:
        r["why"] = (f"no {row['kernel']} variant of d{d} {DTYPE_NAME[dtype]} {r['mask']} in the "
                    f"artifact (variants: {', '.join(n for n, *_ in kiln.variants) or 'none'})")
    else:
        try:
            shape = kiln.shape(row, paged_shape(row))
            ws_bytes = kiln.workspace_bytes(shape, scale)
            workspace = (torch.empty(ws_bytes, dtype=torch.uint8, device="cuda")
                         if ws_bytes > 0 else None)
            args = [kiln.args(x, workspace) for x in sets]
            s0["out"].fill_(float("nan"))
            kiln(shape, scale, args[0])
            torch.cuda.synchronize()
            finite = bool(torch.isfinite(s0["out"]).all().item())
            if check_peer is None:
                r["why"] = "no peer ran: nothing to check kiln against"
            else:
                rel = rel_l2(kiln_out_bhsd(s0, row), outs[check_peer])
                r[f"kiln_vs_{check_peer}_rel_l2"] = rel
                r["correct"] = finite and rel < CHECK_REL_L2
                if not r["correct"]:
                    r["why"] = (f"kiln rel L2 {rel:.3g} to {check_peer} >= {CHECK_REL_L2}"
                                f"{'' if finite else ', non-finite output'}")
            if r["correct"]:
                med, mn = kb.timed(lambda a: kiln(shape, scale, a), args, runs, 5, busy_cycles)
                r.update({"kiln_us": med * 1e3, "kiln_min_us": mn * 1e3,
                          "kiln_tflops": flops / (med * 1e-3) / 1e12})
                r["kiln_pct_of_gemm"] = 100 * r["kiln_tflops"] / gemm[dtype]
                r["kv_pct_of_copy"] = 100 * kv_bytes / (med * 1e-3) / (copy_tbps * 1e12)
        except Exception as e:  # noqa: BLE001 - a kiln refusal or a launch error fails the row
            r["why"] = f"kiln: {kb.error_line(e)}"

    for peer in peers:
        if peer.name not in outs:
            continue
        try:
            med, mn = kb.timed(lambda x, p=peer: p(x, row, scale), sets, runs, 5, busy_cycles)
        except Exception as e:  # noqa: BLE001
            r[f"{peer.name}_error"] = f"timing: {kb.error_line(e)}"
            continue
        r.update({f"{peer.name}_us": med * 1e3, f"{peer.name}_min_us": mn * 1e3,
                  f"{peer.name}_tflops": flops / (med * 1e-3) / 1e12})
        if "kiln_us" in r:
            r[f"kiln_vs_{peer.name}"] = r[f"{peer.name}_us"] / r["kiln_us"]  # > 1: kiln faster
    del sets, outs
    torch.cuda.empty_cache()
    return r


def derived(rows):
    """The goals that compare kiln rows with each other: paged against contiguous K / V (the same
    kernel and shape), the window's rate against the same kernel's causal rate at S 16k, and the
    verification rows' share of the copy bandwidth."""
    by_case = {}
    for r in rows:
        if "kiln_us" in r:
            by_case[(r["case"], r["dtype"], r["mask"])] = r
    out = []
    for (case, dtype, mask), r in by_case.items():
        if case.startswith("paged"):
            base = by_case.get(("mma_gqa_d128_s4096", dtype, mask))
            if base:
                ratio = base["kiln_us"] / r["kiln_us"]
                out.append({"what": f"{case} {dtype} {mask}: {ratio:.3f}x the contiguous rate",
                            "case": case, "dtype": dtype, "mask": mask,
                            "paged_vs_contiguous": ratio})
        if "window" in case:
            kernel = "mma" if case.startswith("mma") else "fa3"
            base = by_case.get((f"{kernel}_d{r['head_dim']}_s{r['seq']}", dtype, "causal"))
            if base:
                ratio = r["kiln_tflops"] / base["kiln_tflops"]
                out.append({"what": f"{case} {dtype}: {r['kiln_tflops']:.0f} TFLOP/s over the "
                                    f"visible pairs, {ratio:.3f}x the causal rate",
                            "case": case, "dtype": dtype, "window_vs_causal": ratio})
        if case.startswith("verify"):
            out.append({"what": f"{case} {dtype}: K/V read at {r['kv_pct_of_copy']:.1f}% of copy",
                        "case": case, "dtype": dtype, "kv_pct_of_copy": r["kv_pct_of_copy"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_fmha.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--quick", action="store_true",
                    help="only the cases marked quick (d128 S 4k and 16k in bf16, both masks, and "
                         "the GQA rows)")
    ap.add_argument("--dtypes", default="fp16,bf16", help="of the FA3 rows: fp16,bf16")
    ap.add_argument("--head-dims", default="64,128", help="of the FA3 rows: 64,128")
    ap.add_argument("--masks", default="full,causal", help="full,causal")
    ap.add_argument("--seq-lens", default="",
                    help="of the FA3 rows, each one of the fa3 cases' (default: every one, "
                         "512,...,16384)")
    ap.add_argument("--peer-layout", default="auto", choices=["auto", "view", "contiguous"],
                    help="the peers' q/k/v: [B, H, S, d] views of kiln's packed tensors, "
                         "contiguous copies, or auto (the view, else copies)")
    ap.add_argument("--cases", default="",
                    help="a regular expression: only the rows of bench cases whose name matches "
                         "(re.search), after the other selections")
    ap.add_argument("--runs", type=int, default=30, help="timed runs per measurement")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    dtypes = [DTYPES[x] for x in args.dtypes.split(",") if x]
    head_dims = [int(x) for x in args.head_dims.split(",") if x]
    masks = [{"full": False, "causal": True}[x] for x in args.masks.split(",") if x]
    seq_lens = [int(x) for x in args.seq_lens.split(",") if x] or None

    kiln = Kiln(args.lib)
    fa3 = [c for c in kiln.cases if workload(c) == "fa3"]
    for d in head_dims:
        if not any(c["head_dim"] == d for c in fa3):
            ap.error(f"--head-dims: no fa3 case has head dim {d} (kernels/fmha/tests/gpu/cases.h)")
    for s in seq_lens or []:
        if not any(c["seq"] == s for c in fa3):
            ap.error(f"--seq-lens: no fa3 case has S {s} (kernels/fmha/tests/gpu/cases.h: "
                     f"{', '.join(str(x) for x in dict.fromkeys(c['seq'] for c in fa3))})")
    rows = workload_rows(kiln.cases, head_dims, dtypes, masks, seq_lens, args.quick)
    if args.cases:
        rows = [r for r in rows if re.search(args.cases, r["name"])]
        if not rows:
            ap.error(f"--cases {args.cases!r}: no bench row matches")

    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    busy_cycles = 400000  # ~200 us of GPU work ahead of each timed call: ctypes, SDPA dispatch fit

    layouts = {"auto": ["view", "contiguous"], "view": ["view"],
               "contiguous": ["contiguous"]}[args.peer_layout]
    peers = [Peer("cudnn", SDPBackend.CUDNN_ATTENTION, layouts),
             Peer("flash", SDPBackend.FLASH_ATTENTION, layouts)]

    result = kb.result_header("fmha_vs_torch", props, l2_bytes, kiln, seed,
                              {"cudnn": torch.backends.cudnn.version()})
    result["quick"] = args.quick
    result["check_rel_l2"] = CHECK_REL_L2
    result["kiln_variants"] = [n for n, *_ in kiln.variants]
    copy_tbps = kb.measure_copy(result)
    gemm = {}
    for dtype in sorted({row["dtype"] for row in rows}, key=DTYPE_NAME.get):
        gemm[dtype] = kb.gemm_tflops(dtype, busy_cycles)
        torch.cuda.empty_cache()
    result["gemm_tflops"] = {DTYPE_NAME[k]: v for k, v in gemm.items()}
    print(f"{props.name} sm_{result['sm']} ({props.multi_processor_count} SMs), driver "
          f"{result['driver']}, torch {torch.__version__}, cuDNN {result['cudnn']}; artifact "
          f"{kiln.tag} {kiln.fingerprint[:16]}; seed {seed}")
    kb.print_copy(result)
    print("dense GEMM " + ", ".join(f"{DTYPE_NAME[k]} {v:.0f} TFLOP/s" for k, v in gemm.items())
          + f" (torch.matmul {kb.GEMM_N}^3); clocks (sm, mem): {kb.clocks()}")

    out_rows = []
    for row in rows:
        r = bench_row(kiln, row, gemm, copy_tbps, l2_bytes, gen, busy_cycles, peers, args.runs)
        out_rows.append(r)
        print(f"  {r['case']} {r['dtype']} d{r['head_dim']} {r['mask']:>6} B {r['batch']:>2} "
              f"S {r['seq_q']}/{r['seq']} H {r['q_heads']}/{r['kv_heads']} {r['variant']}: kiln "
              f"{r.get('kiln_tflops', float('nan')):.0f}, cuDNN "
              f"{r.get('cudnn_tflops', float('nan')):.0f}, FA2 "
              f"{r.get('flash_tflops', float('nan')):.0f} TFLOP/s, K/V at "
              f"{r.get('kv_pct_of_copy', float('nan')):.1f}% of copy"
              f"{'' if r['correct'] else '  NOT OK: ' + r.get('why', '')}", flush=True)
    result["rows"] = out_rows
    result["derived"] = derived(out_rows)
    for line in result["derived"]:
        print("  " + line["what"])
    result["clocks_after"] = kb.clocks()

    def fmt(row, key, spec):
        return format(row[key], spec) if key in row else "-"

    print()
    header = (f"{'kernel':>6} {'d':>3} {'dtype':>5} {'mask':>6} {'B x S':>10} {'Hq/Hkv':>6} {'floor':>7} "
              f"{'kiln us':>8} {'TF/s':>5} {'%gemm':>5} {'cuDNN us':>8} {'TF/s':>5} "
              f"{'FA2 us':>8} {'TF/s':>5} {'/cuDNN':>6} {'/FA2':>5} {'rel L2':>8}  ok")
    kb.print_header(header)
    failed = 0
    for r in out_rows:
        failed += not r["correct"]
        check = r.get(f"kiln_vs_{r['checked_against']}_rel_l2") if r["checked_against"] else None
        kernel = (r["variant"] or "-").split("_")[1] if r["variant"] else "-"
        print(f"{kernel:>6} {r['head_dim']:>3} {r['dtype']:>5} {r['mask']:>6} "
              f"{str(r['batch']) + ' x ' + str(r['seq']):>10} "
              f"{str(r['q_heads']) + '/' + str(r['kv_heads']):>6} {r['floor_us']:7.0f} "
              f"{fmt(r, 'kiln_us', '8.0f'):>8} {fmt(r, 'kiln_tflops', '5.0f'):>5} "
              f"{fmt(r, 'kiln_pct_of_gemm', '5.1f'):>5} "
              f"{fmt(r, 'cudnn_us', '8.0f'):>8} {fmt(r, 'cudnn_tflops', '5.0f'):>5} "
              f"{fmt(r, 'flash_us', '8.0f'):>8} {fmt(r, 'flash_tflops', '5.0f'):>5} "
              f"{fmt(r, 'kiln_vs_cudnn', '5.2f'):>5}x {fmt(r, 'kiln_vs_flash', '4.2f'):>4}x "
              f"{format(check, '8.2e') if check is not None else '-':>8}  "
              f"{'yes' if r['correct'] else 'NO ' + r.get('why', '')}")
        for peer in ("cudnn", "flash"):
            if f"{peer}_error" in r:
                print(f"    {peer}: {r[f'{peer}_error']}")
            elif r.get(f"{peer}_layout") == "contiguous" or r.get(f"{peer}_gqa") == "expanded":
                note = r.get(f"{peer}_note", "")
                expanded = r.get(f"{peer}_gqa") == "expanded"
                print(f"    {peer}: ran on {r[f'{peer}_layout']} q/k/v"
                      f"{', K/V expanded to Hq heads' if expanded else ''}"
                      f"{f' ({note})' if note else ''}")
    print("floor: max(FLOPs / GEMM rate, bytes / copy bandwidth), us; /cuDNN, /FA2: kiln TFLOP/s "
          "over the peer's (> 1: kiln is faster); rel L2: kiln vs " +
          ("cuDNN" if all(r["checked_against"] == "cudnn" for r in out_rows) else
           "cuDNN (FA2 where cuDNN did not run)"))
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
