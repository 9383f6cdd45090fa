# Gated DeltaNet multi-token decode (speculative-decoding verify: T = 1..max_tokens draft tokens per
# sequence in one launch) in CuTe DSL, for kiln's cute_dsl front end (docs/cute-dsl.md). Per
# sequence b and value head hv (query/key head h = hv / (Hv / H)), starting from
# S = state[slots[b], hv] (float32, d_k x d_v, row-major), for t = 0..T-1 one token of the gated
# delta rule (gdn_rule.py, shared with gdn_decode.py):
#   q, k <- L2-normalised;  S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = scale S^T q
# then the state after token t goes to cache entry e = b * T + t ([batch, T] order: SGLang's
# verify with disable_state_update, and the runtime copies the accepted entry into the slot), or,
# when `slotted`, to e = cache_slots[b, t] (vLLM's one slot per draft position: the cache may be the
# pool itself, and accepting n tokens makes cache_slots[b, n - 1] the sequence's slot, no copy; a
# negative entry keeps no state for that token): cache[e, hv] = S, and o[b, t, hv] = o. The states
# are read from the pool only at slots[b], once, before any token; a negative slot skips the
# sequence (neither its outputs nor its cache entries are written).
#
# Launch: the decode shape (kernels/gdn/launch.h), grid = (d_v / (tile_v tiles_per_block), Hv,
# batch), block = (tile_v, row_split, tiles_per_block) = (32, 4, 1 or 2); lane j of warp w owns
# rows w * R .. w * R + R - 1 of one state column in registers across all T tokens (gdn_rule.py),
# so the pool is read once and each token's state written once (coalesced rows). Per token every warp normalises q and k itself into its
# shared-memory slices (gdn_rule.stage_qk). T is a run-time loop bound.
# The loads of token t + 1's q, k, v, g and beta are issued before token t's math (into registers;
# the index clamped to T - 1, so the last token reloads its own inputs), so no token waits for a
# global load; token 0's are issued with the slot's, before the slot test.
#
# Arguments (plain pointers and 32-bit integers, as gdn_decode.py):
#   q, k  [batch, T, H, d_k] dtype      v, o  [batch, T, Hv, d_v] dtype
#   g, beta [batch, T, Hv] float32      state [num_slots, Hv, d_k, d_v] float32 (read at slots[b])
#   a, b [batch, T, Hv] dtype           a_log, dt_bias [Hv] float32
#   slots [batch] int32                 cache [entries, Hv, d_k, d_v] float32
#   cache_slots [batch, T] int32 (read only when slotted; may be null otherwise)
#   scale float32; heads_qk (H), heads_v (Hv), tokens (T), slotted (0 or 1) int32
# The gates as in gdn_decode.py: g and beta read as given, or (fused_gating) computed from a, b,
# a_log and dt_bias per token; the parameters are the same in both forms.
import cutlass
import cutlass.cute as cute

import gdn_rule as rule

_DTYPES = {"fp16": cutlass.Float16, "bf16": cutlass.BFloat16}


def _fetch(nxt, ins, t, dk, dv):
    """Issues the loads of token t's inputs into the registers `nxt` = (q, k: the lane's raw
    elements in gdn_rule.qk_index order; v_j; the raw gate pair of gdn_rule.gate_inputs)."""
    nq, nk, nv, ngb = nxt
    q, k, v, gates, b, tokens, h, heads_qk, heads_v, hv, col, lane, warp, rows = ins
    token = cutlass.Int64(b) * tokens + t  # row of the [batch, T, ...] inputs and outputs
    head = token * heads_v + hv  # (token, value head): g, beta, v, o, cache
    qv, kv = rule.load_qk(rule.vector(q + (token * heads_qk + h) * dk, dk),
                          rule.vector(k + (token * heads_qk + h) * dk, dk), lane, warp, rows, dk)
    for r in range(len(qv)):
        nq[r] = qv[r]
        nk[r] = kv[r]
    nv[0] = rule.scalar(v + head * dv + col)
    ngb[0], ngb[1] = rule.gate_inputs(*gates, head)


