# The gated delta rule on a block's state columns, shared by gdn_decode.py (one token, state in
# place) and gdn_decode_mtp.py (1..max_tokens tokens, every intermediate state into a cache): the
# one place the math is written. Per token, for value head hv and its query/key head h:
#   q, k <- q / sqrt(sum q^2 + 1e-6), k likewise (L2 norm in the kernel, as the models do)
#   S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = scale S^T q
# S is d_k x d_v float32, row-major.
#
# The block: tiles_per_block column tiles of one value head (thread_idx z), each of tile_v = 32
# columns (lane j of every warp owns column j of its tile) and row_split warps (thread_idx y = w)
# that split the d_k rows: warp w holds rows w * R .. w * R + R - 1 of its
# lane's column in registers (R = d_k / row_split; 32 floats at d_k 128, row_split 4). The two
# dot products over d_k are a per-thread partial over its R rows plus a sum across the row_split
# warps through shared memory and one bar.sync (S^T k, which every warp needs for u; S^T q, which
# warp 0 writes). Splitting the rows, rather than one warp owning all d_k rows of its columns,
# makes each thread's share of the math row_split times shorter (what a block waits for at
# small batch) and its registers ~60 instead of ~170.
#
# q and k: every warp loads the whole token's q and k (d_k / 32 elements per lane, coalesced) and
# reduces the sums of squares itself (no cross-warp step for the norms), then writes the
# normalised rows it owns to its own R-float slices of shared memory, which its lanes read as
# broadcasts. The lane's elements are ordered so that the first R / 32 of them are the warp's own
# rows, so their slice positions are static.
#
# These are plain Python functions, called while a @cute.kernel is traced: their Python loops run
# at trace time and unroll, exactly as cutlass.range_constexpr does inside a kernel, and they hold
# no control flow on run-time values except where noted. (Not named after a standard-library
# module: the driver puts this directory on sys.path.)
import cutlass
import cutlass.cute as cute

L2_EPS = 1e-6  # x / sqrt(sum x^2 + 1e-6): flash-linear-attention's l2norm, and reference.h's
WARP = 32
CHAINS = 4  # independent partial sums per thread and dot product (a power of 2)
F32 = cutlass.Float32


def layout_constants(kiln):
    """The kiln.toml constants every gdn script's layout comes from (launch.h reads the same):
    d_k, d_v, tile_v, row_split, tiles_per_block."""
    c = kiln.constants
    return c["head_dim_k"], c["head_dim_v"], c["tile_v"], c["row_split"], c["tiles_per_block"]


def check_tile(tile_v, row_split, tiles, dk, dv):
    """The layout every function below assumes."""
    rows = dk // row_split if row_split > 0 else 0
    if (tile_v != WARP or row_split < 1 or dk % row_split != 0 or rows % WARP != 0
            or dk & (dk - 1) != 0 or rows % CHAINS != 0 or tiles < 1
            or dv % (tile_v * tiles) != 0 or tile_v * row_split * tiles > 1024):
        raise ValueError(
            f"gdn: tile_v must be {WARP} (a warp's lanes are the columns), d_k a power of 2, "
            f"d_k / row_split a multiple of {WARP}, d_v a multiple of tile_v x tiles_per_block "
            f"and the block <= 1024 threads; kiln.toml gives tile_v {tile_v}, row_split "
            f"{row_split}, tiles_per_block {tiles}, d_k {dk}, d_v {dv}")


def placeholder(t, align):
    """A storage-free global pointer to `t` for tracing, aligned as the runner admits it."""
    return cute.runtime.make_ptr(t, 0, cute.AddressSpace.gmem, assumed_align=align)


def input_placeholders(dtype):
    """The placeholders of the parameters both kernels open with, in their order: q, k, v, g,
    beta, a, b, a_log, dt_bias, o, state, slots."""
    ptr, i32 = placeholder, cutlass.Int32
    return (ptr(dtype, 16), ptr(dtype, 16), ptr(dtype, 16), ptr(F32, 4), ptr(F32, 4),
            ptr(dtype, 2), ptr(dtype, 2), ptr(F32, 4), ptr(F32, 4), ptr(dtype, 16), ptr(F32, 16),
            ptr(i32, 4))


def qk_head(hv, heads_qk, heads_v):
    """The query/key head of value head hv, hv // (Hv / H) (Hv a multiple of H), in float32: three
    instructions where the two integer divisions take ~60 dependent ones, on the path to the
    q / k loads' addresses. Exact: (hv + 1/2) H / Hv is at least 1 / (2 Hv / H) from an integer,
    more than the ~2^-22 relative error of the rounded product and rcp.approx for hv < 2^21 (the
    grid's y is < 2^16)."""
    x = (hv.to(F32) + F32(0.5)) * heads_qk.to(F32) * cute.arch.rcp_approx(heads_v.to(F32))
    return x.to(cutlass.Int32)


