#!/usr/bin/env python3
"""kiln gdn_prefill (chunked Gated DeltaNet over prompts) vs flash-linear-attention's
chunk_gated_delta_rule, in one process, on the same data.

Rows: the prefill bench cases of kernels/gdn/tests/gpu/cases.h (kPrefillCases marked kBench, read
from the bridge): total tokens 1k, 4k, 16k, 64k in 1 sequence and in 8 equal ones, H = 16
query/key heads, Hv = 32 value heads, d_k = d_v = 128, bf16 (or --dtype fp16), given gates
(g = logsigmoid of a normal draw, the log decay as fla takes it; beta uniform in [0, 1]), each
sequence starting from a float32 state in a pool slot (a random permutation of the pool).

Per row:
  1. kiln (the runner: its chunk kernel and its state kernel, the workspace it asks for) and fla
     (chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state = the states gathered by slot,
     output_final_state=True, cu_seqlens, use_qk_l2norm_in_kernel=True), which returns the final
     states as a new tensor: no slot indirection, which favours it) are each checked against a
     float32 token-by-token recurrence in PyTorch (rows up to 16k tokens; the 64k rows compare kiln
     with fla only): relative L2 of the outputs and of the final states;
  2. both are timed with CUDA events (kiln_bench.timed: warm-up, then the median of the runs);
  3. reports us, tokens/s, TFLOP/s of the chunked form's nominal work (per token and value head
     3 d^2 + 4 C d multiply-adds, C = 64: the products w S, q S, k^T U and the chunk's k k^T,
     q k^T, the solve and attn U), that rate against the dense bf16 tensor-core rate measured in
     this run, and fla / kiln (> 1: kiln is faster).

Writes JSON to --json and prints the table; exit code 1 when a kiln check fails.
"""
import argparse
import ctypes
import functools
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "bench"))
import kiln_bench as kb  # noqa: E402

DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1}
CASE_FIELDS = (("sequences", int), ("length", int), ("heads_qk", int), ("heads_v", int))
BOUND = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}  # gdn_numerics_test.cpp's prefill bounds
CHUNK = 64
D = 128
L2_EPS = 1e-6
RUNS = 20
CHECK_MAX_TOKENS = 16384  # the float32 reference is a Python loop over the tokens