def kiln_export(kiln):
    dk, dv, tile_v, row_split, tiles = rule.layout_constants(kiln)
    dtype = _DTYPES[kiln.constants["dtype"]]
    fused = kiln.constants["fused_gating"]
    gate_dtype = dtype if fused else cutlass.Float32  # gdn_rule.gate_inputs' pair
    f32 = cutlass.Float32
    i64 = cutlass.Int64
    rule.check_tile(tile_v, row_split, tiles, dk, dv)

    per_lane = dk // rule.WARP

    @cute.kernel
    def decode_mtp(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
                   beta: cute.Pointer, a: cute.Pointer, b_gate: cute.Pointer, a_log: cute.Pointer,
                   dt_bias: cute.Pointer, o: cute.Pointer, state: cute.Pointer,
                   slots: cute.Pointer, cache: cute.Pointer, cache_slots: cute.Pointer,
                   scale: cutlass.Float32, heads_qk: cutlass.Int32, heads_v: cutlass.Int32,
                   tokens: cutlass.Int32, slotted: cutlass.Int32):
        j, w, z = cute.arch.thread_idx()
        bx, hv, b, = cute.arch.block_idx()
        smem = rule.Smem(dk, tile_v, row_split, w, z, tiles)
        rows = smem.rows
        slot = rule.scalar(slots + b)
        h = rule.qk_head(hv, heads_qk, heads_v)
        col = (bx * tiles + z) * tile_v + j
        # The next token's inputs, raw (registers: a tensor indexed only by constants).
        nq = cute.make_rmem_tensor(cute.make_layout(per_lane), dtype)
        nk = cute.make_rmem_tensor(cute.make_layout(per_lane), dtype)
        nv = cute.make_rmem_tensor(cute.make_layout(1), dtype)
        ngb = cute.make_rmem_tensor(cute.make_layout(2), gate_dtype)
        head_params = None
        if cutlass.const_expr(fused):  # per value head: loaded once for all T tokens
            head_params = (rule.scalar(a_log + hv), rule.scalar(dt_bias + hv))

        nxt = (nq, nk, nv, ngb)
        ins = (q, k, v, (fused, g, beta, a, b_gate), b, tokens, h, heads_qk, heads_v, hv, col, j,
               w, rows)
        _fetch(nxt, ins, 0, dk, dv)
        if slot >= 0:
            S = rule.vector(state + (i64(slot) * heads_v + hv) * (dk * dv) + (w * rows) * dv + col,
                            rows, dv)
            column = cute.make_rmem_tensor(cute.make_layout(rows), f32)
            rule.load_column(column, S, rows)
            for t in cutlass.range(tokens):
                qv = [nq[r] for r in range(per_lane)]  # token t's, fetched one token ago
                kv = [nk[r] for r in range(per_lane)]
                v_j = nv[0].to(f32)
                gates = (ngb[0], ngb[1])
                _fetch(nxt, ins, cutlass.min(t + 1, tokens - 1), dk, dv)
                head = (i64(b) * tokens + t) * heads_v + hv
                entry = b * tokens + t  # the state's cache entry: [batch, T] order, or mapped
                if slotted != 0:
                    entry = rule.scalar(cache_slots + entry)
                # Every lane is done with the previous token's slices; on token 0 this also keeps
                # the pool loads ahead of the norm code.
                cute.arch.sync_warp()
                rule.stage_qk(smem, qv, kv, j)
                cute.arch.sync_warp()
                decay, bt = rule.gate_values(fused, gates, head_params)
                out = rule.step(column, None, smem, j, w, v_j, decay, bt, scale)
                if entry >= 0:  # a negative mapped entry: this token's state is not kept
                    rule.store_column(
                        rule.vector(cache + (i64(entry) * heads_v + hv) * (dk * dv)
                                    + (w * rows) * dv + col, rows, dv), column, rows)
                if w == 0:
                    rule.scalar_store(o + head * dv + col, out.to(dtype))

    @cute.jit
    def launch(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
               beta: cute.Pointer, a: cute.Pointer, b_gate: cute.Pointer, a_log: cute.Pointer,
               dt_bias: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               cache: cute.Pointer, cache_slots: cute.Pointer, scale: cutlass.Float32,
               heads_qk: cutlass.Int32, heads_v: cutlass.Int32, tokens: cutlass.Int32,
               slotted: cutlass.Int32, batch: cutlass.Int32):
        decode_mtp(q, k, v, g, beta, a, b_gate, a_log, dt_bias, o, state, slots, cache,
                   cache_slots, scale, heads_qk, heads_v, tokens, slotted).launch(
            grid=[dv // (tile_v * tiles), heads_v, batch], block=[tile_v, row_split, tiles])

    kiln.entry("kiln_gdn_decode_mtp", decode_mtp)
    cache, cache_slots = rule.placeholder(f32, 16), rule.placeholder(cutlass.Int32, 4)
    return cute.compile(launch, *rule.input_placeholders(dtype), cache, cache_slots, f32(1.0),
                        cutlass.Int32(1), cutlass.Int32(1), cutlass.Int32(2), cutlass.Int32(0),
                        cutlass.Int32(1), options=kiln.options)
