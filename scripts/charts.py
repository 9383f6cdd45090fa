#!/usr/bin/env python3
"""charts.py [--check] [--out DIR]: docs/performance.md and its charts, from the committed evidence.

For each kernel group, reads the bench JSON that its kernels/<group>/README.md Speed section cites
as current (BENCHES below; the script fails if the README no longer cites that file or its
folder) and writes docs/performance/<group>.png: kiln against each peer, by shape, as ratios (peer
time / kiln time, so > 1 means kiln is faster; log scale, a line at 1), and kiln's share of the
ceiling measured in the same run (the copy bandwidth or the dense tensor-core GEMM rate; a line at
100%). Then docs/performance.md: one section per group with the chart, its caption (GPU, artifact
fingerprint, date of the run, the evidence file) and what it shows, every number taken from the
JSON here.

The output is deterministic: fixed figure sizes, dpi 100, matplotlib's built-in defaults (no user
matplotlibrc), no software or time stamp in the PNGs, and a pinned matplotlib
(MATPLOTLIB_VERSION, installed into .venv by scripts/setup.sh).

  .venv/bin/python scripts/charts.py           write docs/performance.md and docs/performance/*.png
  .venv/bin/python scripts/charts.py --check   regenerate into a temporary folder; exit 1, naming
                                               each file, if what is committed differs (a PNG
                                               counts as the same when its pixels are, whatever
                                               the zlib that compressed it), is missing or is
                                               not made by this script any more
  --out DIR                                    write (or with --check, compare against) DIR/
                                               performance.md and DIR/performance/ instead of docs/

Run it whenever a README's Speed section moves to new evidence (and update BENCHES); the CTest
unit.charts_check (tests/unit/CMakeLists.txt, registered when .venv has matplotlib) runs --check.
"""
import argparse
import io
import json
import os
import pathlib
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
MATPLOTLIB_VERSION = "3.11.2"

# Each group's current bench: the file(s) the Speed section of kernels/<group>/README.md cites
# (several files: passes of one run, drawn side by side; fmha: the wgmma kernel's run, then the
# run its README cites for the mma kernel). Order = order in docs/performance.md.
BENCHES = {
    "rmsnorm": ["evidence/h200_sm_90/2026-12-02-run2/rmsnorm_bench.json"],
    "decodeattn": [
        "evidence/h100_sm_90/2026-12-06-run17/dattn/p1/decodeattn_bench_cur.json",
        "evidence/h100_sm_90/2026-12-06-run17/dattn/p2/decodeattn_bench_cur.json",
    ],
    "fmha": [
        "evidence/h200_sm_90/2026-12-02-run8/fmha_bench_final.json",  # the wgmma kernel
        "evidence/h100_sm_90/2026-12-07-run9/fmha_bench_m4.json",  # its rows of the mma kernel
    ],
    "gdn": ["evidence/h100_sm_90/2026-12-07-run2/gdn_bench_cur.json"],
    "w4a16": ["evidence/h100_sm_90/2026-12-07-run3/w4a16_bench.json"],
    "moe": ["evidence/h100_sm_90/2026-12-07-run6/moe_bench.json"],
    "qkrope": ["evidence/h100_sm_90/2026-12-07-run5/qkrope_bench.json"],
    "decoderops": ["evidence/h100_sm_90/2026-12-07-run7/decoderops_bench.json"],
    "gemv": ["evidence/h100_sm_90/2026-12-07-run10/gemv_bench_B.json"],  # v2, candidate B
}

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
WIDTH_IN = 10.0
PANEL_IN = 2.45


class ChartError(Exception):
    pass


# ---------------------------------------------------------------- evidence


def readme_speed_section(group):
    text = (ROOT / "kernels" / group / "README.md").read_text()
    start = text.find("\n## Speed")
    if start < 0:
        raise ChartError(f"kernels/{group}/README.md has no '## Speed' section")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def check_benches():
    """Every file in BENCHES exists and is cited (itself or a folder above it) by its group's
    README Speed section: the table follows the READMEs' notion of current."""
    for group, files in BENCHES.items():
        speed = readme_speed_section(group)
        for f in files:
            if not (ROOT / f).is_file():
                raise ChartError(f"{f} (BENCHES['{group}'] in scripts/charts.py) does not exist")
            parts = pathlib.PurePosixPath(f).parts
            cited = [str(pathlib.PurePosixPath(*parts[:i])) + ("/" if i < len(parts) else "")
                     for i in range(3, len(parts) + 1)]
            if not any(c in speed for c in cited):
                raise ChartError(
                    f"kernels/{group}/README.md's Speed section does not cite {f} (nor a folder "
                    f"above it): update BENCHES in scripts/charts.py to the evidence it cites")


def load(path):
    with open(ROOT / path) as f:
        return json.load(f)


def ratio(row, field, kiln_us, peer_us):
    """row[field], the JSON's kiln / peer speed; checked against peer_us / kiln_us."""
    value = row.get(field)
    if value is None:
        return None
    if kiln_us in row and peer_us in row:
        expect = row[peer_us] / row[kiln_us]
        if abs(value - expect) > 1e-6 * max(1.0, expect):
            raise ChartError(f"{field} = {value} but {peer_us} / {kiln_us} = {expect}")
    return value


def meta_of(docs, files, per_file=False):
    """The caption: GPU, fingerprint, date and copy rate over docs (passes of one run). per_file
    (runs on different GPUs in one chart): "runs", each file's own, captioned one by one."""
    if per_file:
        runs = [meta_of([d], [f]) for d, f in zip(docs, files)]
        return {"gpu": " / ".join(unique(m["gpu"] for m in runs)), "files": files, "runs": runs}
    gpus = sorted({d["gpu"] for d in docs})
    fps = sorted({d["artifact_fingerprint"][:8] for d in docs})
    dates = sorted({d["date"][:10] for d in docs})
    copy = sorted(d["copy_tbps"] for d in docs if "copy_tbps" in d)
    return {
        "gpu": " / ".join(gpus),
        "fingerprint": " / ".join(fps),
        "date": " to ".join([dates[0], dates[-1]] if len(dates) > 1 else dates),
        "files": files,
        "copy": (f"{copy[0]:.2f}" if f"{copy[0]:.2f}" == f"{copy[-1]:.2f}"
                 else f"{copy[0]:.2f}-{copy[-1]:.2f}") if copy else None,
    }


