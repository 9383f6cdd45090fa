#!/usr/bin/env python3
"""kiln gdn (Gated DeltaNet decode) vs plain PyTorch, in one process, on the same data.

Loads the ctypes bridge (libkiln_bench_gdn.so, see bench/CMakeLists.txt), then for each batch
(1, 8, 32, 256), bf16, H = 16 query/key heads, Hv = 32 value heads, d_k = d_v = 128, one token per
sequence, a float32 state pool [num_slots, Hv, 128, 128] indexed by a permuted slot per sequence:

  1. checks kiln, and the PyTorch peers, against a float64 torch reference of the same recurrence
     (q, k L2-normalised; S <- exp(g) S; u = beta (v - S^T k); S <- S + k u^T; o = scale S^T q):
     relative L2 of the output (kiln within the PERF.md bf16 bound 1.2e-2) and of the updated
     state (1e-4: fp32 in and out, tests/gpu/gdn_numerics_test.cpp) before any timing;
  2. times kiln (the runner, one kernel, state updated in place) and the peers with CUDA events:
     warm-up, then the median of the timed runs, rotating through enough input sets that they
     exceed 4x the L2; torch.cuda._sleep ahead of each timed run keeps the GPU busy while the host
     enqueues, so the events bracket device time only. The peers are the same recurrence written
     in PyTorch, vectorised over batch and heads, fp32 state gathered by slot and scattered back
     (index_copy_): "torch" in eager mode, and "torch_graph" the same ops captured in a CUDA graph
     (one graph per input set) to take the launch overhead out;
  3. reports TB/s of state bytes (read + written: 2 * B * Hv * 128 * 128 * 4), % of the
     device-to-device copy bandwidth measured in this run, the floor (state bytes / copy
     bandwidth), and kiln / peer ratios.

flash-linear-attention (fla) is not installed on the benchmark machine, so it is not a peer; the
output says so. SM and memory clocks are logged (nvidia-smi) before and after. Writes JSON to
--json and prints a table. Exit code 1 when kiln's correctness check fails.
"""
import argparse
import ctypes
import math
import sys

import torch

import kiln_bench as kb

