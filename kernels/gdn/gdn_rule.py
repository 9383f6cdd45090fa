# The gated delta rule on one state column, shared by gdn_decode.py (one token, state in place)
# and gdn_decode_mtp.py (1..max_tokens tokens, every intermediate state into a cache): the one
# place the math is written. Per token, for value head hv and its query/key head h:
#   q, k <- q / sqrt(sum q^2 + 1e-6), k likewise (L2 norm in the kernel, as the models do)
#   S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = scale S^T q
# S is d_k x d_v float32; a thread owns column j of it (d_k floats in registers), so both
# reductions over d_k (S^T k and S^T q) are per thread and need no communication.
#
# The block is one warp (tile_v = 32 columns). The token's q and k are loaded once per block, not
# once per thread: each lane loads d_k / 32 elements of each (coalesced), a warp reduction gives
# the sums of squares, and the normalised float32 vectors go to shared memory, which every lane
# then reads as broadcasts. (Per thread that replaces 2 d_k global loads and FMAs of the norms,
# and the repeated 16-bit loads and conversions of the two passes, with d_k / 16 loads, 10
# shuffles and shared-memory reads.)
#
# These are plain Python functions, called while a @cute.kernel is traced: their Python loops run
# at trace time and unroll, exactly as cutlass.range_constexpr does inside a kernel, and they hold
# no control flow on run-time values. (Not named after a standard-library module: the driver puts
# this directory on sys.path.)
import cutlass
import cutlass.cute as cute

L2_EPS = 1e-6  # x / sqrt(sum x^2 + 1e-6): flash-linear-attention's l2norm, and reference.h's
WARP = 32
CHAINS = 4  # independent partial sums per dot product in step() (a power of 2)
F32 = cutlass.Float32


def check_tile(tile_v, dk):
    """The layout every function below assumes: one warp per block, d_k a multiple of it."""
    if tile_v != WARP or dk % WARP != 0:
        raise ValueError(f"gdn: tile_v must be {WARP} (one warp per block) and d_k a multiple of "
                         f"{WARP}; kiln.toml gives tile_v {tile_v}, d_k {dk}")


def scalar(ptr):
    """The value at a pointer (a one-element tensor view)."""
    return cute.make_tensor(ptr, cute.make_layout(1))[0]


def vector(ptr, n, stride=1):
    """n elements from ptr with the given stride, as a tensor view."""
    return cute.make_tensor(ptr, cute.make_layout(n, stride=stride))


def qk_buffers(dk):
    """Shared memory for one token's normalised q and k: two float32 d_k-vectors (static shared
    memory, recorded in the cubin; nothing for the runner to pass)."""
    base = cute.arch.alloc_smem(F32, 2 * dk, alignment=16)
    return vector(base, dk), vector(base + dk, dk)


def stage_qk(q_s, k_s, q, k, lane, dk):
    """q_s = q / |q|, k_s = k / |k| (float32, shared memory) from the token's raw q and k
    (global, the activation dtype). Lane `lane` of the warp takes elements lane, lane + 32, ...
    Call with the warp synchronised on both sides (sync_warp): before, so that no lane still
    reads the previous token's vectors; after, so that every lane sees all of them."""
    per_lane = dk // WARP
    qv = [q[lane + r * WARP].to(F32) for r in range(per_lane)]
    kv = [k[lane + r * WARP].to(F32) for r in range(per_lane)]
    qq = F32(0.0)
    kk = F32(0.0)
    for r in range(per_lane):
        qq = qq + qv[r] * qv[r]
        kk = kk + kv[r] * kv[r]
    rq = cute.math.rsqrt(cute.arch.warp_reduction_sum(qq) + F32(L2_EPS))
    rk = cute.math.rsqrt(cute.arch.warp_reduction_sum(kk) + F32(L2_EPS))
    for r in range(per_lane):
        q_s[lane + r * WARP] = qv[r] * rq
        k_s[lane + r * WARP] = kv[r] * rk


def load_column(column, src, n):
    """column[i] = src[i] for the n rows of a state column (src: a strided global view)."""
    for i in range(n):
        column[i] = src[i]


def step(column, dst, q_s, k_s, v_j, gate, beta, scale, n):
    """One token of the rule on the state column held in `column` (registers, n = d_k rows), with
    the token's normalised q_s and k_s (stage_qk): decays the column, applies the delta update with
    u_j = beta (v_j - S^T k), stores the updated column to `dst` (a strided global view: the pool
    in place, or the token's cache entry) and returns o_j = scale S^T q in float32.

    Both dot products over d_k run as CHAINS independent partial sums (rows i = c mod CHAINS),
    added at the end: one chain of d_k dependent FMAs would make each pass d_k FMA latencies long,
    which is what a block at batch 1 waits for (the sum order differs from reference.h's by fp32
    rounding only)."""
    decay = cute.math.exp(gate)
    kv = [F32(0.0)] * CHAINS  # (S^T k)_j after the decay
    for i in range(n):
        s = column[i] * decay
        column[i] = s
        kv[i % CHAINS] = kv[i % CHAINS] + s * k_s[i]
    u = beta * (v_j - _sum(kv))
    # A barrier the compiler cannot move loads across: without it, it keeps the d_k values of
    # k_s that the first pass loaded in registers for the second (d_k more registers beside the
    # column: spills); with it, the second pass reads them again from shared memory (broadcast
    # 16-byte loads, cheap).
    cute.arch.sync_warp()
    out = [F32(0.0)] * CHAINS
    for i in range(n):
        s = column[i] + k_s[i] * u
        column[i] = s
        dst[i] = s
        out[i % CHAINS] = out[i % CHAINS] + s * q_s[i]
    return _sum(out) * scale


def _sum(parts):
    """(p0 + p1) + (p2 + p3): the partial sums of step's chains, pairwise."""
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] for i in range(0, len(parts), 2)]
    return parts[0]