def rfmt(v):
    """A ratio as the READMEs write one: two decimals, one from 10x up."""
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def rng(values, fmt=None, unit="x"):
    values = [v for v in values if v is not None]
    f = fmt.format if fmt else rfmt
    lo, hi = f(min(values)), f(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def slash(values):
    return " / ".join("-" if v is None else rfmt(v) for v in values)


def seq_label(s):
    return f"{s // 1024}k" if s >= 1024 and s % 1024 == 0 else str(s)


def unique(seq):
    out = []
    for v in seq:
        if v not in out:
            out.append(v)
    return out


def panel(title, kind, xlabel, x, series, note=None):
    return {"title": title, "kind": kind, "xlabel": xlabel, "x": x, "series": series, "note": note}


def line(label, values, color, style="-", marker="o", markers=None):
    return {"label": label, "values": values, "color": color, "style": style, "marker": marker,
            "markers": markers}


# ---------------------------------------------------------------- groups


def rmsnorm(files):
    d = load(files[0])
    rows = [r for r in d["cases"] if r.get("correct")]
    shapes = unique((r["rows"], r["hidden"]) for r in rows)
    x = [f"{a} x {b}" for a, b in shapes]
    keys = sorted(unique((r["op"], r["dtype"]) for r in rows),
                  key=lambda k: (k[0] != "plain", k[1]))
    at = {(r["op"], r["dtype"], r["rows"], r["hidden"]): r for r in rows}

    def values(key, fn):
        return [fn(at[key + s]) if key + s in at else None for s in shapes]

    ratios, ceil = [], []
    for i, key in enumerate(keys):
        label = f"{key[0]} {key[1]}"
        if key[0] == "fused":
            label += " (x + residual, then RMSNorm)"
        style = "-" if key[0] == "plain" else "--"
        color = COLORS[i]
        ratios.append(line(label, values(key, lambda r: ratio(r, "speedup_vs_torch", "kiln_us",
                                                              "torch_us")), color, style))
        ceil.append(line(label, values(key, lambda r: r["kiln_pct_of_copy"]), color, style))
    meta = meta_of([d], files)
    panels = [
        panel("kiln / eager PyTorch (F.rms_norm; fused: x + residual, then F.rms_norm), same "
              "process, same tensors", "ratio", "rows x hidden", x, ratios),
        panel(f"kiln, % of the copy bandwidth measured in the run ({meta['copy']} TB/s)",
              "ceiling", "rows x hidden", x, ceil),
    ]
    big = [r for r in rows if r["rows"] * r["hidden"] >= 4096 * 4096]
    small = [r for r in rows if r["rows"] <= 128]
    big_shapes = " and ".join(unique(f"{r['rows']} x {r['hidden']}" for r in big))

    def of(rs, op, f):
        return [f(r) for r in rs if r["op"] == op]

    below = [r for r in small if round(r["speedup_vs_torch"], 2) < 1.0]
    text = [
        f"At {big_shapes} (bf16 and fp16), the plain RMSNorm runs "
        f"{rng(of(big, 'plain', lambda r: r['speedup_vs_torch']))} faster than eager PyTorch at "
        f"{rng(of(big, 'plain', lambda r: r['kiln_pct_of_copy']), '{:.0f}', '%')} of the copy "
        f"bandwidth, the fused residual add + RMSNorm "
        f"{rng(of(big, 'fused', lambda r: r['speedup_vs_torch']))} at "
        f"{rng(of(big, 'fused', lambda r: r['kiln_pct_of_copy']), '{:.0f}', '%')}.",
        f"At {min(r['rows'] for r in small)} to {max(r['rows'] for r in small)} rows the op is "
        f"launch and latency bound (kiln {rng([r['kiln_us'] for r in small], '{:.1f}', ' us')}, "
        f"at most {max(r['kiln_pct_of_copy'] for r in small):.0f}% of copy): the fused form, which "
        f"saves PyTorch's second kernel, runs "
        f"{rng(of(small, 'fused', lambda r: r['speedup_vs_torch']))}, the plain one "
        f"{rng(of(small, 'plain', lambda r: r['speedup_vs_torch']))}; {len(below)} of "
        f"{len(small)} small-row cases are below 1.00x ("
        + ", ".join(f"{r['op']} {r['dtype']} at {r['rows']} row{'s' if r['rows'] > 1 else ''}: "
                    f"{r['speedup_vs_torch']:.2f}x"
                    for r in below) + ").",
    ]
    return meta, panels, text


def decodeattn(files):
    docs = [load(f) for f in files]
    r0 = docs[0]["rows"][0]
    lay = r0["layouts"][0]
    shapes = [(r["batch"], r["keys"]) for r in docs[0]["rows"]]
    x = [f"{b} x {k}" for b, k in shapes]
    peers = [("cudnn", "cuDNN"), ("flash", "FlashAttention-2")]
    passes = len(docs) > 1
    ratios, ceil = [], []
    for p, (peer, name) in enumerate(peers):
        for i, d in enumerate(docs):
            at = {(r["batch"], r["keys"]): r for r in d["rows"] if r.get("correct")}
            label = f"vs {name}" + (f", pass {i + 1}" if passes else "")
            ratios.append(line(label, [ratio(at[s], f"kiln_{lay}_vs_{peer}", f"kiln_{lay}_us",
                                             f"{peer}_us") if s in at else None for s in shapes],
                               COLORS[p], ["-", "--", ":"][i % 3], ["o", "x", "+"][i % 3]))
    for i, d in enumerate(docs):
        at = {(r["batch"], r["keys"]): r for r in d["rows"] if r.get("correct")}
        ceil.append(line("kiln" + (f", pass {i + 1}" if passes else ""),
                         [at[s][f"kiln_{lay}_pct_of_copy"] if s in at else None for s in shapes],
                         COLORS[2], ["-", "--", ":"][i % 3], ["o", "x", "+"][i % 3]))
    meta = meta_of(docs, files)
    cfg = (f"{r0['dtype']}, GQA {r0['q_heads']}/{r0['kv_heads']}, d{r0['head_dim']}, page "
           f"{r0['page_size']}, {lay.upper()}, {r0['page_order']} pages, T = {r0['query_tokens']}")
    panels = [
        panel(f"kiln / peer ({cfg}; the peers, through torch SDPA, read contiguous K / V)",
              "ratio", "batch x keys", x, ratios),
        panel(f"kiln, % of the copy bandwidth measured in the run ({meta['copy']} TB/s)", "ceiling",
              "batch x keys", x, ceil),
    ]
    cud = [[r[f"kiln_{lay}_vs_cudnn"] for r in d["rows"]] for d in docs]
    fla = [r[f"kiln_{lay}_vs_flash"] for d in docs for r in d["rows"]]
    pct = [r[f"kiln_{lay}_pct_of_copy"] for d in docs for r in d["rows"]]
    mid = [r[f"kiln_{lay}_pct_of_copy"] for d in docs for r in d["rows"]
           if (r["batch"], r["keys"]) == (32, 4096)]
    over = unique(f"{r['batch']} x {r['keys']}" for d in docs for r in d["rows"]
                  if r[f"kiln_{lay}_pct_of_copy"] > 100.0)
    text = [
        f"kiln / cuDNN at {' / '.join(x)}: " + "; ".join(
            slash(c) + (f" (pass {i + 1})" if passes else "") for i, c in enumerate(cud))
        + f"; against FlashAttention-2 kiln is {rng(fla)} as fast, though kiln reads randomly "
          f"permuted pages and both peers contiguous K / V.",
        f"kiln reads the KV cache at {rng(mid, '{:.1f}', '%')} of the copy bandwidth at 32 x 4096 "
        f"({rng(pct, '{:.0f}', '%')} across the shapes)"
        + (f"; a read-only stream can beat a copy, hence over 100% at {' and '.join(over)}."
           if over else "."),
    ]
    return meta, panels, text


def fmha(files):
    """files[0]: the wgmma kernel's bench (the FlashAttention-3 workload and GQA); files[1],
    where the Speed section cites a later run for the mma kernel: that bench's rows of kernel
    "mma" (the same workload, contiguous K / V, no window), drawn below on their own GPU's
    panels."""
    docs = [load(f) for f in files]
    d = docs[0]
    rows = [r for r in d["rows"] if r.get("correct")]
    mma = [r for r in (docs[1]["rows"] if len(docs) > 1 else [])
           if r.get("correct") and r.get("kernel") == "mma" and r.get("page_size", 0) == 0
           and r.get("window_left", -1) < 0 and "kiln_vs_cudnn" in r and "kiln_vs_flash" in r]
    seqs = sorted(unique(r["seq"] for r in rows + mma))
    x = [seq_label(s) for s in seqs]
    dt_color = {}

    def shape(r):
        return r["q_heads"] != r["kv_heads"], r["head_dim"], r["dtype"], r["mask"]

    def series(rows):
        """kiln / cuDNN, kiln / FlashAttention-2 and % of the GEMM rate: a line per head dim,
        dtype and mask; GQA a point each."""
        keys = unique(shape(r) for r in rows)
        keys.sort(key=lambda k: (k[0], -k[1], k[2], k[3] != "full"))
        ratios = {"cudnn": [], "flash": []}
        ceil = []
        for key in keys:
            gqa, hd, dt, mask = key
            sel = {r["seq"]: r for r in rows if shape(r) == key}
            r0 = next(iter(sel.values()))
            if not gqa:
                color = dt_color.setdefault((hd, dt), COLORS[len(dt_color)])
                label, marker = f"d{hd} {dt} {mask}", "o"
            else:
                color = "#000000"
                label = (f"GQA {r0['q_heads']}/{r0['kv_heads']} d{hd} {dt} {mask}, "
                         f"B {r0['batch']}")
                marker = "*" if mask == "full" else "P"  # drawn larger: one point each
            style = "-" if mask == "full" else "--"
            for peer in ratios:
                ratios[peer].append(line(label, [ratio(sel[s], f"kiln_vs_{peer}", "kiln_us",
                                                       f"{peer}_us") if s in sel else None
                                                 for s in seqs], color, style, marker))
            ceil.append(line(label, [sel[s]["kiln_pct_of_gemm"] if s in sel else None
                                     for s in seqs], color, style, marker))
        return ratios, ceil

    def gemm_txt(doc):
        return " / ".join(f"{k} {v:.0f}" for k, v in sorted(doc["gemm_tflops"].items()))

    meta = meta_of(docs, files, per_file=True)
    ratios, ceil = series(rows)
    kernel = f"wgmma kernel, {d['gpu']}: " if mma else ""
    panels = [
        panel(f"{kernel}kiln / cuDNN (torch SDPA), FlashAttention-3 workload (16k tokens, hidden "
              f"2048)", "ratio", "sequence length S", x, ratios["cudnn"]),
        panel(f"{kernel}kiln / FlashAttention-2 (torch SDPA)", "ratio", "sequence length S", x,
              ratios["flash"]),
        panel(f"{kernel}kiln, % of the dense tensor-core GEMM rate measured in the run (torch "
              f"GEMM, {gemm_txt(d)} TFLOP/s)", "ceiling", "sequence length S", x, ceil),
    ]
    cud = [r["kiln_vs_cudnn"] for r in rows]
    d128_long = [r["kiln_vs_cudnn"] for r in rows
                 if r["workload"] == "fa3" and r["head_dim"] == 128 and r["seq"] >= 4096]
    below = [r for r in rows if round(r["kiln_vs_cudnn"], 2) < 1.0]
    where = "; ".join(
        f"d{hd} at S = " + " / ".join(seq_label(s) for s in sorted(unique(
            r["seq"] for r in below if r["head_dim"] == hd)))
        for hd in sorted(unique(r["head_dim"] for r in below), reverse=True))
    fl = [r["kiln_vs_flash"] for r in rows]

    def peak_of(rows):
        p = max(rows, key=lambda r: r["kiln_tflops"])
        return (f"{p['kiln_tflops']:.0f} TFLOP/s ("
                + (f"GQA {p['q_heads']}/{p['kv_heads']}, " if p["q_heads"] != p["kv_heads"]
                   else "")
                + f"d{p['head_dim']} {p['dtype']} {p['mask']}, B {p['batch']}, "
                  f"S = {seq_label(p['seq'])}), {p['kiln_pct_of_gemm']:.0f}% of the "
                  f"{p['dtype']} GEMM rate measured in the same run ("
                  f"{p['gemm_tflops']:.0f} TFLOP/s)")

    text = [
        (f"The wgmma kernel ({d['gpu']}): k" if mma else "K")
        + f"iln / cuDNN spans {rng(cud)} over the {len(rows)} rows ({rng(d128_long)} at d128, "
          f"S >= 4k); it is below 1.00x on {len(below)} rows: {where}.",
        f"Against FlashAttention-2 kiln is {rng(fl)} as fast"
        + (" on every row." if min(fl) > 1.0 else "."),
        f"Peak: {peak_of(rows)}.",
    ]
    if mma:
        m = docs[1]
        m_ratios, m_ceil = series(mma)
        what = f"mma kernel, {m['gpu']}: "
        panels += [
            panel(f"{what}kiln / cuDNN (torch SDPA), the same workload", "ratio",
                  "sequence length S", x, m_ratios["cudnn"]),
            panel(f"{what}kiln / FlashAttention-2 (torch SDPA)", "ratio", "sequence length S", x,
                  m_ratios["flash"]),
            panel(f"{what}kiln, % of the dense tensor-core GEMM rate measured in the run (torch "
                  f"GEMM, {gemm_txt(m)} TFLOP/s)", "ceiling", "sequence length S", x, m_ceil),
        ]
        paged = [r["paged_vs_contiguous"] for r in m.get("derived", [])
                 if "paged_vs_contiguous" in r]
        text += [
            f"The mma kernel ({m['gpu']}, {len(mma)} rows, "
            + "/".join(unique(r["dtype"] for r in mma)) + ", "
            + "/".join(f"d{hd}" for hd in sorted(unique(r["head_dim"] for r in mma)))
            + f"): kiln / FlashAttention-2 {rng([r['kiln_vs_flash'] for r in mma])}, kiln / "
              f"cuDNN {rng([r['kiln_vs_cudnn'] for r in mma])}; peak {peak_of(mma)}"
            + (f"; paged K / V runs at {rng(paged, '{:.3f}')} the contiguous rate." if paged
               else "."),
        ]
    return meta, panels, text


def gdn(files):
    d = load(files[0])
    rows = [r for r in d["rows"] if r.get("correct")]
    batches = sorted(unique(r["batch"] for r in rows))
    x = [str(b) for b in batches]
    ops = {op: {r["batch"]: r for r in rows if r["op"] == op}
           for op in unique(r["op"] for r in rows)}
    tokens = {op: next(iter(v.values()))["tokens"] for op, v in ops.items()}
    names = {
        "decode": "decode",
        "final": f"T = {tokens.get('final')}, last state kept",
        "mtp": f"T = {tokens.get('mtp')}, every state kept",
        "gating": "fused gating",
    }
    color = {op: COLORS[i] for i, op in enumerate(["decode", "final", "mtp", "gating"])}

    def vals(op, field, peer_us):
        sel = ops.get(op, {})
        return [ratio(sel[b], field, "kiln_us", peer_us) if b in sel else None for b in batches]

    fla_name = d.get("fla", "flash-linear-attention").split(":")[0]
    p_fla = [
        line(names["decode"], vals("decode", "kiln_vs_fla", "fla_us"), color["decode"]),
        line(names["final"] + " (fla's work)", vals("final", "kiln_vs_fla", "fla_us"),
             color["final"]),
        line(names["mtp"] + ", vs fla's one call",
             vals("mtp", "kiln_vs_fla", "fla_us"), color["mtp"]),
        line(names["mtp"] + ", vs fla per token", vals("mtp", "kiln_vs_fla_steps",
                                                             "fla_steps_us"), color["mtp"], "--",
             "x"),
        line(names["gating"] + ", vs Triton gates + fla", vals("gating", "kiln_vs_fla", "fla_us"),
             color["gating"]),
    ]
    p_torch = [
        line("decode, eager", vals("decode", "kiln_vs_torch", "torch_us"), color["decode"]),
        line("decode, CUDA graph", vals("decode", "kiln_vs_torch_graph", "torch_graph_us"),
             color["decode"], "--", "x"),
        line(names["mtp"] + ", eager", vals("mtp", "kiln_vs_torch", "torch_us"), color["mtp"]),
        line(names["mtp"] + ", CUDA graph", vals("mtp", "kiln_vs_torch_graph",
                                                    "torch_graph_us"), color["mtp"], "--", "x"),
    ]
    p_gate = [
        line("vs Triton gates + gdn_decode",
             vals("gating", "kiln_vs_gates_kiln", "gates_kiln_us"), color["gating"]),
        line("vs eager gates + gdn_decode",
             vals("gating", "kiln_vs_torch_gates_kiln", "torch_gates_kiln_us"), color["gating"],
             "--", "x"),
    ]
    ceil = [line(names[op], [ops[op][b]["kiln_pct_of_copy"] if b in ops[op] else None
                             for b in batches], color[op]) for op in names if op in ops]
    meta = meta_of([d], files)
    r0 = rows[0]
    cfg = (f"{r0['dtype']}, H {r0['heads_qk']}, Hv {r0['heads_v']}, d {r0['head_dim_k']}")
    panels = [
        panel(f"kiln / {fla_name} (fla, fused recurrent kernel; multi-token: T = "
              f"{tokens.get('mtp')} draft tokens), {cfg}", "ratio", "batch", x, p_fla),
        panel("kiln / plain PyTorch (the same ops)", "ratio", "batch", x, p_torch),
        panel("fused gating (gdn_decode_gating) / separate gates (the Triton kernel vLLM and "
              "SGLang launch, or eager) + gdn_decode",
              "ratio", "batch", x, p_gate),
        panel(f"kiln, state bytes as % of the copy bandwidth measured in the run "
              f"({meta['copy']} TB/s)", "ceiling", "batch", x, ceil),
    ]

    def per(op, field):
        return slash([ops[op][b].get(field) if b in ops[op] else None for b in batches])

    bl = " / ".join(x)
    dec = ops["decode"]
    text = [
        f"At batch {bl}, decode runs {per('decode', 'kiln_vs_fla')}x as fast as fla, at "
        f"{dec[32]['kiln_pct_of_copy']:.1f}% of copy at batch 32 and "
        f"{dec[max(batches)]['kiln_pct_of_copy']:.1f}% at {max(batches)}; the multi-token step "
        f"that keeps only the last state (fla's work) {per('final', 'kiln_vs_fla')}x.",
        f"Keeping all {tokens['mtp']} states, kiln runs {per('mtp', 'kiln_vs_fla')}x as fast as "
        f"fla's one call (which writes only the last) and {per('mtp', 'kiln_vs_fla_steps')}x as "
        f"fast as fla called per token (the same work).",
        f"The fused gating runs {per('gating', 'kiln_vs_gates_kiln')}x as fast as a Triton "
        f"gating kernel followed by gdn_decode, and {per('gating', 'kiln_vs_torch_gates_kiln')}x "
        f"as fast as eager PyTorch gates followed by gdn_decode.",
    ]
    return meta, panels, text


def w4a16(files):
    d = load(files[0])
    rows = d["rows"]
    ms = sorted(unique(r["m"] for r in rows))
    x = [str(m) for m in ms]
    layers = unique(r["layer"] for r in rows)
    at = {(r["layer"], r["m"]): r for r in rows}
    shape = {r["layer"]: f"{r['n']} x {r['k']}" for r in rows}
    names = {"cublas": "cuBLAS on the dequantized bf16 weights (F.linear)",
             "tinygemm": "tinygemm (torch._weight_int4pack_mm)",
             "gemlite": f"gemlite {d.get('gemlite', '')} (A16Wn, Triton)".replace("  ", " ")}
    panels = []
    for peer in d["peers"]:
        series = []
        for i, layer in enumerate(layers):
            vs = []
            for m in ms:
                r = at.get((layer, m))
                ok = r is not None and r.get("kiln_ok") and r.get(f"{peer}_ok")
                vs.append(ratio(r, f"kiln_vs_{peer}", "kiln_us", f"{peer}_us") if ok else None)
            series.append(line(f"{layer} {shape[layer]}", vs, COLORS[i]))
        failed = sorted(unique(r["m"] for r in rows if r.get(f"{peer}_ok") is False))
        note = (f"not timed at m = {', '.join(map(str, failed))}: {peer} fails the output check"
                if failed else None)
        panels.append(panel(f"kiln / {names.get(peer, peer)}", "ratio", "m (tokens)", x, series,
                            note))
    gemm = d["gemm_tflops"]["bf16"]
    ceil = []
    for i, layer in enumerate(layers):
        vs, mk = [], []
        for m in ms:
            r = at.get((layer, m))
            if r is None or not r.get("kiln_ok"):
                vs.append(None)
                mk.append(None)
                continue
            copy_binds = r["kiln_pct_of_copy"] >= r["kiln_pct_of_gemm"]
            vs.append(max(r["kiln_pct_of_copy"], r["kiln_pct_of_gemm"]))
            mk.append("o" if copy_binds else "s")
        ceil.append(line(f"{layer} {shape[layer]}", vs, COLORS[i], markers=mk))
    meta = meta_of([d], files)
    panels.append(panel(
        f"kiln, % of the binding ceiling measured in the run: \u25cf copy of the int4 weights + "
        f"scales ({meta['copy']} TB/s), \u25a0 dense bf16 GEMM ({gemm:.0f} TFLOP/s)",
        "ceiling", "m (tokens)", x, ceil))

    def by_m(peer):
        return ", ".join(
            f"m {m} {rng([at[(l, m)].get(f'kiln_vs_{peer}') for l in layers if (l, m) in at])}"
            for m in ms)

    def ahead(peer):
        timed = [r for r in rows if r.get(f"kiln_vs_{peer}") is not None]
        behind = [r for r in timed if r[f"kiln_vs_{peer}"] < 1.0]
        return len(timed) - len(behind), len(timed), behind

    tg = ahead("tinygemm")
    gl = ahead("gemlite")
    not_timed = [r for r in rows if r.get("gemlite_ok") is False]
    best = max(rows, key=lambda r: r["kiln_pct_of_copy"])
    text = [
        f"kiln / cuBLAS, the range over the {len(layers)} layers at each m: {by_m('cublas')}; "
        f"the int4 weights "
        f"win while the weights' bytes bound the time, and the mma.sync tiles fall behind "
        f"cuBLAS's wgmma once the tensor cores do.",
        f"Ahead of tinygemm on {tg[0]} of {tg[1]} rows"
        + (" (behind at " + ", ".join(f"{r['layer']} m {r['m']}: {r['kiln_vs_tinygemm']:.2f}x"
                                      for r in tg[2]) + ")" if tg[2] else "")
        + f"; ahead of gemlite on {gl[0]} of {gl[1]} timed rows, gemlite failing the output "
          f"check on the other {len(not_timed)} (not timed).",
        f"The best share of the copy bandwidth is {best['kiln_pct_of_copy']:.1f}% "
        f"({best['layer']}, m {best['m']}).",
    ]
    return meta, panels, text


def moe(files):
    d = load(files[0])
    rows = [r for r in d["rows"] if r.get("correct")]
    ts = sorted(unique(r["tokens"] for r in rows))
    x = [str(t) for t in ts]
    models = unique(r["model"] for r in rows)
    at = {(r["model"], r["tokens"]): r for r in rows}
    gemm = d["gemm_tflops"]["bf16"]
    cfg = {m: d["models"][m] for m in models}
    names = {m: f"{m} ({c['experts']} experts, top {c['top_k']}, {c['hidden']} x "
                f"{c['intermediate']})" for m, c in cfg.items()}

    def vals(model, fn):
        return [fn(at[(model, t)]) if (model, t) in at else None for t in ts]

    def share(r, who):
        """(% of the binding ceiling, marker): the activated weights' bytes against the copy
        bandwidth (where the JSON has them) or the GEMM FLOPs against the dense GEMM rate."""
        copy = r.get(f"{who}_pct_of_copy")
        flops = r.get(f"{who}_pct_of_gemm", 100.0 * r[f"{who}_tflops"] / gemm)
        return (copy, "o") if copy is not None and copy >= flops else (flops, "s")

    ratios, ceil = [], []
    for i, m in enumerate(models):
        ratios.append(line(f"{names[m]}, the block",
                           vals(m, lambda r: ratio(r, "kiln_vs_torch", "kiln_us", "torch_us")),
                           COLORS[i]))
        ratios.append(line(f"{m}, the two GEMMs alone",
                           vals(m, lambda r: ratio(r, "kiln_vs_torch_gemms", "kiln_gemms_us",
                                                   "torch_gemms_us")), COLORS[i], "--", "x"))
        for who, label, style in (("kiln", "the block", "-"), ("kiln_gemms", "the GEMMs alone",
                                                                "--")):
            sh = vals(m, lambda r: share(r, who))
            ceil.append(line(f"{m}, {label}", [s[0] if s else None for s in sh], COLORS[i],
                             style, markers=[s[1] if s else None for s in sh]))
    meta = meta_of([d], files)
    panels = [
        panel(f"kiln / a PyTorch block of the same maths on torch._grouped_mm ({d['dtype']}; "
              f"router logits to y, both CUDA graphs)", "ratio", "T (tokens)", x, ratios),
        panel(f"kiln, % of the binding ceiling measured in the run: \u25cf copy of the activated "
              f"experts' weights ({meta['copy']} TB/s), \u25a0 dense {d['dtype']} GEMM "
              f"({gemm:.0f} TFLOP/s)", "ceiling", "T (tokens)", x, ceil),
    ]
    tl = " / ".join(x)
    big = max(ts)
    small = [r for r in rows if "kiln_pct_of_copy" in r]
    text = [
        f"The block against PyTorch's at T = {tl}: "
        + "; ".join(f"{m} {slash(vals(m, lambda r: r['kiln_vs_torch']))}x" for m in models)
        + "; the two GEMMs alone: "
        + "; ".join(f"{m} {slash(vals(m, lambda r: r['kiln_vs_torch_gemms']))}x" for m in models)
        + ".",
        f"At T = {big}, kiln's GEMMs run at "
        + " / ".join(f"{at[(m, big)]['kiln_gemms_tflops']:.0f}" for m in models)
        + " TFLOP/s against torch._grouped_mm's "
        + " / ".join(f"{at[(m, big)]['torch_gemms_tflops']:.0f}" for m in models)
        + f" ({' / '.join(models)}; dense {d['dtype']} GEMM {gemm:.0f} TFLOP/s in the same run); "
          f"the block takes "
        + " / ".join(f"{at[(m, big)]['kiln_us'] - at[(m, big)]['kiln_gemms_us']:.0f}" for m in
                     models)
        + " us more than its GEMMs in kiln, "
        + " / ".join(f"{at[(m, big)]['torch_us'] - at[(m, big)]['torch_gemms_us']:.0f}" for m in
                     models)
        + " us more in PyTorch (routing, alignment, gather, finalize).",
        f"At T <= {max(r['tokens'] for r in small)} the block reads the activated experts' "
        f"weights at {rng([r['kiln_pct_of_copy'] for r in small], '{:.0f}', '%')} of the copy "
        f"bandwidth, PyTorch's at "
        f"{rng([r['torch_pct_of_copy'] for r in small], '{:.0f}', '%')}.",
    ]
    return meta, panels, text


def qkrope(files):
    d = load(files[0])
    rows = [r for r in d["cases"] if r.get("correct")]
    ts = sorted(unique(r["tokens"] for r in rows))
    x = [seq_label(t) for t in ts]
    dts = unique(r["dtype"] for r in rows)
    at = {(r["dtype"], r["tokens"]): r for r in rows}

    def vals(dt, fn):
        return [fn(at[(dt, t)]) if (dt, t) in at else None for t in ts]

    ratios = [line(dt, vals(dt, lambda r: ratio(r, "speedup_vs_torch", "kiln_us", "torch_us")),
                   COLORS[i]) for i, dt in enumerate(dts)]
    ceil = [line(dt, vals(dt, lambda r: r["kiln_pct_of_copy"]), COLORS[i])
            for i, dt in enumerate(dts)]
    meta = meta_of([d], files)
    r0 = rows[0]
    cfg = f"{r0['q_heads']} query / {r0['kv_heads']} KV heads, head dim {r0['head_dim']}"
    panels = [
        panel(f"kiln (QK norm + RoPE + paged KV write, one kernel) / eager PyTorch of the same "
              f"maths, {cfg}", "ratio", "T (tokens)", x, ratios),
        panel(f"kiln, bytes read and written as % of the copy bandwidth measured in the run "
              f"({meta['copy']} TB/s)", "ceiling", "T (tokens)", x, ceil),
    ]
    big = ts[-2:]
    small = [r for r in rows if r["tokens"] not in big]

    def vals_at(t, field):
        return [at[(dt, t)][field] for dt in dts if (dt, t) in at]

    text = [
        f"kiln runs {rng([r['speedup_vs_torch'] for r in rows])} as fast as eager PyTorch on all "
        f"{len(rows)} rows ({' and '.join(dts)}, T = {x[0]} to {x[-1]}).",
        f"Up to {seq_label(max(r['tokens'] for r in small))} tokens the call is launch bound: "
        f"kiln {rng([r['kiln_us'] for r in small], '{:.1f}', ' us')} (PyTorch "
        f"{rng([r['torch_us'] for r in small], '{:.0f}', ' us')}), at most "
        f"{max(r['kiln_pct_of_copy'] for r in small):.0f}% of copy; "
        + ", ".join(f"at {seq_label(t)} tokens {rng(vals_at(t, 'kiln_us'), '{:.0f}', ' us')} at "
                    f"{rng(vals_at(t, 'kiln_pct_of_copy'), '{:.1f}', '%')} of copy"
                    for t in big) + ".",
    ]
    return meta, panels, text


def decoderops(files):
    """Three ops in one chart: a line per op and dtype (color by op, line style by dtype), x the
    tokens (embed, silu_mul) or rows (argmax) of each case."""
    d = load(files[0])
    rows = [r for r in d["cases"] if r.get("correct")]
    ns = sorted(unique(r["tokens"] for r in rows))
    x = [seq_label(n) for n in ns]
    ops = unique(r["op"] for r in rows)
    dts = sorted(unique(r["dtype"] for r in rows))
    at = {(r["op"], r["dtype"], r["tokens"]): r for r in rows}
    style = {dt: (["-", "--", ":"][i % 3], ["o", "x", "+"][i % 3]) for i, dt in enumerate(dts)}

    def vals(op, dt, fn):
        return [fn(at[(op, dt, n)]) if (op, dt, n) in at else None for n in ns]

    ratios, ceil = [], []
    for i, op in enumerate(ops):
        for dt in dts:
            st, mk = style[dt]
            ratios.append(line(f"{op} {dt}", vals(op, dt, lambda r: ratio(
                r, "speedup_vs_torch", "kiln_us", "torch_us")), COLORS[i], st, mk))
            ceil.append(line(f"{op} {dt}", vals(op, dt, lambda r: r["kiln_pct_of_copy"]),
                             COLORS[i], st, mk))
    meta = meta_of([d], files)
    of = {op: [r for r in rows if r["op"] == op] for op in ops}
    emb, silu, am = of.get("embed", []), of.get("silu_mul", []), of.get("argmax", [])
    shapes = []
    if emb:
        shapes.append(f"embed {emb[0]['width']} (table {emb[0]['table_rows']} rows)")
    if silu:
        shapes.append(f"silu_mul {silu[0]['width']}")
    if am:
        shapes.append(f"argmax {am[0]['width']}")
    panels = [
        panel(f"kiln / eager PyTorch (F.embedding, F.silu(g) * u, torch.argmax); width: "
              f"{', '.join(shapes)}", "ratio", "tokens (embed, silu_mul) or rows (argmax)", x,
              ratios),
        panel(f"kiln, bytes read and written as % of the copy bandwidth measured in the run "
              f"({meta['copy']} TB/s)", "ceiling", "tokens (embed, silu_mul) or rows (argmax)",
              x, ceil),
    ]

    def below(rs):
        return [r for r in rs if round(r["speedup_vs_torch"], 2) < 1.0]

    def case(r):
        n = r["tokens"]
        return f"{r['dtype']} at {n} token{'s' if n > 1 else ''} {r['speedup_vs_torch']:.2f}x"

    big = max(ns)
    text = []
    if silu:
        sb = [r for r in silu if r["tokens"] == big]
        text.append(
            f"silu_mul runs {rng([r['speedup_vs_torch'] for r in silu])} as fast as eager "
            f"PyTorch's `F.silu(g) * u` (two kernels and an intermediate) on all {len(silu)} rows; "
            f"at {big} tokens it moves its bytes at "
            f"{rng([r['kiln_pct_of_copy'] for r in sb], '{:.1f}', '%')} of the copy bandwidth "
            f"(PyTorch {rng([r['torch_pct_of_copy'] for r in sb], '{:.1f}', '%')}).")
    if emb:
        eb = [r for r in emb if r["tokens"] == big]
        lo = below(emb)
        text.append(
            f"embed runs {rng([r['speedup_vs_torch'] for r in emb])} against `F.embedding`, below "
            f"1.00x on {len(lo)} of {len(emb)} rows (" + ", ".join(case(r) for r in lo)
            + f"); at {big} tokens kiln reaches "
            f"{rng([r['kiln_pct_of_copy'] for r in eb], '{:.1f}', '%')} of copy, PyTorch "
            f"{rng([r['torch_pct_of_copy'] for r in eb], '{:.1f}', '%')}.")
    if am:
        one = [r for r in am if r["tokens"] == 1]
        many = [r for r in am if r["tokens"] > 1]
        text.append(
            f"argmax of one row is {rng([r['speedup_vs_torch'] for r in one])} PyTorch's speed "
            f"(kiln {rng([r['kiln_us'] for r in one], '{:.1f}', ' us')}, PyTorch "
            f"{rng([r['torch_us'] for r in one], '{:.1f}', ' us')}): kiln gives a row one block, "
            f"so one SM reads all {one[0]['width']} values"
            + (f"; at {many[0]['tokens']} rows it runs "
               f"{rng([r['speedup_vs_torch'] for r in many])} at "
               f"{rng([r['kiln_pct_of_copy'] for r in many], '{:.1f}', '%')} of copy."
               if many else "."))
    return meta, panels, text


GEMV_MODELS = {"qwen3": "the Qwen3 test model (hidden 2048)", "llama8b": "Llama-3-8B"}


def gemv(files):
    """x the tokens m, a line per layer (color by layer kind: qkv, o, ...): kiln / cuBLAS
    (F.linear), one panel per model (the case names' prefix), solid without and dashed with
    overlap_launch; then kiln's weight stream as % of the copy bandwidth, every model in one panel
    (line style by model)."""
    d = load(files[0])
    rows = [r for r in d["cases"] if r.get("correct") and "kiln_us" in r]
    dts = unique(r["dtype"] for r in rows)
    rows = [r for r in rows if r["dtype"] == dts[0]]  # the chart's dtype: the first timed
    ms = sorted(unique(r["m"] for r in rows))
    x = [str(m) for m in ms]

    def layer(r):
        return r["name"].rsplit("_m", 1)[0]

    def model(r):
        return layer(r).split("_", 1)[0]

    def kind(r):
        return layer(r).split("_", 1)[-1]

    models = unique(model(r) for r in rows)
    kinds = unique(kind(r) for r in rows)
    color = {k: COLORS[i % len(COLORS)] for i, k in enumerate(kinds)}
    styles = [("-", "o"), ("--", "x"), (":", "+"), ("-.", "s")]
    at = {(layer(r), r["m"]): r for r in rows}
    shape = {layer(r): f"{r['n']} x {r['k']}" + (", fp32 out" if r["out"] == "fp32" else "")
             for r in rows}

    def vals(lay, fn):
        return [fn(at[(lay, m)]) if (lay, m) in at else None for m in ms]

    def name(mod):
        return GEMV_MODELS.get(mod, mod)

    meta = meta_of([d], files)
    panels, ceil = [], []
    for mi, mod in enumerate(models):
        ratios = []
        for lay in unique(layer(r) for r in rows if model(r) == mod):
            c = color[lay.split("_", 1)[-1]]
            ratios.append(line(f"{lay.split('_', 1)[-1]} {shape[lay]}", vals(lay, lambda r: ratio(
                r, "speedup_vs_torch", "kiln_us", "torch_us")), c))
            # No legend entry of its own ("_" label): the title says what dashed is.
            ratios.append(line(f"_{lay} overlap", vals(lay, lambda r: ratio(
                r, "overlap_speedup_vs_torch", "kiln_overlap_us", "torch_us")), c, "--", "x"))
            st, mk = styles[mi % len(styles)]
            ceil.append(line(f"{lay} {shape[lay]}", vals(lay, lambda r: r["kiln_pct_of_copy"]),
                             c, st, mk))
        panels.append(panel(f"kiln / cuBLAS (torch F.linear), {dts[0]}, {name(mod)}; dashed: "
                            f"kiln with overlap_launch", "ratio", "m (tokens)", x, ratios))
    panels.append(panel(f"kiln, weight bytes as % of the copy bandwidth measured in the run "
                        f"({meta['copy']} TB/s)", "ceiling", "m (tokens)", x, ceil))
    one = [r for r in rows if r["m"] == 1]
    behind = [r for r in rows if round(r["speedup_vs_torch"], 2) < 1.0]
    lays = unique(layer(r) for r in rows)
    grow = [at[(lay, ms[-1])]["kiln_us"] / at[(lay, ms[0])]["kiln_us"] for lay in lays
            if (lay, ms[0]) in at and (lay, ms[-1]) in at]
    text = [
        f"At m = 1 kiln runs {rng([r['speedup_vs_torch'] for r in one])} cuBLAS's speed and "
        f"reads the weights at {rng([r['kiln_pct_of_copy'] for r in one], '{:.1f}', '%')} of the "
        f"copy bandwidth (cuBLAS {rng([r['torch_pct_of_copy'] for r in one], '{:.1f}', '%')}); "
        f"over m = {', '.join(x)}: {rng([r['speedup_vs_torch'] for r in rows])}, behind on "
        f"{len(behind)} of {len(rows)} rows"
        + (" (" + ", ".join(f"{r['name']} {r['speedup_vs_torch']:.2f}x" for r in behind) + ")"
           if behind else "") + ".",
    ]
    if grow and len(ms) > 1:
        text.append(f"m = {ms[-1]} takes {rng(grow)} the time of m = {ms[0]} on the same shape.")
    share = {mod: [r["kiln_pct_of_copy"] for r in rows if model(r) == mod] for mod in models}
    text.append("Share of the copy bandwidth over every m: "
                + "; ".join(f"{name(mod)} {rng(share[mod], '{:.1f}', '%')}" for mod in models)
                + ".")
    text.append(
        f"With overlap_launch (each launch a programmatic dependent of the one before, as in the "
        f"decoder): {rng([r['overlap_speedup_vs_torch'] for r in rows])} cuBLAS's speed.")
    return meta, panels, text


GROUPS = {"rmsnorm": rmsnorm, "decodeattn": decodeattn, "fmha": fmha, "gdn": gdn, "w4a16": w4a16,
          "moe": moe, "qkrope": qkrope, "decoderops": decoderops, "gemv": gemv}


# ---------------------------------------------------------------- drawing


def ratio_ticks(lo, hi):
    for cands in ([0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.2, 1.4, 1.6, 1.8, 2, 2.5, 3],
                  [0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 5, 7, 10],
                  [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200]):
        ticks = [t for t in cands if lo <= t <= hi]
        if lo >= cands[0] and hi <= cands[-1] and len(ticks) <= 7:
            return ticks
    return ticks


def draw(plt, group, meta, panels, path):
    import matplotlib.ticker as ticker

    n = len(panels)
    fig, axes = plt.subplots(n, 1, figsize=(WIDTH_IN, 0.6 + PANEL_IN * n), dpi=100,
                             layout="constrained")
    axes = [axes] if n == 1 else list(axes)
    for ax, p in zip(axes, panels):
        xs = list(range(len(p["x"])))
        allv = []
        for s in p["series"]:
            pts = [(i, v) for i, v in enumerate(s["values"]) if v is not None]
            if not pts:
                continue
            allv += [v for _, v in pts]
            ax.plot([i for i, _ in pts], [v for _, v in pts], color=s["color"],
                    linestyle=s["style"], linewidth=1.4,
                    marker=None if s["markers"] else s["marker"],
                    markersize=5 if len(pts) > 1 else 9,
                    label=s["label"])
            if s["markers"]:
                for i, v in pts:
                    ax.plot([i], [v], color=s["color"], marker=s["markers"][i], markersize=5,
                            linestyle="none")
        if p["kind"] == "ratio":
            lo = min(allv + [1.0]) / 1.12
            hi = max(allv + [1.0]) * 1.12
            ax.set_yscale("log")
            ax.set_ylim(lo, hi)
            ax.yaxis.set_major_locator(ticker.FixedLocator(ratio_ticks(lo, hi)))
            ax.yaxis.set_minor_locator(ticker.NullLocator())
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
            ax.axhline(1.0, color="black", linewidth=1.2, zorder=2.5)
            ax.set_ylabel("kiln / peer speed")
        else:
            ax.set_ylim(0, max(allv + [100.0]) * 1.08)
            ax.axhline(100.0, color="black", linewidth=1.2, zorder=2.5)
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}%"))
            ax.set_ylabel("% of ceiling")
        ax.set_xticks(xs, p["x"])
        ax.set_xlim(-0.4, len(xs) - 0.6)
        ax.set_xlabel(p["xlabel"], fontsize=9)
        ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
        ax.set_title(p["title"], loc="left", fontsize=9.5)
        if p["note"]:
            ax.text(0.005, 0.03, p["note"], transform=ax.transAxes, fontsize=8, color="#555555")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    fig.suptitle(f"{group}: " + "\n".join(f"{m['gpu']}, artifact {m['fingerprint']}, run of "
                                          f"{m['date']}" for m in meta.get("runs", [meta])),
                 fontsize=12, fontweight="bold")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    # An antialiased chart has a few hundred colors: a 256-color palette (median cut, no dither)
    # looks the same at a third of the bytes. PIL writes no text chunks (no software, no time).
    from PIL import Image

    buf.seek(0)
    with Image.open(buf) as img:
        pal = img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                           dither=Image.Dither.NONE)
    pal.save(path, format="PNG", optimize=True)


