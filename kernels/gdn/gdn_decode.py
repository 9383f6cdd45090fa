# Gated DeltaNet decode (one token per sequence) in CuTe DSL, for kiln's cute_dsl front end
# (docs/cute-dsl.md). Per sequence b and value head hv (query/key head h = hv / (Hv / H)), with
# S = state[slots[b], hv] (float32, d_k x d_v, row-major: S[i][j] at i * d_v + j), one token of
# the gated delta rule (gdn_rule.py, shared with gdn_decode_mtp.py):
#   q, k <- q / sqrt(sum q^2 + 1e-6), k likewise (L2 norm in the kernel, as the models do)
#   S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = scale S^T q
# S is updated in place; a negative slot skips the sequence (its output is not written).
#
# Launch (kernels/gdn/launch.h computes the same shape on the host):
#   grid = (d_v / (tile_v tiles_per_block), Hv, batch), block = (tile_v, row_split,
#   tiles_per_block) = (32, 4, 1 or 2): lane j of warp w of tile z owns rows w * R .. w * R + R - 1
#   (R = d_k / row_split) of state column (x tiles_per_block + z) tile_v + j and keeps them in
#   registers for the whole update, so the state is read once and written once with coalesced
#   row accesses (gdn_rule.py: the layout, the cross-warp sums).
# Order of the loads: q, k, v, g and beta do not depend on the slot, so they are written before
# the slot test (in bounds for a skipped sequence too; the compiler sinks them into the branch, so
# they issue with the state's); the state column right after the slot test, then a warp barrier,
# so that the norm code (which waits for q and k) is not scheduled ahead of the state loads. A
# block's critical path is then the slot's round trip and the state's (kernels/gdn/NOTES.md, v3).
#
# Arguments are plain pointers and 32-bit integers (make_ptr placeholders, no tensor descriptors),
# so the cubin's entry takes the same parameters as a CUDA C++ kernel would:
#   q, k  [batch, H, d_k] dtype        v, o  [batch, Hv, d_v] dtype
#   g, beta [batch, Hv] float32        state [num_slots, Hv, d_k, d_v] float32
#   a, b [batch, Hv] dtype             a_log, dt_bias [Hv] float32
#   slots [batch] int32                scale float32; heads_qk (H), heads_v (Hv) int32
# The gates: with fused_gating false (kiln.toml) the kernel reads g and beta and ignores a, b,
# a_log and dt_bias; with it true it computes g = -exp(a_log) softplus(a + dt_bias) and
# beta = sigmoid(b) itself (gdn_rule.gate_values) and ignores g and beta. Both forms take the same
# parameters, so that one launch serves every variant.
import cutlass
import cutlass.cute as cute

import gdn_rule as rule

_DTYPES = {"fp16": cutlass.Float16, "bf16": cutlass.BFloat16}


def kiln_export(kiln):
    dk, dv, tile_v, row_split, tiles = rule.layout_constants(kiln)
    dtype = _DTYPES[kiln.constants["dtype"]]
    fused = kiln.constants["fused_gating"]
    f32 = cutlass.Float32
    i64 = cutlass.Int64
    rule.check_tile(tile_v, row_split, tiles, dk, dv)

    @cute.kernel
    def decode(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
               beta: cute.Pointer, a: cute.Pointer, b_gate: cute.Pointer, a_log: cute.Pointer,
               dt_bias: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               scale: cutlass.Float32, heads_qk: cutlass.Int32, heads_v: cutlass.Int32):
        j, w, z = cute.arch.thread_idx()
        bx, hv, b, = cute.arch.block_idx()
        smem = rule.Smem(dk, tile_v, row_split, w, z, tiles)
        rows = smem.rows
        slot = rule.scalar(slots + b)
        # The integer division, not rule.qk_head: the float head index made this kernel 5% slower
        # at batch 8 (H100 run 2026-12-06-10; the multi-token kernel gains 1.5-2.6% from it).
        h = hv // (heads_v // heads_qk)
        col = (bx * tiles + z) * tile_v + j
        head = i64(b) * heads_v + hv  # (sequence, value head): g, beta, v, o
        qv, kv = rule.load_qk(rule.vector(q + (i64(b) * heads_qk + h) * dk, dk),
                              rule.vector(k + (i64(b) * heads_qk + h) * dk, dk), j, w, rows, dk)
        v_j = rule.scalar(v + head * dv + col)
        gates = rule.gate_inputs(fused, g, beta, a, b_gate, head)
        head_params = None
        if cutlass.const_expr(fused):
            head_params = (rule.scalar(a_log + hv), rule.scalar(dt_bias + hv))
        if slot >= 0:
            S = rule.vector(state + (i64(slot) * heads_v + hv) * (dk * dv) + (w * rows) * dv + col,
                            rows, dv)
            column = cute.make_rmem_tensor(cute.make_layout(rows), f32)
            rule.load_column(column, S, rows)
            cute.arch.sync_warp()  # the state loads stay ahead of the norm code
            rule.stage_qk(smem, qv, kv, j)
            cute.arch.sync_warp()
            decay, bt = rule.gate_values(fused, gates, head_params)
            out = rule.step(column, S, smem, j, w, v_j.to(f32), decay, bt, scale)
            if w == 0:
                rule.scalar_store(o + head * dv + col, out.to(dtype))

    @cute.jit
    def launch(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
               beta: cute.Pointer, a: cute.Pointer, b_gate: cute.Pointer, a_log: cute.Pointer,
               dt_bias: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               scale: cutlass.Float32, heads_qk: cutlass.Int32, heads_v: cutlass.Int32,
               batch: cutlass.Int32):
        decode(q, k, v, g, beta, a, b_gate, a_log, dt_bias, o, state, slots, scale, heads_qk,
               heads_v).launch(
            grid=[dv // (tile_v * tiles), heads_v, batch], block=[tile_v, row_split, tiles])

    kiln.entry("kiln_gdn_decode", decode)
    return cute.compile(launch, *rule.input_placeholders(dtype), f32(1.0), cutlass.Int32(1),
                        cutlass.Int32(1), cutlass.Int32(1), options=kiln.options)
