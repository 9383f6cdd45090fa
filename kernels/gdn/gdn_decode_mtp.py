# Gated DeltaNet multi-token decode (speculative-decoding verify: T = 1..max_tokens draft tokens per
# sequence in one launch) in CuTe DSL, for kiln's cute_dsl front end (docs/cute-dsl.md). Per
# sequence b and value head hv (query/key head h = hv / (Hv / H)), starting from
# S = state[slots[b], hv] (float32, d_k x d_v, row-major), for t = 0..T-1 one token of the gated
# delta rule (gdn_rule.py, shared with gdn_decode.py):
#   q, k <- L2-normalised;  S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = scale S^T q
# then cache[b, t, hv] = S (the state after token t) and o[b, t, hv] = o. The pool state is only
# read (SGLang's verify with disable_state_update): the runtime accepts n tokens and copies
# cache[b, n - 1] into the slot itself. A negative slot skips the sequence (neither its outputs nor
# its cache entries are written).
#
# Launch: the decode grid (kernels/gdn/launch.h), grid = (d_v / tile_v, Hv, batch), block =
# tile_v = 32 threads (one warp); thread j owns one state column in registers across all T tokens,
# so the pool is read once and each token's state written once (coalesced rows). Per token the
# warp normalises q and k once into shared memory (gdn_rule.stage_qk). T is a run-time loop bound.
#
# Arguments (plain pointers and 32-bit integers, as gdn_decode.py):
#   q, k  [batch, T, H, d_k] dtype      v, o  [batch, T, Hv, d_v] dtype
#   g, beta [batch, T, Hv] float32      state [num_slots, Hv, d_k, d_v] float32 (read only)
#   slots [batch] int32                 cache [batch, T, Hv, d_k, d_v] float32
#   scale float32; heads_qk (H), heads_v (Hv), tokens (T) int32
import cutlass
import cutlass.cute as cute

import gdn_rule as rule

_DTYPES = {"fp16": cutlass.Float16, "bf16": cutlass.BFloat16}


def kiln_export(kiln):
    dk = kiln.constants["head_dim_k"]
    dv = kiln.constants["head_dim_v"]
    tile_v = kiln.constants["tile_v"]
    dtype = _DTYPES[kiln.constants["dtype"]]
    f32 = cutlass.Float32
    i64 = cutlass.Int64
    rule.check_tile(tile_v, dk)

    @cute.kernel
    def decode_mtp(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
                   beta: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
                   cache: cute.Pointer, scale: cutlass.Float32, heads_qk: cutlass.Int32,
                   heads_v: cutlass.Int32, tokens: cutlass.Int32):
        j, _, _ = cute.arch.thread_idx()
        vx, hv, b, = cute.arch.block_idx()
        q_s, k_s = rule.qk_buffers(dk)
        slot = rule.scalar(slots + b)
        if slot >= 0:
            h = hv // (heads_v // heads_qk)
            col = vx * tile_v + j
            S = rule.vector(state + (i64(slot) * heads_v + hv) * (dk * dv) + col, dk, dv)
            column = cute.make_rmem_tensor(cute.make_layout(dk), f32)
            rule.load_column(column, S, dk)
            for t in cutlass.range(tokens):
                token = i64(b) * tokens + t  # row of the [batch, T, ...] inputs and outputs
                head = token * heads_v + hv  # (token, value head): g, beta, v, o, cache
                qh = rule.vector(q + (token * heads_qk + h) * dk, dk)
                kh = rule.vector(k + (token * heads_qk + h) * dk, dk)
                C = rule.vector(cache + head * (dk * dv) + col, dk, dv)
                cute.arch.sync_warp()  # every lane is done with the previous token's q_s, k_s
                rule.stage_qk(q_s, k_s, qh, kh, j, dk)
                cute.arch.sync_warp()
                out = rule.step(column, C, q_s, k_s, rule.scalar(v + head * dv + col).to(f32),
                                rule.scalar(g + head), rule.scalar(beta + head), scale, dk)
                cute.make_tensor(o + head * dv + col, cute.make_layout(1))[0] = out.to(dtype)

    @cute.jit
    def launch(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
               beta: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               cache: cute.Pointer, scale: cutlass.Float32, heads_qk: cutlass.Int32,
               heads_v: cutlass.Int32, tokens: cutlass.Int32, batch: cutlass.Int32):
        decode_mtp(q, k, v, g, beta, o, state, slots, cache, scale, heads_qk, heads_v,
                   tokens).launch(grid=[dv // tile_v, heads_v, batch], block=[tile_v, 1, 1])

    kiln.entry("kiln_gdn_decode_mtp", decode_mtp)
    gmem = cute.AddressSpace.gmem

    def ptr(t, align):
        return cute.runtime.make_ptr(t, 0, gmem, assumed_align=align)

    return cute.compile(launch, ptr(dtype, 16), ptr(dtype, 16), ptr(dtype, 16), ptr(f32, 4),
                        ptr(f32, 4), ptr(dtype, 16), ptr(f32, 16), ptr(cutlass.Int32, 4),
                        ptr(f32, 16), f32(1.0), cutlass.Int32(1), cutlass.Int32(1),
                        cutlass.Int32(2), cutlass.Int32(1), options=kiln.options)