REL_L2_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}  # PERF.md, Method 2
STATE_BOUND = 1e-4  # the state is fp32 in and out (tests/gpu/gdn_numerics_test.cpp says why)
DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
DTYPE_NAME = {torch.float16: "fp16", torch.bfloat16: "bf16"}
BATCHES = [1, 8, 32, 256]
HEADS_QK, HEADS_V, DK, DV = 16, 32, 128, 128
L2_EPS = 1e-6
FLA_NOTE = ("flash-linear-attention (fla) is not available on this machine: not benchmarked; "
            "the peers are plain PyTorch")


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        self.lib.kiln_bench_gdn_shape_fields.restype = ctypes.c_int
        self.fields = self.lib.kiln_bench_gdn_shape_fields()
        f = self.lib.kiln_bench_gdn
        f.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_float] + [ctypes.c_void_p] * 9 + [
            ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        self.variants = []
        i = 0
        while True:
            name = ctypes.create_string_buffer(128)
            dk, dv, dtype = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
            if self.lib.kiln_bench_variant(i, name, 128, ctypes.byref(dk), ctypes.byref(dv),
                                           ctypes.byref(dtype)) != 0:
                break
            self.variants.append((name.value.decode(), dk.value, dv.value, dtype.value))
            i += 1

    def has(self, dk, dv, dtype):
        return any(a == dk and b == dv and d == DTYPE_CODE[dtype] for _, a, b, d in self.variants)

    def shape(self, dtype, batch, num_slots):
        values = [DTYPE_CODE[dtype], batch, HEADS_QK, HEADS_V, DK, DV, num_slots]
        assert len(values) == self.fields
        return (ctypes.c_int * self.fields)(*values)

    def __call__(self, shape, scale, s):
        stream = torch.cuda.current_stream().cuda_stream
        rc = self.lib.kiln_bench_gdn(
            shape, scale, s["q"].data_ptr(), s["k"].data_ptr(), s["v"].data_ptr(),
            s["g"].data_ptr(), s["beta"].data_ptr(), s["out"].data_ptr(), s["state"].data_ptr(),
            s["slots"].data_ptr(), stream, self.message, len(self.message))
        if rc != 0:
            raise RuntimeError(f"kiln gdn: {self.message.value.decode()}")


def torch_gdn(q, k, v, g, beta, state, slots, scale, compute=torch.float32):
    """The recurrence in plain PyTorch, vectorised over batch and heads; state updated in place.
    q, k [B, H, dk]; v [B, Hv, dv]; g, beta [B, Hv]; state [N, Hv, dk, dv]; slots [B] int64.
    Returns o [B, Hv, dv] in `compute` (the caller casts)."""
    group = v.shape[1] // q.shape[1]
    qf = q.to(compute)
    kf = k.to(compute)
    qf = qf * torch.rsqrt((qf * qf).sum(-1, keepdim=True) + L2_EPS)
    kf = kf * torch.rsqrt((kf * kf).sum(-1, keepdim=True) + L2_EPS)
    qf = qf.repeat_interleave(group, dim=1)  # [B, Hv, dk]: value head hv reads head hv // group
    kf = kf.repeat_interleave(group, dim=1)
    S = state.index_select(0, slots).to(compute)  # [B, Hv, dk, dv]
    S = S * torch.exp(g.to(compute))[..., None, None]
    kv = torch.einsum("bhk,bhkv->bhv", kf, S)
    u = beta.to(compute)[..., None] * (v.to(compute) - kv)
    S = S + kf[..., :, None] * u[..., None, :]
    o = scale * torch.einsum("bhk,bhkv->bhv", qf, S)
    state.index_copy_(0, slots, S.to(state.dtype))
    return o


def make_set(batch, dtype, gen):
    num_slots = batch + batch // 4 + 2
    perm = torch.randperm(num_slots, device="cuda", generator=gen)[:batch]
    q = torch.randn(batch, HEADS_QK, DK, device="cuda", generator=gen).to(dtype)
    k = torch.randn(batch, HEADS_QK, DK, device="cuda", generator=gen).to(dtype)
    v = torch.randn(batch, HEADS_V, DV, device="cuda", generator=gen).to(dtype)
    g = -torch.rand(batch, HEADS_V, device="cuda", generator=gen)  # in (-1, 0]
    beta = torch.rand(batch, HEADS_V, device="cuda", generator=gen)
    state = torch.randn(num_slots, HEADS_V, DK, DV, device="cuda", generator=gen) * 0.5
    return {"q": q, "k": k, "v": v, "g": g, "beta": beta, "state": state,
            "slots": perm.to(torch.int32).contiguous(), "slots64": perm.contiguous(),
            "out": torch.empty(batch, HEADS_V, DV, dtype=dtype, device="cuda"),
            "num_slots": num_slots}


def rel_l2(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


def torch_eager(s, scale):
    s["out"].copy_(torch_gdn(s["q"], s["k"], s["v"], s["g"], s["beta"], s["state"], s["slots64"],
                             scale))


def bench_row(kiln, batch, dtype, copy_tbps, l2_bytes, gen, busy_cycles):
    scale = 1.0 / math.sqrt(DK)
    state_bytes = 2 * batch * HEADS_V * DK * DV * 4  # read + written
    nsets = kb.rotation_sets(state_bytes // 2, l2_bytes, 8)
    sets = [make_set(batch, dtype, gen) for _ in range(nsets)]
    s0 = sets[0]
    shape = kiln.shape(dtype, batch, s0["num_slots"])
    row = {"dtype": DTYPE_NAME[dtype], "batch": batch, "heads_qk": HEADS_QK, "heads_v": HEADS_V,
           "head_dim_k": DK, "head_dim_v": DV, "num_slots": s0["num_slots"],
           "state_bytes": state_bytes, "input_sets": nsets,
           "floor_us": state_bytes / (copy_tbps * 1e12) * 1e6}

    # Correctness on set 0, before any timing: each implementation on its own copy of the state.
    state0 = s0["state"].clone()
    ref_state = state0.double()
    ref_out = torch_gdn(s0["q"], s0["k"], s0["v"], s0["g"], s0["beta"], ref_state, s0["slots64"],
                        scale, compute=torch.float64)
    live = s0["slots64"]

    def check(name, fn):
        s0["state"].copy_(state0)
        s0["out"].fill_(float("nan"))
        fn(s0)
        torch.cuda.synchronize()
        out_rel = rel_l2(s0["out"], ref_out)
        st_rel = rel_l2(s0["state"][live], ref_state[live])
        # Slots no sequence owns must be bit-identical.
        mask = torch.ones(s0["num_slots"], dtype=torch.bool, device="cuda")
        mask[live] = False
        untouched = bool(torch.equal(s0["state"][mask], state0[mask]))
        ok = (bool(torch.isfinite(s0["out"]).all().item()) and out_rel <= REL_L2_BOUND[dtype]
              and st_rel <= STATE_BOUND and untouched)
        row.update({f"{name}_rel_l2": out_rel, f"{name}_state_rel_l2": st_rel,
                    f"{name}_correct": ok})
        if not ok:
            row[f"{name}_why"] = (f"out rel L2 {out_rel:.3g} (bound {REL_L2_BOUND[dtype]}), state "
                                  f"rel L2 {st_rel:.3g} (bound {STATE_BOUND}), unowned slots "
                                  f"{'untouched' if untouched else 'CHANGED'}")
        return ok

    ok = check("kiln", lambda s: kiln(shape, scale, s))
    row["correct"] = ok
    if not ok:
        row["why"] = row["kiln_why"]
    torch_ok = check("torch", lambda s: torch_eager(s, scale))
    s0["state"].copy_(state0)
    del ref_state, ref_out, state0

    runs = 50
    if ok:
        med, mn = kb.timed(lambda s: kiln(shape, scale, s), sets, runs, 10, busy_cycles)
        row.update({"kiln_us": med * 1e3, "kiln_min_us": mn * 1e3,
                    "kiln_tbps": kb.tbps(state_bytes, med)})
        row["kiln_pct_of_copy"] = 100 * row["kiln_tbps"] / copy_tbps
    peers = [("torch", lambda s: torch_eager(s, scale))]
    # torch_graph: the eager ops captured once per input set, replayed on it.
    graphs = {}
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for s in sets:  # warm-up outside capture (allocator, kernels)
                torch_eager(s, scale)
        torch.cuda.current_stream().wait_stream(side)
        for i, s in enumerate(sets):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                torch_eager(s, scale)
            graphs[i] = graph
        torch.cuda.synchronize()
        index = {id(s): i for i, s in enumerate(sets)}
        peers.append(("torch_graph", lambda s: graphs[index[id(s)]].replay()))
    except Exception as e:  # noqa: BLE001 - a capture failure is recorded, the run goes on
        row["torch_graph_error"] = f"capture: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    row["torch_graph_rel_l2_note"] = "same ops as torch (eager), checked there"
    for key, fn in peers:
        try:
            med, mn = kb.timed(fn, sets, runs, 10, busy_cycles)
        except Exception as e:  # noqa: BLE001
            row[f"{key}_error"] = f"timing: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
            continue
        row.update({f"{key}_us": med * 1e3, f"{key}_min_us": mn * 1e3,
                    f"{key}_tbps": kb.tbps(state_bytes, med)})
        if "kiln_us" in row:
            row[f"kiln_vs_{key}"] = med / (row["kiln_us"] * 1e-3)  # > 1: kiln is faster
    if not torch_ok:
        row["torch_note"] = "the torch peer failed its own correctness check: " + row["torch_why"]
    del sets, graphs
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_gdn.so")
    ap.add_argument("--json", required=True, help="where to write the results")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()

    kiln = Kiln(args.lib)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    props = torch.cuda.get_device_properties(0)
    l2_bytes = kb.l2_bytes_of(props)
    seed, gen = kb.start_seed(args.seed)
    busy_cycles = 400000  # ~200 us of GPU work ahead of each timed call

    try:
        import fla  # noqa: F401
        fla_note = "flash-linear-attention is importable but not benchmarked by this script"
    except ImportError:
        fla_note = FLA_NOTE
    result = kb.result_header("gdn_vs_torch", props, l2_bytes, kiln, seed, {"fla": fla_note})
    copy_tbps = kb.measure_copy(result)
    print(f"{props.name} sm_{result['sm']} ({props.multi_processor_count} SMs), driver "
          f"{result['driver']}, torch {torch.__version__}; artifact {kiln.tag} "
          f"{kiln.fingerprint[:16]}; seed {seed}")
    print(fla_note)
    kb.print_copy(result)

    rows = []
    if not kiln.has(DK, DV, dtype):
        print(f"gdn_decode_dk{DK}_dv{DV}_{args.dtype} is not in the artifact")
        result["rows"] = rows
        result["failed_checks"] = 1
        kb.write_json(args.json, result)
        return 1
    for batch in BATCHES:
        rows.append(bench_row(kiln, batch, dtype, copy_tbps, l2_bytes, gen, busy_cycles))
    result["rows"] = rows
    result["clocks_after"] = kb.clocks()

    def fmt(row, key, spec):
        return format(row[key], spec) if key in row else "-"

    header = (f"{'B':>4} {'floor us':>8} {'kiln us':>8} {'TB/s':>6} {'% copy':>6} "
              f"{'torch us':>8} {'graph us':>8} {'/torch':>7} {'/graph':>7} {'out L2':>8} "
              f"{'state L2':>8}  ok")
    kb.print_header(header)
    failed = 0
    for r in rows:
        failed += not r["correct"]
        print(f"{r['batch']:>4} {r['floor_us']:8.1f} {fmt(r, 'kiln_us', '8.1f'):>8} "
              f"{fmt(r, 'kiln_tbps', '6.2f'):>6} {fmt(r, 'kiln_pct_of_copy', '5.1f'):>5}% "
              f"{fmt(r, 'torch_us', '8.1f'):>8} {fmt(r, 'torch_graph_us', '8.1f'):>8} "
              f"{fmt(r, 'kiln_vs_torch', '6.2f'):>6}x {fmt(r, 'kiln_vs_torch_graph', '6.2f'):>6}x "
              f"{r['kiln_rel_l2']:8.2e} {r['kiln_state_rel_l2']:8.2e}  "
              f"{'yes' if r['correct'] else 'NO ' + r.get('why', '')}")
        for key in ("torch_error", "torch_graph_error", "torch_note"):
            if key in r:
                print(f"    {key}: {r[key]}")
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