def markdown(sections):
    intro = (
        "Generated by `scripts/charts.py` from the committed evidence JSON; do not edit by hand. "
        "Each group's chart draws the bench its `kernels/<group>/README.md` Speed section cites "
        "as current. After new evidence: `.venv/bin/python scripts/charts.py`; "
        "`scripts/charts.py --check` (CTest `unit.charts_check`) fails while this page or a chart "
        "is stale.",
        "Ratios are kiln / peer speed (the peer's median time over kiln's, measured in the same "
        "process on the same inputs): above 1, kiln is faster; log scale, a line at 1. The last "
        "panel of each chart is kiln's share of the ceiling measured in the same run (the "
        "device-to-device copy bandwidth, or the dense tensor-core GEMM rate), a line at 100%. "
        "How the runs are made: [performance-method.md](performance-method.md); every run: "
        "[evidence/INDEX.md](../evidence/INDEX.md).",
    )
    out = ["# Performance charts", ""]
    for para in intro:
        out += textwrap.wrap(para, 100, break_long_words=False, break_on_hyphens=False) + [""]
    for group, meta, text in sections:
        caption = []
        for m in meta.get("runs", [meta]):
            files = ", ".join(f"[`{f}`](../{f})" for f in m["files"])
            copy = f", copy {m['copy']} TB/s" if m["copy"] else ""
            caption.append(f"{m['gpu']}{copy}, artifact {m['fingerprint']}, run of {m['date']}: "
                           f"{files}")
        out += [
            f"## {group}",
            "",
            f"![{group}: kiln against its peers, {meta['gpu']}](performance/{group}.png)",
            "",
            f"*{'; '.join(caption)}.*",
            "",
            " ".join(text),
            "",
            f"More: [kernels/{group}/README.md](../kernels/{group}/README.md#speed).",
            "",
        ]
    return "\n".join(out)


