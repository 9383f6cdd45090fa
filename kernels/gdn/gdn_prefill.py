# Gated DeltaNet prefill in CuTe DSL, for kiln's cute_dsl front end (docs/cute-dsl.md): the chunked
# form of gdn_rule.py's rule over whole prompts, varlen, in two kernels (one cubin, two entries).
#
# Per sequence b (tokens bos = cu_seqlens[b] .. eos - 1) and value head hv, chunks of C tokens.
# Within a chunk (local index i, n <= C tokens), with q, k L2-normalised, gc_i = g_0 + ... + g_i
# (the cumulative log decay) and S the state at the chunk's start:
#   A_ij = beta_i exp(gc_i - gc_j) k_i . k_j        (j < i; 0 elsewhere: strictly lower)
#   T = (I + A)^-1;  w = T diag(beta exp(gc)) K;  u = T diag(beta) V          (the WY / UT form)
#   U = u - w S                                      (the chunk's deltas, u_i of the rule)
#   o_i = scale exp(gc_i) q_i S + sum_{j <= i} scale exp(gc_i - gc_j) (q_i . k_j) U_j
#   S <- exp(gc_last) S + sum_j exp(gc_last - gc_j) k_j U_j^T
# which is the token-by-token rule exactly (in exact arithmetic): U_j is the rule's
# beta_j (v_j - S_{j-1}^T k_j), and the sums unroll the recurrence over the chunk.
#
# kiln_gdn_prefill_chunk: one block per (chunk c, value head hv, sequence b), every chunk of every
# sequence in parallel; C * (d_k + d_v) / C = d_k + d_v threads (256), one per column of w and of u
# in the triangular solve. It normalises q and k into shared memory (float32), scans the gates,
# forms A and the causal attn = scale exp(gc_i - gc_j) q_i . k_j (j <= i) with each thread on rows i
# and C - 1 - i (equal work per thread: the two rows' lower triangles together are C + 1 long) and
# 8 columns, then solves (I + A) x = rhs by forward substitution down its own column (no barrier:
# A is read as broadcasts). Into the workspace, token-major [T, Hv, ...]: w, u, qd = scale exp(gc_i)
# q_i, kd = exp(gc_last - gc_i) k_i (the activation dtype), attn rows and gc (float32).
#
# kiln_gdn_prefill_state: the decode launch shape (launch.h), one block per (column tile, value
# head, sequence); lane j of warp w holds rows w R .. w R + R - 1 of state column j in registers
# (gdn_rule.py's layout) and walks the sequence's chunks in order: the products w S and qd S as
# per-thread partials over its R rows summed across the row_split warps through shared memory,
# half a chunk (C / 2 tokens) at a time; then U, the intra-chunk attn U (the chunk's U in shared
# memory), the output, and the state update kd^T U. The state is read from the pool once (or zero)
# and written back once, after the last chunk.
#
# The products run on the CUDA cores (float32 FMA from 16-bit operands in shared memory): this is
# the correct-first version; NOTES.md has where its time goes and the tensor-core plan.
#
# Arguments (plain pointers and 32-bit integers, as the decode kernels):
#   chunk kernel: q, k [T, H, d_k], v [T, Hv, d_v] dtype; g, beta [T, Hv] float32 or a, b
#     [T, Hv] dtype with a_log, dt_bias [Hv] float32 (the gate forms of gdn_rule.gate_inputs);
#     slots [batch], cu_seqlens [batch + 1] int32; the workspace arrays w, qd, kd [T, Hv, d_k],
#     u [T, Hv, d_v] dtype, attn [T, Hv, C], gc [T, Hv] float32; scale float32; heads_qk, heads_v.
#   state kernel: the workspace arrays; out [T, Hv, d_v] dtype; state [num_slots, Hv, d_k, d_v]
#     float32; slots, cu_seqlens, has_initial_state [batch] int32 (read when initial_given != 0);
#     initial_given, heads_v int32.
import cutlass
import cutlass.cute as cute
import cutlass.memory