def scalar(ptr):
    """The value at a pointer (a one-element tensor view)."""
    return cute.make_tensor(ptr, cute.make_layout(1))[0]


def vector(ptr, n, stride=1):
    """n elements from ptr with the given stride, as a tensor view."""
    return cute.make_tensor(ptr, cute.make_layout(n, stride=stride))


class Smem:
    """The block's static shared memory (recorded in the cubin; nothing for the runner to pass),
    per column tile of the block (thread_idx z = tile, of `tiles`): per warp, its R rows of the
    normalised q and of k (2 R floats); and two [row_split, tile_v] float32 arrays for the
    cross-warp sums (S^T k and S^T q partials). 2 d_k + 2 row_split tile_v floats per tile: 2 KiB
    at d_k 128, row_split 4."""

    def __init__(self, dk, tile_v, row_split, warp, tile, tiles):
        rows = dk // row_split
        per_tile = 2 * dk + 2 * row_split * tile_v  # a multiple of 2 R
        base = cute.arch.alloc_smem(F32, tiles * per_tile, alignment=16)
        base = base + cute.assume(tile * per_tile, divby=per_tile)
        # The warp's slices start at a multiple of 2 R floats (>= 16 bytes): said so, so that the
        # pointer keeps 16-byte alignment and the slices are read as 16-byte broadcasts.
        mine = base + cute.assume(warp * (2 * rows), divby=2 * rows)
        self.q = vector(mine, rows)
        self.k = vector(mine + rows, rows)
        self.red_kv = vector(base + 2 * dk, row_split * tile_v)
        self.red_o = vector(base + 2 * dk + row_split * tile_v, row_split * tile_v)
        self.rows, self.tile_v, self.row_split = rows, tile_v, row_split


def qk_index(lane, warp, rows, r, dk):
    """The element of q / k that lane `lane` of warp `warp` takes as its r-th (r < d_k / 32):
    (warp R + 32 r + lane) mod d_k, so that r < R / 32 are the warp's own rows (slice position
    32 r + lane) and all r together cover d_k once per warp, coalesced."""
    return (warp * rows + (r * WARP) + lane) & (dk - 1)


def load_qk(q, k, lane, warp, rows, dk):
    """The lane's d_k / 32 raw elements of q and of k (the activation dtype), qk_index order."""
    per_lane = dk // WARP
    qv = [q[qk_index(lane, warp, rows, r, dk)] for r in range(per_lane)]
    kv = [k[qk_index(lane, warp, rows, r, dk)] for r in range(per_lane)]
    return qv, kv


