#!/usr/bin/env python3
"""One decodeattn benchmark row for a profiler: kiln (each page layout) and the cuDNN / FlashAttention
peers run once each inside an NVTX range named after them, on the inputs of
kernels/decodeattn/bench/decodeattn_vs_torch.py for the bench case of --batch x --keys
(kernels/decodeattn/tests/gpu/cases.h, read through the bridge). Run under Nsight Compute, e.g.

  ncu --nvtx --nvtx-include "kiln_nhd/" --nvtx-include "cudnn/" --clock-control none \\
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
      --section WarpStateStats python3 kernels/decodeattn/bench/decodeattn_profile.py --lib ... --batch 32 --keys 4096

Each call runs twice (the first one inside a range named <name>_warm, so a profiler that includes
only <name>/ sees the second, warm call).
"""
import argparse
import math
import sys

import torch
from torch.nn.attention import SDPBackend

import decodeattn_vs_torch as da


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_decodeattn.so")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--keys", type=int, default=4096)
    ap.add_argument("--page-size", type=int, default=None, help="default: the case's, 16")
    args = ap.parse_args()

    kiln = da.Kiln(args.lib)
    found = [c for c in kiln.cases if c["batch"] == args.batch and c["keys"] == args.keys]
    if not found:
        ap.error(f"no bench case of batch {args.batch} x keys {args.keys}; the cases: " +
                 ", ".join(f"{c['batch']} x {c['keys']}" for c in kiln.cases))
    case = found[0]
    page_size = args.page_size or case["page_size"]
    if case["keys"] % page_size != 0:
        ap.error(f"page size {page_size} does not divide the {case['keys']} keys")
    dtype = torch.bfloat16
    layouts = tuple(da.LAYOUT_CODE)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    s = da.make_set(case, case["query_tokens"], dtype, page_size, "random", layouts, gen)
    scale = case["scale_factor"] / math.sqrt(case["head_dim"])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    calls = {}
    for layout in layouts:
        shape = kiln.shape(dtype, case, page_size, s["num_pages"], s["pages_per_seq"],
                           case["max_seq_len"] or case["keys"], case["multiprocessors"] or sms,
                           layout, case["query_tokens"])
        ws = torch.empty(max(kiln.workspace_bytes(shape, scale), 16), dtype=torch.uint8,
                         device="cuda")
        calls[f"kiln_{layout}"] = (lambda shape=shape, ws=ws, layout=layout: kiln(
            shape, scale, s["out"], s["q_kiln"], s[f"k_cache_{layout}"], s[f"v_cache_{layout}"],
            s["table"], s["lens"], ws))
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("flash", SDPBackend.FLASH_ATTENTION)):
        peer = da.Peer(name, backend)
        if peer.prepare([s], scale)[0] is not None:
            calls[name] = lambda peer=peer: peer(s, scale)
    ref = da.reference(s, scale)
    for name, call in calls.items():
        for suffix in ("_warm", ""):
            torch.cuda.nvtx.range_push(name + suffix)
            out = call()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        got = s["out"].transpose(1, 2) if name.startswith("kiln") else out
        print(f"{name}: rel L2 {da.rel_l2(got, ref):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