import gdn_rule as rule

_DTYPES = {"fp16": cutlass.Float16, "bf16": cutlass.BFloat16}
F32 = cutlass.Float32
I64 = cutlass.Int64
PAIR_THREADS = 8  # threads per pair of A / attn rows (i, C - 1 - i); each takes C / 8 columns
VEC16 = 8  # 16-bit elements per 16-byte vector
VEC4 = 4  # float32 elements per 16-byte vector


def check_prefill(chunk, dk, dv, tile_v, row_split, tiles):
    """The shapes both kernels assume."""
    ok = (chunk == 64 and dk == dv and dk % 32 == 0 and (dk + dv) == (chunk // 2) * PAIR_THREADS
          and tiles == 1 and (chunk // 2) % row_split == 0)
    if not ok:
        raise ValueError(
            f"gdn_prefill: needs chunk 64, d_k = d_v with d_k + d_v = chunk / 2 x {PAIR_THREADS} "
            f"threads (one block of the chunk kernel), tiles_per_block 1 and half a chunk a "
            f"multiple of row_split; kiln.toml gives chunk {chunk}, d_k {dk}, d_v {dv}, tile_v "
            f"{tile_v}, row_split {row_split}, tiles_per_block {tiles}")


def chunk_smem_bytes(chunk, dk):
    """The chunk kernel's dynamic shared memory (launch.h computes the same): normalised q and k
    as float32 rows padded by one float (so that 8 rows read at one column hit 8 banks), the raw
    and the cumulative gates, and beta."""
    return (2 * chunk * (dk + 1) + 3 * chunk) * 4


def state_smem_bytes(chunk, dk, tile_v, row_split, act_bytes):
    """The state kernel's dynamic shared memory (launch.h computes the same): two [C, d_k] tiles of
    16-bit rows (w and qd, then kd and the float32 attn rows in their place), the cross-warp sums of
    half a chunk (2 products x row_split x C / 2 x tile_v float32), the chunk's U (C x tile_v
    float32) and its gc (C float32)."""
    return (2 * chunk * dk * act_bytes + 2 * row_split * (chunk // 2) * tile_v * 4
            + chunk * tile_v * 4 + chunk * 4)


def vector16(ptr, offset):
    """The 8 16-bit elements at ptr + offset (offset a multiple of 8: one 16-byte load)."""
    return cute.make_tensor(ptr + cute.assume(offset, divby=VEC16), cute.make_layout(VEC16))


def vector4(ptr, offset):
    """The 4 float32 elements at ptr + offset (offset a multiple of 4: one 16-byte load)."""
    return cute.make_tensor(ptr + cute.assume(offset, divby=VEC4), cute.make_layout(VEC4))


def row_slice(tile, row, col0, n):
    """tile[row, col0 .. col0 + n - 1] as a tensor (a contiguous run of one row)."""
    return cute.make_tensor(tile.iterator + row * tile.layout.stride[0] + col0,
                            cute.make_layout(n))


def matrix(base, rows, cols, stride):
    """A rows x cols view of shared memory at `base`, row stride `stride` elements."""
    return cute.make_tensor(base, cute.make_layout((rows, cols), stride=(stride, 1)))


def kiln_export(kiln):
    dk, dv, tile_v, row_split, tiles = rule.layout_constants(kiln)
    chunk = kiln.constants["chunk"]
    dtype = _DTYPES[kiln.constants["dtype"]]
    fused = kiln.constants["fused_gating"]
    check_prefill(chunk, dk, dv, tile_v, row_split, tiles)
    rows_per_warp = dk // row_split  # R: the state rows a thread of the state kernel holds
    chunk_threads = dk + dv
    chunk_warps = chunk_threads // rule.WARP
    half = chunk // 2
    cols_per_thread = chunk // PAIR_THREADS
    per_lane = dk // rule.WARP
    pad = dk + 1
    smem1 = chunk_smem_bytes(chunk, dk)
    smem2 = state_smem_bytes(chunk, dk, tile_v, row_split, dtype.width // 8)
    vecs = chunk * dk // VEC16 // (tile_v * row_split)  # a [C, d_k] tile's vectors per thread
    attn_vecs = chunk * chunk // VEC4 // (tile_v * row_split)

    @cute.kernel
    def prefill_chunk(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
                      beta: cute.Pointer, a: cute.Pointer, b_gate: cute.Pointer,
                      a_log: cute.Pointer, dt_bias: cute.Pointer, slots: cute.Pointer,
                      cu_seqlens: cute.Pointer, ws_w: cute.Pointer, ws_u: cute.Pointer,
                      ws_qd: cute.Pointer, ws_kd: cute.Pointer, ws_attn: cute.Pointer,
                      ws_gc: cute.Pointer, scale: cutlass.Float32, heads_qk: cutlass.Int32,
                      heads_v: cutlass.Int32):
        tid, _, _ = cute.arch.thread_idx()
        c, hv, b = cute.arch.block_idx()
        lane = tid % rule.WARP
        warp = tid // rule.WARP
        alloc = cutlass.memory.SmemAllocator()
        qn = alloc.allocate_tensor(F32, cute.make_layout((chunk, pad), stride=(pad, 1)), 16)
        kn = alloc.allocate_tensor(F32, cute.make_layout((chunk, pad), stride=(pad, 1)), 16)
        graw = alloc.allocate_tensor(F32, cute.make_layout(chunk), 16)
        gcs = alloc.allocate_tensor(F32, cute.make_layout(chunk), 16)
        bts = alloc.allocate_tensor(F32, cute.make_layout(chunk), 16)
        slot = rule.scalar(slots + b)
        bos = rule.scalar(cu_seqlens + b)
        eos = rule.scalar(cu_seqlens + b + 1)
        t0 = bos + c * chunk
        if slot >= 0:
            if t0 < eos:
                n = cutlass.min(eos - t0, chunk)
                h = rule.qk_head(hv, heads_qk, heads_v)
                head_params = None
                if cutlass.const_expr(fused):
                    head_params = (rule.scalar(a_log + hv), rule.scalar(dt_bias + hv))
                # The gates of the chunk's tokens (0 past its end: no decay, no update).
                if tid < chunk:
                    gl = F32(0.0)
                    bt = F32(0.0)
                    if tid < n:
                        raw = rule.gate_inputs(fused, g, beta, a, b_gate,
                                               I64(t0 + tid) * heads_v + hv)
                        gl, bt = rule.gate_log_values(fused, raw, head_params)
                    graw[tid] = gl
                    bts[tid] = bt
                # q and k normalised, warp `warp` on rows warp, warp + 8, ...; rows past n zero.
                for r in cutlass.range_constexpr(chunk // chunk_warps):
                    i = warp + r * chunk_warps
                    qv = cute.make_rmem_tensor(cute.make_layout(per_lane), F32)
                    kv = cute.make_rmem_tensor(cute.make_layout(per_lane), F32)
                    for e in cutlass.range_constexpr(per_lane):
                        qv[e] = F32(0.0)
                        kv[e] = F32(0.0)
                    if i < n:
                        row = (I64(t0 + i) * heads_qk + h) * dk
                        for e in cutlass.range_constexpr(per_lane):
                            qv[e] = rule.scalar(q + row + e * rule.WARP + lane).to(F32)
                            kv[e] = rule.scalar(k + row + e * rule.WARP + lane).to(F32)
                    qq = F32(0.0)
                    kk = F32(0.0)
                    for e in cutlass.range_constexpr(per_lane):
                        qq = qq + qv[e] * qv[e]
                        kk = kk + kv[e] * kv[e]
                    rq = cute.math.rsqrt(cute.arch.warp_reduction_sum(qq) + F32(rule.L2_EPS))
                    rk = cute.math.rsqrt(cute.arch.warp_reduction_sum(kk) + F32(rule.L2_EPS))
                    for e in cutlass.range_constexpr(per_lane):
                        qn[i, e * rule.WARP + lane] = qv[e] * rq
                        kn[i, e * rule.WARP + lane] = kv[e] * rk
                cute.arch.barrier()
                # gc_i = g_0 + ... + g_i, left to right (each of the first C threads its own).
                if tid < chunk:
                    acc = F32(0.0)
                    for m in cutlass.range(chunk):
                        acc = acc + F32(cutlass.select_(m <= tid, graw[m], F32(0.0)))
                    gcs[tid] = acc
                cute.arch.barrier()
                # A and attn on rows i0 = p and i1 = C - 1 - p, columns sub + 8 m.
                p = tid // PAIR_THREADS
                sub = tid % PAIR_THREADS
                i0 = p
                i1 = chunk - 1 - p
                # acc[0, s, m]: k_i . k_j, acc[1, s, m]: q_i . k_j (row s of the pair, column m).
                acc = cute.make_rmem_tensor(cute.make_layout((2, 2, cols_per_thread)), F32)
                acc.fill(0.0)
                for d in cutlass.range(dk, unroll=4):
                    k_rows = (kn[i0, d], kn[i1, d])
                    q_rows = (qn[i0, d], qn[i1, d])
                    for m in cutlass.range_constexpr(cols_per_thread):
                        kj = kn[sub + m * PAIR_THREADS, d]
                        for s in cutlass.range_constexpr(2):
                            acc[0, s, m] = acc[0, s, m] + k_rows[s] * kj
                            acc[1, s, m] = acc[1, s, m] + q_rows[s] * kj
                rows = (i0, i1)
                a_vals = [[F32(0.0)] * cols_per_thread for _ in range(2)]
                for s in cutlass.range_constexpr(2):
                    i = rows[s]
                    gi = gcs[i]
                    for m in cutlass.range_constexpr(cols_per_thread):
                        jj = sub + m * PAIR_THREADS
                        decay = cute.math.exp(cutlass.min(gi - gcs[jj], F32(0.0)))
                        a_vals[s][m] = F32(cutlass.select_(jj < i, bts[i] * decay * acc[0, s, m],
                                                           F32(0.0)))
                        qk = F32(cutlass.select_(jj <= i, scale * decay * acc[1, s, m], F32(0.0)))
                        if i < n:
                            rule.scalar_store(ws_attn + (I64(t0 + i) * heads_v + hv) * chunk + jj,
                                              qk)
                # qd and kd rows (every element once, consecutive threads on consecutive columns).
                g_last = gcs[chunk - 1]
                for e in cutlass.range_constexpr(chunk * dk // chunk_threads):
                    idx = tid + e * chunk_threads
                    i = idx // dk
                    d = idx % dk
                    if i < n:
                        at = (I64(t0 + i) * heads_v + hv) * dk + d
                        gi = gcs[i]
                        qd = scale * cute.math.exp(gi) * qn[i, d]
                        rule.scalar_store(ws_qd + at, qd.to(dtype))
                        rule.scalar_store(ws_kd + at,
                                          (cute.math.exp(g_last - gi) * kn[i, d]).to(dtype))
                if tid < chunk:
                    if tid < n:
                        rule.scalar_store(ws_gc + I64(t0 + tid) * heads_v + hv, gcs[tid])
                cute.arch.barrier()  # every read of qn done: A takes its place
                a_s = matrix(qn.iterator, chunk, chunk, chunk)
                for s in cutlass.range_constexpr(2):
                    for m in cutlass.range_constexpr(cols_per_thread):
                        a_s[rows[s], sub + m * PAIR_THREADS] = a_vals[s][m]
                cute.arch.barrier()
                # (I + A) x = rhs down this thread's column: u's (beta v) or w's (beta exp(gc) k).
                x = cute.make_rmem_tensor(cute.make_layout(chunk), F32)
                col = tid % dk
                for i in cutlass.range_constexpr(chunk):
                    rhs = F32(0.0)
                    if tid < dv:
                        if i < n:
                            rhs = bts[i] * rule.scalar(v + (I64(t0 + i) * heads_v + hv) * dv
                                                       + col).to(F32)
                    else:
                        rhs = bts[i] * cute.math.exp(gcs[i]) * kn[i, col]
                    x[i] = rhs
                # Row i's sum over j < i in rule.CHAINS independent partial sums (j mod CHAINS),
                # added pairwise: the rows stay dependent, the FMAs within a row do not.
                for i in cutlass.range_constexpr(1, chunk):
                    parts = [F32(0.0)] * rule.CHAINS
                    for jj in cutlass.range_constexpr(i):
                        parts[jj % rule.CHAINS] = parts[jj % rule.CHAINS] + a_s[i, jj] * x[jj]
                    x[i] = x[i] - rule._sum(parts)
                for i in cutlass.range_constexpr(chunk):
                    if i < n:
                        row = I64(t0 + i) * heads_v + hv
                        if tid < dv:
                            rule.scalar_store(ws_u + row * dv + col, x[i].to(dtype))
                        else:
                            rule.scalar_store(ws_w + row * dk + col, x[i].to(dtype))

    @cute.kernel
    def prefill_state(ws_w: cute.Pointer, ws_u: cute.Pointer, ws_qd: cute.Pointer,
                      ws_kd: cute.Pointer, ws_attn: cute.Pointer, ws_gc: cute.Pointer,
                      out: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
                      cu_seqlens: cute.Pointer, has_initial: cute.Pointer,
                      initial_given: cutlass.Int32, heads_v: cutlass.Int32):
        j, w, _ = cute.arch.thread_idx()
        bx, hv, b = cute.arch.block_idx()
        R = rows_per_warp
        alloc = cutlass.memory.SmemAllocator()
        tile_a = alloc.allocate_tensor(dtype, cute.make_layout((chunk, dk), stride=(dk, 1)), 16)
        tile_b = alloc.allocate_tensor(dtype, cute.make_layout((chunk, dk), stride=(dk, 1)), 16)
        red = alloc.allocate_tensor(
            F32, cute.make_layout((2, row_split, half, tile_v),
                                  stride=(row_split * half * tile_v, half * tile_v, tile_v, 1)), 16)
        us = alloc.allocate_tensor(F32, cute.make_layout((chunk, tile_v), stride=(tile_v, 1)), 16)
        gcs = alloc.allocate_tensor(F32, cute.make_layout(chunk), 16)
        attn = matrix(cute.recast_ptr(tile_b.iterator, dtype=F32), chunk, chunk, chunk)
        tid = w * tile_v + j
        threads = tile_v * row_split
        col = bx * tile_v + j
        slot = rule.scalar(slots + b)
        if slot >= 0:
            bos = rule.scalar(cu_seqlens + b)
            eos = rule.scalar(cu_seqlens + b + 1)
            column = cute.make_rmem_tensor(cute.make_layout(R), F32)
            pool = rule.vector(state + (I64(slot) * heads_v + hv) * (dk * dv) + (w * R) * dv + col,
                               R, dv)
            start = cutlass.Int32(1)
            if initial_given != 0:
                start = rule.scalar(has_initial + b)
            for r in cutlass.range_constexpr(R):
                column[r] = F32(0.0)
            if start != 0:
                rule.load_column(column, pool, R)
            chunks = (eos - bos + chunk - 1) // chunk
            for c in cutlass.range(chunks):
                t0 = bos + c * chunk
                n = cutlass.min(eos - t0, chunk)
                # w and qd rows into the two tiles (tokens past n: zero), and the chunk's gc:
                # 16-byte vectors, every load issued before the first store (one round trip).
                rows_in = [cute.make_rmem_tensor(cute.make_layout((VEC16, vecs)), dtype)
                           for _ in range(2)]
                for r in cutlass.range_constexpr(2):
                    rows_in[r].fill(0.0)
                for e in cutlass.range_constexpr(vecs):
                    i = (tid + e * threads) // (dk // VEC16)
                    if i < n:
                        at = (I64(t0 + i) * heads_v + hv) * dk + (tid % (dk // VEC16)) * VEC16
                        cute.autovec_copy(vector16(ws_w, at), rows_in[0][None, e])
                        cute.autovec_copy(vector16(ws_qd, at), rows_in[1][None, e])
                for e in cutlass.range_constexpr(vecs):
                    i = (tid + e * threads) // (dk // VEC16)
                    d0 = (tid % (dk // VEC16)) * VEC16
                    cute.autovec_copy(rows_in[0][None, e], row_slice(tile_a, i, d0, VEC16))
                    cute.autovec_copy(rows_in[1][None, e], row_slice(tile_b, i, d0, VEC16))
                if tid < chunk:
                    gv = F32(0.0)
                    if tid < n:
                        gv = rule.scalar(ws_gc + I64(t0 + tid) * heads_v + hv)
                    gcs[tid] = gv
                cute.arch.barrier()
                # U = u - w S and the inter-chunk output qd S, half a chunk at a time.
                outs = cute.make_rmem_tensor(cute.make_layout(chunk // row_split), F32)
                for hh in cutlass.range_constexpr(2):
                    for ii in cutlass.range(half):
                        i = hh * half + ii
                        pw = [F32(0.0)] * rule.CHAINS
                        pq = [F32(0.0)] * rule.CHAINS
                        for r in cutlass.range_constexpr(R):
                            s_r = column[r]
                            c4 = r % rule.CHAINS
                            pw[c4] = pw[c4] + tile_a[i, w * R + r].to(F32) * s_r
                            pq[c4] = pq[c4] + tile_b[i, w * R + r].to(F32) * s_r
                        red[0, w, ii, j] = rule._sum(pw)
                        red[1, w, ii, j] = rule._sum(pq)
                    cute.arch.barrier()
                    per_warp = half // row_split
                    for e in cutlass.range_constexpr(per_warp):
                        ii = w * per_warp + e
                        i = hh * half + ii
                        uw = rule._sum([red[0, p, ii, j] for p in range(row_split)])
                        oq = rule._sum([red[1, p, ii, j] for p in range(row_split)])
                        u_i = F32(0.0)
                        if i < n:
                            u_i = rule.scalar(ws_u + (I64(t0 + i) * heads_v + hv) * dv
                                              + col).to(F32)
                        us[i, j] = u_i - uw
                        outs[hh * per_warp + e] = oq
                    cute.arch.barrier()
                # kd rows into tile a, the attn rows (float32) into tile b, as above.
                attn_in = cute.make_rmem_tensor(cute.make_layout((VEC4, attn_vecs)), F32)
                rows_in[0].fill(0.0)
                attn_in.fill(0.0)
                for e in cutlass.range_constexpr(vecs):
                    i = (tid + e * threads) // (dk // VEC16)
                    if i < n:
                        at = (I64(t0 + i) * heads_v + hv) * dk + (tid % (dk // VEC16)) * VEC16
                        cute.autovec_copy(vector16(ws_kd, at), rows_in[0][None, e])
                for e in cutlass.range_constexpr(attn_vecs):
                    i = (tid + e * threads) // (chunk // VEC4)
                    if i < n:
                        at = ((I64(t0 + i) * heads_v + hv) * chunk
                              + ((tid + e * threads) % (chunk // VEC4)) * VEC4)
                        cute.autovec_copy(vector4(ws_attn, at), attn_in[None, e])
                for e in cutlass.range_constexpr(vecs):
                    i = (tid + e * threads) // (dk // VEC16)
                    d0 = (tid % (dk // VEC16)) * VEC16
                    cute.autovec_copy(rows_in[0][None, e], row_slice(tile_a, i, d0, VEC16))
                for e in cutlass.range_constexpr(attn_vecs):
                    i = (tid + e * threads) // (chunk // VEC4)
                    m0 = ((tid + e * threads) % (chunk // VEC4)) * VEC4
                    cute.autovec_copy(attn_in[None, e], row_slice(attn, i, m0, VEC4))
                cute.arch.barrier()
                # The intra-chunk output (attn is zero above the diagonal) and its store.
                per_warp = half // row_split
                for m in cutlass.range(chunk):
                    u_m = us[m, j]
                    for hh in cutlass.range_constexpr(2):
                        for e in cutlass.range_constexpr(per_warp):
                            i = hh * half + w * per_warp + e
                            outs[hh * per_warp + e] = outs[hh * per_warp + e] + attn[i, m] * u_m
                for hh in cutlass.range_constexpr(2):
                    for e in cutlass.range_constexpr(per_warp):
                        i = hh * half + w * per_warp + e
                        if i < n:
                            rule.scalar_store(out + (I64(t0 + i) * heads_v + hv) * dv + col,
                                              outs[hh * per_warp + e].to(dtype))
                # S <- exp(gc_last) S + kd^T U (gc of the chunk's last token: gcs is 0 past n).
                decay = cute.math.exp(gcs[n - 1])
                for r in cutlass.range_constexpr(R):
                    column[r] = column[r] * decay
                for m in cutlass.range(chunk):
                    u_m = us[m, j]
                    for r in cutlass.range_constexpr(R):
                        column[r] = column[r] + tile_a[m, w * R + r].to(F32) * u_m
                cute.arch.barrier()  # the tiles and U are refilled by the next chunk
            rule.store_column(pool, column, R)

    @cute.jit
    def launch(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
               beta: cute.Pointer, a: cute.Pointer, b_gate: cute.Pointer, a_log: cute.Pointer,
               dt_bias: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               cu_seqlens: cute.Pointer, has_initial: cute.Pointer, ws_w: cute.Pointer,
               ws_u: cute.Pointer, ws_qd: cute.Pointer, ws_kd: cute.Pointer,
               ws_attn: cute.Pointer, ws_gc: cute.Pointer, scale: cutlass.Float32,
               heads_qk: cutlass.Int32, heads_v: cutlass.Int32, initial_given: cutlass.Int32,
               chunks: cutlass.Int32, batch: cutlass.Int32):
        prefill_chunk(q, k, v, g, beta, a, b_gate, a_log, dt_bias, slots, cu_seqlens, ws_w, ws_u,
                      ws_qd, ws_kd, ws_attn, ws_gc, scale, heads_qk, heads_v).launch(
            grid=[chunks, heads_v, batch], block=[chunk_threads, 1, 1], smem=smem1)
        prefill_state(ws_w, ws_u, ws_qd, ws_kd, ws_attn, ws_gc, o, state, slots, cu_seqlens,
                      has_initial, initial_given, heads_v).launch(
            grid=[dv // tile_v, heads_v, batch], block=[tile_v, row_split, 1], smem=smem2)

    kiln.entry("kiln_gdn_prefill_chunk", prefill_chunk)
    kiln.entry("kiln_gdn_prefill_state", prefill_state)
    ptr = rule.placeholder
    i32 = cutlass.Int32
    ins = rule.input_placeholders(dtype)  # q .. dt_bias, o, state, slots
    return cute.compile(launch, *ins, ptr(i32, 4), ptr(i32, 4), ptr(dtype, 16), ptr(dtype, 16),
                        ptr(dtype, 16), ptr(dtype, 16), ptr(F32, 16), ptr(F32, 16), F32(1.0),
                        i32(1), i32(1), i32(0), i32(1), i32(1), options=kiln.options)