class Kiln(kb.Bridge):
    def __init__(self, path):
        super().__init__(path)
        f = self.lib.kiln_bench_gdn_prefill
        f.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_float] + [ctypes.c_void_p] * 12 + [
            ctypes.c_longlong, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        self.lib.kiln_bench_gdn_prefill_workspace.argtypes = [ctypes.POINTER(ctypes.c_int)]
        self.lib.kiln_bench_gdn_prefill_workspace.restype = ctypes.c_longlong
        self.cases = self.read_cases("gdn_prefill", CASE_FIELDS)

    def shape(self, dtype, s):
        values = [DTYPE_CODE[dtype], s["sequences"], s["H"], s["Hv"], D, D, s["slots"],
                  s["tokens"], s["length"]]
        return (ctypes.c_int * len(values))(*values)

    def workspace_bytes(self, dtype, s):
        return self.lib.kiln_bench_gdn_prefill_workspace(self.shape(dtype, s))

    def run(self, dtype, s):
        ptr = lambda t: None if t is None else t.data_ptr()  # noqa: E731
        code = self.lib.kiln_bench_gdn_prefill(
            self.shape(dtype, s), s["scale"], ptr(s["q"]), ptr(s["k"]), ptr(s["v"]), ptr(s["g"]),
            ptr(s["beta"]), None, ptr(s["out"]), ptr(s["state"]), ptr(s["slots_t"]),
            ptr(s["cu"]), None, ptr(s["ws"]), s["ws"].numel(),
            torch.cuda.current_stream().cuda_stream, self.message, len(self.message))
        if code != 0:
            raise RuntimeError(f"kiln_bench_gdn_prefill: {self.message.value.decode()}")


def make_set(case, dtype, gen, kiln):
    n, length, H, Hv = case["sequences"], case["length"], case["heads_qk"], case["heads_v"]
    T = n * length
    dev = "cuda"
    rnd = lambda *shape: torch.randn(*shape, generator=gen, device=dev)  # noqa: E731
    s = {"sequences": n, "length": length, "H": H, "Hv": Hv, "tokens": T, "slots": n + 2,
         "scale": D ** -0.5}
    s["q"] = rnd(T, H, D).to(dtype)
    s["k"] = rnd(T, H, D).to(dtype)
    s["v"] = rnd(T, Hv, D).to(dtype)
    s["g"] = F.logsigmoid(rnd(T, Hv)).float()
    s["beta"] = torch.rand(T, Hv, generator=gen, device=dev)
    s["pool"] = rnd(n + 2, Hv, D, D) * 0.1
    s["state"] = s["pool"].clone()
    s["slots_t"] = torch.randperm(n + 2, generator=gen, device=dev)[:n].to(torch.int32)
    s["cu"] = torch.arange(0, T + 1, length, device=dev, dtype=torch.int32)
    s["out"] = torch.empty(T, Hv, D, dtype=dtype, device=dev)
    s["ws"] = torch.empty(kiln.workspace_bytes(dtype, s), dtype=torch.uint8, device=dev)
    s["h0"] = s["pool"][s["slots_t"].long()].contiguous()
    return s


def reference(s):
    """Token by token in float32, vectorised over sequences and heads: (out [T, Hv, D], final
    states [n, Hv, D, D])."""
    n, L, H, Hv = s["sequences"], s["length"], s["H"], s["Hv"]
    group = Hv // H
    def norm(x):
        x = x.float().view(n, L, H, D).repeat_interleave(group, dim=2)
        return x / torch.sqrt((x * x).sum(-1, keepdim=True) + L2_EPS)
    q, k = norm(s["q"]), norm(s["k"])
    v = s["v"].float().view(n, L, Hv, D)
    g, beta = s["g"].view(n, L, Hv), s["beta"].view(n, L, Hv)
    S = s["h0"].clone()
    out = torch.empty(n, L, Hv, D, device="cuda")
    for t in range(L):
        S = S * torch.exp(g[:, t])[..., None, None]
        kt = k[:, t]
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("nhkv,nhk->nhv", S, kt))
        S = S + kt[..., :, None] * u[..., None, :]
        out[:, t] = s["scale"] * torch.einsum("nhkv,nhk->nhv", S, q[:, t])
    return out.view(n * L, Hv, D), S


def fla_prefill(chunk_fn, s):
    """fla's chunked forward over the set's packed sequences, from the states gathered by slot:
    (out [1, T, Hv, D], final states [n, Hv, D, D])."""
    return chunk_fn(s["q"][None], s["k"][None], s["v"][None], s["g"][None], s["beta"][None],
                    scale=s["scale"], initial_state=s["h0"], output_final_state=True,
                    cu_seqlens=s["cu"].long(), use_qk_l2norm_in_kernel=True)