def generate(out_dir):
    """Write out_dir/performance.md and out_dir/performance/<group>.png; return the relative
    paths written."""
    import matplotlib

    if matplotlib.__version__ != MATPLOTLIB_VERSION:
        raise ChartError(f"matplotlib {matplotlib.__version__} in {sys.executable}; the charts "
                         f"are made with {MATPLOTLIB_VERSION} (scripts/setup.sh installs it into "
                         f".venv)")
    matplotlib.use("Agg")
    matplotlib.rcdefaults()  # matplotlib's own defaults, whatever matplotlibrc the user has
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "kiln"
    check_benches()
    (out_dir / "performance").mkdir(parents=True, exist_ok=True)
    sections, written = [], []
    for group, files in BENCHES.items():
        meta, panels, text = GROUPS[group](files)
        rel = f"performance/{group}.png"
        draw(plt, group, meta, panels, out_dir / rel)
        sections.append((group, meta, text))
        written.append(rel)
    (out_dir / "performance.md").write_text(markdown(sections))
    written.append("performance.md")
    return written


def same_png(a, b):
    from PIL import Image

    with Image.open(a) as ia, Image.open(b) as ib:
        return ia.size == ib.size and ia.mode == ib.mode and ia.tobytes() == ib.tobytes()


def check(docs_dir):
    """Regenerate into a temporary folder and compare with docs_dir; return the stale files."""
    stale = []
    with tempfile.TemporaryDirectory(prefix="kiln-charts-") as tmp:
        tmp = pathlib.Path(tmp)
        written = generate(tmp)
        for rel in written:
            mine, theirs = tmp / rel, docs_dir / rel
            shown = os.path.relpath(theirs, ROOT) if theirs.is_relative_to(ROOT) else str(theirs)
            if not theirs.is_file():
                stale.append(f"{shown}: missing")
            elif mine.read_bytes() == theirs.read_bytes():
                continue
            elif rel.endswith(".png") and same_png(mine, theirs):
                continue
            else:
                stale.append(f"{shown}: differs from what scripts/charts.py makes from the "
                             f"evidence")
        pngs = docs_dir / "performance"
        if pngs.is_dir():
            for f in sorted(pngs.glob("*.png")):
                if f"performance/{f.name}" not in written:
                    shown = os.path.relpath(f, ROOT) if f.is_relative_to(ROOT) else str(f)
                    stale.append(f"{shown}: not made by scripts/charts.py (no such group)")
    return stale


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary folder; fail if the committed files differ")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "docs",
                    help="folder holding performance.md and performance/ (default: docs/)")
    args = ap.parse_args(argv)
    try:
        if args.check:
            stale = check(args.out.resolve())
            for s in stale:
                print(f"charts.py --check: {s}", file=sys.stderr)
            if stale:
                print("charts.py --check: run .venv/bin/python scripts/charts.py and commit the "
                      "result", file=sys.stderr)
                return 1
            print("charts.py --check: docs/performance.md and its charts match the evidence")
            return 0
        for rel in generate(args.out.resolve()):
            print(f"wrote {args.out / rel}")
        return 0
    except ChartError as e:
        print(f"charts.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
