# The MTP commit of Gated DeltaNet in CuTe DSL, for kiln's cute_dsl front end (docs/cute-dsl.md):
# after gdn_decode_mtp.py has verified T draft tokens per sequence into a cache by batch position
# ([batch, T, Hv, d_k, d_v] float32, the state after each token) and the sampler has accepted n of
# them, the state after the last accepted token becomes the sequence's pool state:
#   state[slots[b], hv] = cache[b, n - 1, hv]   for every value head hv, n = accepted[b]
# The accepted counts are read on the device (a CUDA graph can hold the commit; nothing waits for
# the sampler on the host). A sequence is left alone (its pool slot untouched) when its slot is
# negative (skipped, as in decode), when n is 0 (no draft token accepted: the pool already holds
# the state before them), and when n is out of contract (n < 0 or n > T: the kernel cannot report
# an error, and a count it cannot read as "the first n tokens" writes nothing, so a bad count never
# puts a state into the pool that no token left; kernels/gdn/README.md, "MTP commit").
#
# A copy, no arithmetic: each (sequence, value head) is d_k * d_v contiguous floats in both the
# cache and the pool (the pool's own layout), split into grid.x contiguous chunks, one per block.
# Launch: the decode shape (kernels/gdn/launch.h) from the same kiln.toml constants, so the runner
# plans it with the same function: grid = (d_v / (tile_v tiles_per_block), Hv, batch), block =
# (tile_v, row_split, tiles_per_block) threads; each thread moves its chunk's 16-byte vectors
# t, t + threads, t + 2 threads, ... (every warp access coalesced), all loads issued before the
# first store. At d_k = d_v = 128 with 128 threads: 4 blocks per head, 16 KiB per block, 8 vectors
# per thread.
#
# Arguments (plain pointers and 32-bit integers, as gdn_decode.py):
#   cache [batch, T, Hv, d_k, d_v] float32 (read)    state [num_slots, Hv, d_k, d_v] float32
#   slots [batch] int32                               accepted [batch] int32 (on the device)
#   tokens (T), heads_v (Hv) int32
import cutlass
import cutlass.cute as cute

import gdn_rule as rule

VEC = 4  # floats per access: 16 bytes (cache and state are 16-byte aligned, runner-checked)


def check_copy(tile_v, row_split, tiles, dk, dv):
    """The split every block of the commit assumes: its chunk of a head is a whole number of
    block-wide rounds of 16-byte vectors."""
    threads = tile_v * row_split * tiles
    blocks = dv // (tile_v * tiles) if tile_v * tiles > 0 else 0
    if (threads < 1 or threads > 1024 or blocks < 1 or dv % (tile_v * tiles) != 0
            or (dk * dv) % blocks != 0 or (dk * dv // blocks) % (threads * VEC) != 0):
        raise ValueError(
            f"gdn_mtp_commit: each block copies d_k x d_v / (d_v / (tile_v x tiles_per_block)) "
            f"floats, which must be a multiple of {VEC} x the block's threads (<= 1024); kiln.toml "
            f"gives tile_v {tile_v}, row_split {row_split}, tiles_per_block {tiles}, d_k {dk}, "
            f"d_v {dv}")
    return threads, blocks


def kiln_export(kiln):
    dk, dv, tile_v, row_split, tiles = rule.layout_constants(kiln)
    threads, blocks = check_copy(tile_v, row_split, tiles, dk, dv)
    head = dk * dv  # floats of one (sequence, value head)
    chunk = head // blocks  # floats per block
    rounds = chunk // (threads * VEC)  # vectors per thread
    f32 = cutlass.Float32
    i64 = cutlass.Int64

    def vectors(ptr, offset):
        """The thread's `rounds` 16-byte vectors from ptr + offset (offset a multiple of VEC)."""
        return cute.make_tensor(ptr + cute.assume(offset, divby=VEC),
                                cute.make_layout((VEC, rounds), stride=(1, threads * VEC)))

    @cute.kernel
    def commit(cache: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               accepted: cute.Pointer, tokens: cutlass.Int32, heads_v: cutlass.Int32):
        x, y, z = cute.arch.thread_idx()
        bx, hv, b, = cute.arch.block_idx()
        tid = (z * row_split + y) * tile_v + x
        slot = rule.scalar(slots + b)
        n = rule.scalar(accepted + b)
        within = bx * chunk + tid * VEC  # the thread's first float in the head
        if slot >= 0:
            if n >= 1:
                if n <= tokens:
                    src = vectors(cache, ((i64(b) * tokens + (n - 1)) * heads_v + hv) * head
                                  + within)
                    dst = vectors(state, (i64(slot) * heads_v + hv) * head + within)
                    held = cute.make_rmem_tensor(cute.make_layout((VEC, rounds)), f32)
                    cute.autovec_copy(src, held)
                    cute.autovec_copy(held, dst)

    @cute.jit
    def launch(cache: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               accepted: cute.Pointer, tokens: cutlass.Int32, heads_v: cutlass.Int32,
               batch: cutlass.Int32):
        commit(cache, state, slots, accepted, tokens, heads_v).launch(
            grid=[blocks, heads_v, batch], block=[tile_v, row_split, tiles])

    kiln.entry("kiln_gdn_mtp_commit", commit)
    ptr = rule.placeholder
    return cute.compile(launch, ptr(f32, 16), ptr(f32, 16), ptr(cutlass.Int32, 4),
                        ptr(cutlass.Int32, 4), cutlass.Int32(2), cutlass.Int32(1),
                        cutlass.Int32(1), options=kiln.options)