def stage_qk(smem, qv, kv, lane):
    """smem.q, smem.k = the warp's rows of q / |q| and k / |k| (float32), from the lane's raw
    elements (load_qk). Every warp reduces the full sums of squares itself (a butterfly over its
    lanes). Call with the warp synchronised on both sides (sync_warp): before, so that no lane
    still reads the previous token's slices; after, so that every lane sees all of them."""
    qf = [x.to(F32) for x in qv]
    kf = [x.to(F32) for x in kv]
    qq = F32(0.0)
    kk = F32(0.0)
    for r in range(len(qf)):
        qq = qq + qf[r] * qf[r]
        kk = kk + kf[r] * kf[r]
    rq = cute.math.rsqrt(cute.arch.warp_reduction_sum(qq) + F32(L2_EPS))
    rk = cute.math.rsqrt(cute.arch.warp_reduction_sum(kk) + F32(L2_EPS))
    for r in range(smem.rows // WARP):
        smem.q[r * WARP + lane] = qf[r] * rq
        smem.k[r * WARP + lane] = kf[r] * rk


def load_column(column, src, n):
    """column[i] = src[i] for the thread's n rows of its state column (src: a strided global
    view)."""
    for i in range(n):
        column[i] = src[i]


def _cross_warp_sum(red, part, lane, warp, smem):
    """The sum over the block's warps of each warp's `part` for column `lane`: every thread writes
    its part, one bar.sync, every thread reads the row_split parts (in the same order, so every
    warp gets the bit-identical sum). The caller's next write to `red` must be separated from
    these reads by another bar.sync (step() has one between its two uses of each array)."""
    tv = smem.tile_v
    red[warp * tv + lane] = part
    cute.arch.barrier()
    return _sum([red[p * tv + lane] for p in range(smem.row_split)])


def step(column, dst, smem, lane, warp, v_j, decay, beta, scale):
    """One token of the rule on the thread's R rows of its state column (`column`, registers),
    with the token's normalised q and k rows in smem (stage_qk): decays the rows, applies the delta
    update with u_j = beta (v_j - S^T k), stores the updated rows to `dst` (a strided global view:
    the pool in place, or the token's cache entry; None: not stored here, the caller stores
    `column` with store_column when it decides to) and returns o_j = scale S^T q in float32 (the
    same value in every warp; warp 0 writes it).

    The per-thread partials run as CHAINS independent sums (rows i = c mod CHAINS), added
    pairwise; then the cross-warp sum. Two bar.syncs per token: after each cross-warp write.
    v_j and beta enter before the first barrier, not after it: each warp's partial of S^T k starts
    at -v_j / row_split (exact: a power of 2) and is scaled by beta before it is shared, so that
    the sum is beta (S^T k - v_j) = -u_j. (Used only after the barrier, ptxas scheduled the loads of
    v and beta after the norm code, and the block waited for them there.) The sum order differs
    from reference.h's by fp32 rounding only."""
    n = smem.rows
    kv = [F32(0.0)] * CHAINS  # the thread's part of (S^T k)_j after the decay, less v_j / row_split
    kv[0] = v_j * F32(-1.0 / smem.row_split)
    for i in range(n):
        s = column[i] * decay
        column[i] = s
        kv[i % CHAINS] = kv[i % CHAINS] + s * smem.k[i]
    # The barrier is also one the compiler cannot move loads across: pass 2 reads k again from
    # shared memory (16-byte broadcasts) instead of holding R values of it in registers.
    u = -_cross_warp_sum(smem.red_kv, beta * _sum(kv), lane, warp, smem)
    out = [F32(0.0)] * CHAINS
    for i in range(n):
        s = column[i] + smem.k[i] * u
        column[i] = s
        if dst is not None:
            dst[i] = s
        out[i % CHAINS] = out[i % CHAINS] + s * smem.q[i]
    return _cross_warp_sum(smem.red_o, _sum(out), lane, warp, smem) * scale


def store_column(dst, column, n):
    """dst[i] = column[i] for the thread's n rows (dst: a strided global view)."""
    for i in range(n):
        dst[i] = column[i]


def _sum(parts):
    """(p0 + p1) + (p2 + p3): partial sums, pairwise."""
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] for i in range(0, len(parts), 2)]
    return parts[0]


# torch.nn.functional.softplus's default threshold, as the models (and vLLM's fused_gdn_gating)
# call it: softplus(x) = x above it, log(1 + exp(x)) at or below it.
SOFTPLUS_THRESHOLD = 20.0


def gate_inputs(fused, g, beta, a, b, row):
    """The raw loads of one (token, value head)'s gates at `row` of their [.., Hv] arrays: (g, beta)
    float32 when the gates are given, (a, b) in the activation dtype when they are fused. Only
    loads: no value is used here, so the loads can be in flight while other work runs."""
    if fused:
        return scalar(a + row), scalar(b + row)
    return scalar(g + row), scalar(beta + row)


def gate_values(fused, raw, head_params):
    """(exp(g), beta) in float32 from gate_inputs' pair (gate_log_values' g, exponentiated)."""
    g, beta = gate_log_values(fused, raw, head_params)
    return cute.math.exp(g, fastmath=fused), beta


def gate_log_values(fused, raw, head_params):
    """(g, beta) in float32 from gate_inputs' pair. Given gates: g and beta as read. Fused, with
    head_params = (A_log[hv], dt_bias[hv]) float32, as the models compute them:
      g = -exp(A_log) softplus(a + dt_bias),  beta = sigmoid(b) = 1 / (1 + exp(-b))."""
    if not fused:
        return raw[0], raw[1]
    a_log, dt_bias = head_params
    x = raw[0].to(F32) + dt_bias
    limit = F32(SOFTPLUS_THRESHOLD)
    # log1p(exp(x)) evaluated on min(x, limit), so that exp cannot overflow on the branch not taken.
    soft = cute.math.log(F32(1.0) + cute.math.exp(cutlass.min(x, limit), fastmath=True),
                         fastmath=True)
    soft = F32(cutlass.select_(x > limit, x, soft))
    g = -cute.math.exp(a_log, fastmath=True) * soft
    beta = F32(1.0) / (F32(1.0) + cute.math.exp(-raw[1].to(F32), fastmath=True))
    return g, beta


def scalar_store(ptr, value):
    """*ptr = value (a one-element tensor view)."""
    cute.make_tensor(ptr, cute.make_layout(1))[0] = value