def rel_l2(got, ref):
    return (torch.linalg.vector_norm((got.float() - ref).flatten())
            / torch.linalg.vector_norm(ref.flatten())).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path of libkiln_bench_gdn.so")
    ap.add_argument("--json", required=True)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    kiln = Kiln(args.lib)
    props = torch.cuda.get_device_properties(0)
    seed, gen = kb.start_seed(args.seed)
    try:
        import fla
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        fla_note = (f"flash-linear-attention {getattr(fla, '__version__', '?')}: "
                    "chunk_gated_delta_rule")
    except Exception as e:  # noqa: BLE001 - no fla: kiln's rows alone
        chunk_gated_delta_rule, fla_note = None, f"fla not importable: {kb.error_line(e)}"
    result = kb.result_header("gdn_prefill_vs_fla", props, kb.l2_bytes_of(props), kiln, seed,
                              {"fla": fla_note})
    busy = 400000  # ~200 us of GPU work ahead of each timed call
    kb.measure_copy(result)
    tensor_tflops = kb.gemm_tflops(dtype, busy)
    result["dense_gemm_tflops"] = tensor_tflops
    print(f"{props.name}, artifact {kiln.tag} {kiln.fingerprint[:16]}; {fla_note}; dense "
          f"{args.dtype} GEMM {tensor_tflops:.0f} TFLOP/s")
    rows, failed = [], 0
    for case in kiln.cases:
        s = make_set(case, dtype, gen, kiln)
        T, Hv = s["tokens"], s["Hv"]
        row = {"name": case["name"], "tokens": T, "sequences": s["sequences"], "heads_v": Hv,
               "workspace_mib": s["ws"].numel() / 2 ** 20}
        fla_fn = (None if chunk_gated_delta_rule is None
                  else functools.partial(fla_prefill, chunk_gated_delta_rule))
        kiln.run(dtype, s)
        torch.cuda.synchronize()
        k_out, k_state = s["out"].clone(), s["state"][s["slots_t"].long()]
        f_out = f_state = None
        if fla_fn is not None:
            try:
                f_out, f_state = fla_fn(s)
                f_out = f_out[0]
            except Exception as e:  # noqa: BLE001 - a failing peer is recorded
                row["fla_error"] = kb.error_line(e)
        if T <= CHECK_MAX_TOKENS:
            r_out, r_state = reference(s)
            row["kiln_out_rel"] = rel_l2(k_out, r_out)
            row["kiln_state_rel"] = rel_l2(k_state, r_state)
            ok = row["kiln_out_rel"] <= BOUND[dtype] and row["kiln_state_rel"] <= BOUND[dtype]
            if f_out is not None:
                row["fla_out_rel"] = rel_l2(f_out, r_out)
                row["fla_state_rel"] = rel_l2(f_state, r_state)
        else:
            ok = bool(torch.isfinite(k_out).all())
        if f_out is not None:
            row["kiln_vs_fla_out_rel"] = rel_l2(k_out, f_out.float())
        row["kiln_ok"] = ok
        failed += not ok
        nominal = 2.0 * T * Hv * (3 * D * D + 4 * CHUNK * D)
        med, _ = kb.timed(lambda x: kiln.run(dtype, x), [s], RUNS, 3, busy)
        row.update({"kiln_us": med * 1e3, "kiln_tflops": nominal / (med * 1e-3) / 1e12,
                    "kiln_mtok_s": T / (med * 1e-3) / 1e6})
        row["kiln_vs_tensor"] = row["kiln_tflops"] / tensor_tflops
        if fla_fn is not None and "fla_error" not in row:
            med_f, _ = kb.timed(fla_fn, [s], RUNS, 3, busy)
            row.update({"fla_us": med_f * 1e3, "fla_tflops": nominal / (med_f * 1e-3) / 1e12,
                        "kiln_vs_fla": med_f / med})
        rows.append(row)
        print(f"{row['name']:>24} T {T:6d}  kiln {row['kiln_us']:9.1f} us "
              f"{row['kiln_tflops']:6.1f} TF/s  fla {row.get('fla_us', float('nan')):9.1f} us  "
              f"fla/kiln {row.get('kiln_vs_fla', float('nan')):5.2f}  out rel "
              f"{row.get('kiln_out_rel', float('nan')):.2e} (fla "
              f"{row.get('fla_out_rel', float('nan')):.2e})  {'ok' if ok else 'FAIL'}")
        del s
        torch.cuda.empty_cache()
    result["rows"] = rows
    result["clocks_after"] = kb.clocks()
    return kb.finish(args.json, result, failed)


if __name__ == "__main__":
    sys.exit(main())
