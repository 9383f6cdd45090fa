#!/usr/bin/env python3
"""kiln decodeattn vs cuDNN and FlashAttention (torch SDPA), in one process, on the same data.

Loads the ctypes bridge (libkiln_bench_decodeattn.so, see bench/CMakeLists.txt), then for each
row, bf16: the bench cases of kernels/decodeattn/tests/gpu/cases.h, which the bridge exports
((batch, keys) 1 x 32768, 8 x 8192, 32 x 4096, 64 x 2048, 256 x 1024, GQA 32 query / 8 KV heads,
head dim 128, page size 16, one query token per sequence; --page-size overrides the page size,
--query-tokens T the tokens: T of them, causal over the last T keys, as in multi-token decoding):

  1. builds the same logical K and V three times: contiguous [B, Hkv, S, d] for the peers, and for
     kiln a paged cache in each page layout (NHD [num_pages, page_size, Hkv, d] and HND
     [num_pages, Hkv, page_size, d]) whose pages are handed out in a random permutation (page
     table [B, S / page_size], every sequence S keys; --page-order sequential: in order, to tell
     the cost of scattered pages from the kernel's own);
  2. checks kiln, and each peer, against a float64 torch reference (relative L2; kiln within the
     bf16 bound 1.2e-2 of docs/performance-method.md) before any timing;
  3. times kiln in each layout (runner: attention kernel + split-KV merge when it splits) and each
     peer
     (torch.nn.functional.scaled_dot_product_attention under sdpa_kernel(CUDNN_ATTENTION) and
     sdpa_kernel(FLASH_ATTENTION), q [B, Hq, T, d], k / v [B, Hkv, S, d], enable_gqa=True, and for
     T > 1 the bottom-right causal mask torch.nn.attention.bias.causal_lower_right; a peer
     that refuses GQA is retried on K / V expanded to Hq heads, and the row says so) with CUDA
     events: warm-up, then the median of the timed runs, rotating through enough input sets that
     they exceed 4x the L2; before each timed run torch.cuda._sleep keeps the GPU busy while the
     host enqueues, so the events bracket device time only;
  4. reports TB/s of K + V bytes (2 * B * S * Hkv * d * 2), % of the device-to-device copy
     bandwidth measured in this run, the floor (bytes / copy bandwidth), and kiln / peer ratios
     per layout (row keys kiln_<layout>_...).

A peer that fails records its error and the run continues. SM and memory clocks are logged
(nvidia-smi) before and after. Writes JSON to --json and prints a table. Exit code 1 when kiln's
correctness check fails.
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

# docs/performance-method.md, Method 2; kernels/decodeattn/README.md
REL_L2_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
LAYOUT_CODE = {"nhd": 0, "hnd": 1}  # the bridge's kv_layout field (kiln::decodeattn::KvLayout)
# The fields of a bench case, in the bridge's order (kiln_bench_decodeattn_case): `batch`
# sequences of `keys` keys; max_seq_len and multiprocessors 0: the keys, the device's SMs.
CASE_FIELDS = (("batch", int), ("keys", int), ("q_heads", int), ("kv_heads", int),
               ("head_dim", int), ("page_size", int), ("query_tokens", int), ("max_seq_len", int),
               ("multiprocessors", int), ("scale_factor", float))


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        self.lib.kiln_bench_decodeattn_shape_fields.restype = ctypes.c_int
        self.fields = self.lib.kiln_bench_decodeattn_shape_fields()
        shape_t = ctypes.POINTER(ctypes.c_int)
        f = self.lib.kiln_bench_decodeattn
        f.argtypes = [shape_t, ctypes.c_float] + [ctypes.c_void_p] * 7 + [
            ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        self.lib.kiln_bench_decodeattn_workspace.argtypes = [shape_t, ctypes.c_float]
        self.lib.kiln_bench_decodeattn_workspace.restype = ctypes.c_size_t
        self.lib.kiln_bench_decodeattn_splits.argtypes = [shape_t, ctypes.c_float, ctypes.c_int]
        self.lib.kiln_bench_decodeattn_splits.restype = ctypes.c_int
        self.variants = []
        i = 0
        while True:
            name = ctypes.create_string_buffer(128)
            head_dim, dtype = ctypes.c_int(), ctypes.c_int()
            if self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(head_dim),
                                           ctypes.byref(dtype)) != 0:
                break
            self.variants.append((name.value.decode(), head_dim.value, dtype.value))
            i += 1
        self.cases = self.read_cases("decodeattn", CASE_FIELDS)

    def has(self, head_dim, dtype):
        return any(h == head_dim and d == DTYPE_CODE[dtype] for _, h, d in self.variants)

    def shape(self, dtype, case, page_size, num_pages, max_pages, max_seq_len, sms, layout,
              tokens):
        """The bridge's shape array of `case` (its batch and heads) with the rest given."""
        values = [DTYPE_CODE[dtype], case["batch"], case["q_heads"], case["kv_heads"],
                  case["head_dim"], page_size, num_pages, max_pages, max_seq_len, sms,
                  LAYOUT_CODE[layout], tokens]
        assert len(values) == self.fields
        return (ctypes.c_int * self.fields)(*values)

    def workspace_bytes(self, shape, scale):
        return self.lib.kiln_bench_decodeattn_workspace(shape, scale)

    def splits(self, shape, scale, sms):
        return self.lib.kiln_bench_decodeattn_splits(shape, scale, sms)

    def __call__(self, shape, scale, out, q, k_cache, v_cache, table, lens, workspace):
        # The bridge passes raw pointers: every tensor must be in the row-major layout of params.h.
        for name, t in (("out", out), ("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
                        ("table", table), ("lens", lens)):
            if not t.is_contiguous():
                raise RuntimeError(f"kiln decodeattn: {name} is not contiguous "
                                   f"(shape {tuple(t.shape)}, strides {t.stride()})")
        stream = torch.cuda.current_stream().cuda_stream
        rc = self.lib.kiln_bench_decodeattn(
            shape, scale, out.data_ptr(), q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(),
            table.data_ptr(), lens.data_ptr(),
            workspace.data_ptr() if workspace is not None else None,
            workspace.numel() if workspace is not None else 0,
            stream, self.message, len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln decodeattn: {self.message.value.decode()}")


def make_set(case, tokens, dtype, page_size, page_order, layouts, gen):
    """One input set of `case` (its batch, keys and heads): the contiguous tensors of the peers
    and kiln's paged caches of the same K/V. q is the peers' [B, Hq, T, d]; kiln reads q_kiln, the
    same values as [B, T, Hq, d]."""
    batch, keys = case["batch"], case["keys"]
    q_heads, kv_heads, head_dim = case["q_heads"], case["kv_heads"], case["head_dim"]
    q = torch.randn(batch, q_heads, tokens, head_dim, device="cuda", generator=gen).to(dtype)
    k = torch.randn(batch, kv_heads, keys, head_dim, device="cuda", generator=gen).to(dtype)
    v = torch.randn(batch, kv_heads, keys, head_dim, device="cuda", generator=gen).to(dtype)
    pages_per_seq = keys // page_size
    num_pages = batch * pages_per_seq
    # Logical page i (sequence i // pages_per_seq, keys page_size * (i % pages_per_seq) ...) is
    # stored at physical page perm[i].
    perm = (torch.randperm(num_pages, device="cuda", generator=gen) if page_order == "random"
            else torch.arange(num_pages, device="cuda"))

    def pages(x, layout):
        # [B, Hkv, S, d] -> [B, Hkv, S / page_size, page_size, d] -> one page per (b, page):
        # NHD [num_pages, page_size, Hkv, d], HND [num_pages, Hkv, page_size, d].
        x = x.reshape(batch, kv_heads, pages_per_seq, page_size, head_dim)
        order = (0, 2, 3, 1, 4) if layout == "nhd" else (0, 2, 1, 3, 4)
        return x.permute(*order).reshape(num_pages, *[x.shape[i] for i in order[2:]])

    s = {"q": q, "q_kiln": q.transpose(1, 2).contiguous(), "k": k, "v": v,
         "num_pages": num_pages, "pages_per_seq": pages_per_seq, "tokens": tokens}
    for layout in layouts:
        for name, x in (("k", k), ("v", v)):
            p = pages(x, layout)
            # Contiguous by construction: at batch 1 a reshape of the permuted tensor is a view
            # (the size-1 batch dim merges) with the strides of [Hkv, ...], and empty_like would
            # keep them, handing kiln (which reads data_ptr() in its layout) another layout: the
            # 1 x 32768 row's rel L2 1.32 on the H200 (run 2).
            cache = torch.empty(p.shape, dtype=dtype, device="cuda")
            cache[perm] = p
            s[f"{name}_cache_{layout}"] = cache
    s["table"] = perm.to(torch.int32).reshape(batch, pages_per_seq).contiguous()
    s["lens"] = torch.full((batch,), keys, dtype=torch.int32, device="cuda")
    s["out"] = torch.empty(batch, tokens, q_heads, head_dim, dtype=dtype, device="cuda")
    return s


def reference(s, scale):
    """float64 attention, GQA by head groups, token t of T over keys [0, S - T + 1 + t): the
    peers' layout [B, Hq, T, d]."""
    b, q_heads, t, head_dim = s["q"].shape
    kv_heads, keys = s["k"].shape[1], s["k"].shape[2]
    g = q_heads // kv_heads
    q = s["q"].double().reshape(b, kv_heads, g, t, head_dim)
    scores = torch.einsum("bhgtd,bhsd->bhgts", q, s["k"].double()) * scale
    limit = keys - t + 1 + torch.arange(t, device=scores.device).unsqueeze(1)  # [T, 1]
    mask = torch.arange(keys, device=scores.device).unsqueeze(0) >= limit      # [T, S]
    p = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return torch.einsum("bhgts,bhsd->bhgtd", p, s["v"].double()).reshape(b, q_heads, t, head_dim)


def rel_l2(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


class Peer:
    """torch SDPA under one backend; enable_gqa first, K/V expanded to Hq heads if refused."""

    def __init__(self, name, backend):
        self.name, self.backend = name, backend
        self.mode = "enable_gqa"

    def __call__(self, s, scale):
        from torch.nn.attention import sdpa_kernel
        mask = None
        if s["tokens"] > 1:
            from torch.nn.attention.bias import causal_lower_right
            mask = causal_lower_right(s["tokens"], s["k"].shape[2])
        with sdpa_kernel(self.backend):
            if self.mode == "enable_gqa":
                return F.scaled_dot_product_attention(s["q"], s["k"], s["v"], attn_mask=mask,
                                                      scale=scale, enable_gqa=True)
            return F.scaled_dot_product_attention(s["q"], s["k_expanded"], s["v_expanded"],
                                                  attn_mask=mask, scale=scale)

    def prepare(self, sets, scale):
        """Finds a mode that runs; returns (output of set 0 or None, error text or "")."""
        errors = []
        for mode in ("enable_gqa", "expanded"):
            self.mode = mode
            try:
                if mode == "expanded":
                    g = sets[0]["q"].shape[1] // sets[0]["k"].shape[1]
                    for s in sets:
                        s["k_expanded"] = s["k"].repeat_interleave(g, dim=1)
                        s["v_expanded"] = s["v"].repeat_interleave(g, dim=1)
                out = self(sets[0], scale)
                torch.cuda.synchronize()
                return out, ""
            except Exception as e:  # noqa: BLE001 - any backend refusal is recorded
                errors.append(f"{mode}: {kb.error_line(e)}")
        return None, "; ".join(errors)


def bench_row(kiln, case, tokens, dtype, page_size, page_order, layouts, copy_tbps, l2_bytes, sms,
              plan_sms, gen, busy_cycles, peers):
    batch, keys = case["batch"], case["keys"]
    q_heads, kv_heads, head_dim = case["q_heads"], case["kv_heads"], case["head_dim"]
    scale = case["scale_factor"] / math.sqrt(head_dim)
    kv_bytes = 2 * batch * keys * kv_heads * head_dim * dtype.itemsize
    nsets = kb.rotation_sets(kv_bytes, l2_bytes, 8)
    sets = [make_set(case, tokens, dtype, page_size, page_order, layouts, gen)
            for _ in range(nsets)]
    s0 = sets[0]
    shapes = {layout: kiln.shape(dtype, case, page_size, s0["num_pages"], s0["pages_per_seq"],
                                 case["max_seq_len"] or keys, plan_sms, layout, tokens)
              for layout in layouts}
    ws_bytes = kiln.workspace_bytes(shapes[layouts[0]], scale)
    workspace = torch.empty(max(ws_bytes, 16), dtype=torch.uint8, device="cuda")
    splits = kiln.splits(shapes[layouts[0]], scale, plan_sms or sms)
    row = {"dtype": DTYPE_NAME[dtype], "batch": batch, "keys": keys, "query_tokens": tokens,
           "q_heads": q_heads, "kv_heads": kv_heads, "head_dim": head_dim, "page_size": page_size,
           "page_order": page_order,
           "layouts": list(layouts), "kv_bytes": kv_bytes, "input_sets": nsets,
           "kiln_splits": splits, "kiln_plan_sms": plan_sms or sms, "kiln_workspace_bytes": ws_bytes,
           "floor_us": kv_bytes / (copy_tbps * 1e12) * 1e6, "correct": True}

    ref = reference(s0, scale)
    ref_kiln = ref.transpose(1, 2)  # [B, T, Hq, d]
    runs = 50
    for layout in layouts:
        def call(s, layout=layout):
            kiln(shapes[layout], scale, s["out"], s["q_kiln"], s[f"k_cache_{layout}"],
                 s[f"v_cache_{layout}"], s["table"], s["lens"], workspace)

        key = f"kiln_{layout}"
        s0["out"].fill_(float("nan"))
        call(s0)
        torch.cuda.synchronize()
        rel = rel_l2(s0["out"], ref_kiln)
        row[f"{key}_rel_l2"] = rel
        if not (bool(torch.isfinite(s0["out"]).all().item()) and rel <= REL_L2_BOUND[dtype]):
            row["correct"] = False
            row["why"] = row.get("why", "") + (
                f"{layout}: rel L2 {rel:.3g} > {REL_L2_BOUND[dtype]} or non-finite output; ")
            continue
        med, mn = kb.timed(call, sets, runs, 10, busy_cycles)
        row.update({f"{key}_us": med * 1e3, f"{key}_min_us": mn * 1e3,
                    f"{key}_tbps": kb.tbps(kv_bytes, med)})
        row[f"{key}_pct_of_copy"] = 100 * row[f"{key}_tbps"] / copy_tbps
    for peer in peers:
        out, err = peer.prepare(sets, scale)
        key = peer.name
        if out is None:
            row[f"{key}_error"] = err
            continue
        row[f"{key}_gqa"] = peer.mode
        if err:
            row[f"{key}_note"] = err
        row[f"{key}_rel_l2"] = rel_l2(out.reshape(batch, q_heads, tokens, head_dim), ref)
        try:
            med, mn = kb.timed(lambda s: peer(s, scale), sets, runs, 10, busy_cycles)
        except Exception as e:  # noqa: BLE001
            row[f"{key}_error"] = f"timing: {kb.error_line(e)}"
            continue
        row.update({f"{key}_us": med * 1e3, f"{key}_min_us": mn * 1e3,
                    f"{key}_tbps": kb.tbps(kv_bytes, med)})
        for layout in layouts:  # > 1: kiln is faster
            if f"kiln_{layout}_us" in row:
                row[f"kiln_{layout}_vs_{key}"] = med / (row[f"kiln_{layout}_us"] * 1e-3)
    del sets, workspace
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_decodeattn.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--page-size", type=int, default=None,
                    help="kiln's page size (default: each case's, 16)")
    ap.add_argument("--layouts", default="nhd,hnd",
                    help="kiln's page layouts, comma separated (nhd, hnd), each timed per row")
    ap.add_argument("--query-tokens", type=int, default=None,
                    help="query tokens per sequence, 1..8 (multi-token decoding, causal; "
                         "default: each case's, 1)")
    ap.add_argument("--page-order", default="random", choices=["random", "sequential"],
                    help="how kiln's pages are placed in the cache (the peers' K/V are contiguous)")
    ap.add_argument("--peers", default="cudnn,flash",
                    help="peers to time, comma separated (cudnn, flash), or none")
    ap.add_argument("--plan-sms", type=int, default=0,
                    help="plan kiln's split count for this many SMs (Problem::multiprocessors; "
                         "0: the case's, which is the device's), for split-count experiments")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    if args.query_tokens is not None and not 1 <= args.query_tokens <= 8:
        ap.error(f"--query-tokens {args.query_tokens} is not in 1..8")
    if args.page_size is not None and args.page_size <= 0:
        ap.error(f"--page-size {args.page_size} is not positive")

    kiln = Kiln(args.lib)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    layouts = tuple(args.layouts.split(","))
    for layout in layouts:
        if layout not in LAYOUT_CODE:
            ap.error(f"--layouts: '{layout}' is not one of {', '.join(LAYOUT_CODE)}")
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    sms = props.multi_processor_count
    seed, gen = kb.start_seed(args.seed)
    busy_cycles = 400000  # ~200 us of GPU work ahead of each timed call: ctypes or SDPA dispatch fit in it

    from torch.nn.attention import SDPBackend
    known = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    names = [] if args.peers == "none" else [n for n in args.peers.split(",") if n]
    for name in names:
        if name not in known:
            ap.error(f"--peers: '{name}' is not one of {', '.join(known)} (or none)")
    if args.plan_sms < 0:
        ap.error(f"--plan-sms {args.plan_sms} is negative")
    peers = [Peer(name, known[name]) for name in names]
    for case in kiln.cases:
        if case["keys"] % (args.page_size or case["page_size"]) != 0:
            ap.error(f"page size {args.page_size or case['page_size']} does not divide the "
                     f"{case['keys']} keys of {case['name']}")

    result = kb.result_header("decodeattn_vs_torch", props, l2_bytes, kiln, seed,
                              {"cudnn": torch.backends.cudnn.version()})
    copy_tbps = kb.measure_copy(result)
    print(f"{props.name} sm_{result['sm']} ({sms} SMs), driver {result['driver']}, torch "
          f"{torch.__version__}, cuDNN {result['cudnn']}; artifact {kiln.tag} "
          f"{kiln.fingerprint[:16]}; seed {seed}")
    kb.print_copy(result)

    rows = []
    missing = sorted({c["head_dim"] for c in kiln.cases if not kiln.has(c["head_dim"], dtype)})
    if missing:
        print(", ".join(f"decodeattn_d{d}_{args.dtype}" for d in missing) +
              " not in the artifact")
        result["rows"] = rows
        result["failed_checks"] = 1
        kb.write_json(args.json, result)
        return 1
    for case in kiln.cases:
        rows.append(bench_row(kiln, case, args.query_tokens or case["query_tokens"], dtype,
                              args.page_size or case["page_size"], args.page_order, layouts,
                              copy_tbps, l2_bytes, sms, args.plan_sms or case["multiprocessors"],
                              gen, busy_cycles, peers))
    result["rows"] = rows
    result["clocks_after"] = kb.clocks()

    def fmt(row, key, spec):
        return format(row[key], spec) if key in row else "-"

    header = (f"{'B x S':>11} {'layout':>6} {'splits':>6} {'floor us':>8} {'kiln us':>8} "
              f"{'TB/s':>6} {'% copy':>6} {'cuDNN us':>8} {'TB/s':>6} {'FA us':>8} {'TB/s':>6} "
              f"{'/cuDNN':>7} {'/FA':>6} {'rel L2':>8}  ok")
    kb.print_header(header)
    failed = 0
    for r in rows:
        failed += not r["correct"]
        for layout in layouts:
            k = f"kiln_{layout}"
            print(f"{r['batch']:>4} x {r['keys']:<5} {layout:>6} {r['kiln_splits']:>6} "
                  f"{r['floor_us']:8.1f} {fmt(r, k + '_us', '8.1f'):>8} "
                  f"{fmt(r, k + '_tbps', '6.2f'):>6} {fmt(r, k + '_pct_of_copy', '5.1f'):>5}% "
                  f"{fmt(r, 'cudnn_us', '8.1f'):>8} {fmt(r, 'cudnn_tbps', '6.2f'):>6} "
                  f"{fmt(r, 'flash_us', '8.1f'):>8} {fmt(r, 'flash_tbps', '6.2f'):>6} "
                  f"{fmt(r, k + '_vs_cudnn', '6.2f'):>6}x {fmt(r, k + '_vs_flash', '5.2f'):>5}x "
                  f"{r[k + '_rel_l2']:8.2e}  {'yes' if k + '_us' in r else 'NO'}")
        if not r["correct"]:
            print(f"    {r['why']}")
        for peer in ("cudnn", "flash"):
            if f"{peer}_error" in r:
                print(f"    {peer}: {r[f'{peer}_error']}")
            elif r.get(f"{peer}_gqa") == "expanded":
                print(f"    {peer}: GQA refused, ran on K/V expanded to {r['q_heads']} heads "
                      f"({r.get(f'{peer}_note', '')})")
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
