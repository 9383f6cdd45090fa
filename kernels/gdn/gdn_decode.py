# Gated DeltaNet decode (one token per sequence) in CuTe DSL, for kiln's cute_dsl front end
# (docs/cute-dsl.md). Per sequence b and value head hv (query/key head h = hv / (Hv / H)), with
# S = state[slots[b], hv] (float32, d_k x d_v, row-major: S[i][j] at i * d_v + j):
#   q, k <- q / sqrt(sum q^2 + 1e-6), k likewise (L2 norm in the kernel, as the models do)
#   S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = scale S^T q
# S is updated in place; a negative slot skips the sequence (its output is not written).
#
# Launch (kernels/gdn/launch.h computes the same grid on the host):
#   grid = (d_v / tile_v, Hv, batch), block = tile_v threads; thread j of block x owns state column
#   x * tile_v + j and keeps it in registers (d_k floats) for the whole update, so the state is read
#   once and written once with coalesced row accesses, and the reductions over d_k are per thread.
#
# Arguments are plain pointers and 32-bit integers (make_ptr placeholders, no tensor descriptors),
# so the cubin's entry takes the same parameters as a CUDA C++ kernel would:
#   q, k  [batch, H, d_k] dtype        v, o  [batch, Hv, d_v] dtype
#   g, beta [batch, Hv] float32        state [num_slots, Hv, d_k, d_v] float32
#   slots [batch] int32                scale float32; heads_qk (H), heads_v (Hv) int32
import cutlass
import cutlass.cute as cute

_DTYPES = {"fp16": cutlass.Float16, "bf16": cutlass.BFloat16}
L2_EPS = 1e-6  # q and k are normalised as x / sqrt(sum x^2 + 1e-6) (flash-linear-attention's l2norm)


def kiln_export(kiln):
    dk = kiln.constants["head_dim_k"]
    dv = kiln.constants["head_dim_v"]
    tile_v = kiln.constants["tile_v"]
    dtype = _DTYPES[kiln.constants["dtype"]]
    f32 = cutlass.Float32

    @cute.kernel
    def decode(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
               beta: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               scale: cutlass.Float32, heads_qk: cutlass.Int32, heads_v: cutlass.Int32):
        j, _, _ = cute.arch.thread_idx()
        vx, hv, b, = cute.arch.block_idx()
        slot = cute.make_tensor(slots + b, cute.make_layout(1))[0]
        if slot >= 0:
            h = hv // (heads_v // heads_qk)
            col = vx * tile_v + j
            qh = cute.make_tensor(q + (b * heads_qk + h) * dk, cute.make_layout(dk))
            kh = cute.make_tensor(k + (b * heads_qk + h) * dk, cute.make_layout(dk))
            gate = cute.make_tensor(g + b * heads_v + hv, cute.make_layout(1))[0]
            bet = cute.make_tensor(beta + b * heads_v + hv, cute.make_layout(1))[0]
            vj = cute.make_tensor(v + (b * heads_v + hv) * dv + col, cute.make_layout(1))[0].to(f32)
            s_ptr = state + (cutlass.Int64(slot) * heads_v + hv) * (dk * dv) + col
            S = cute.make_tensor(s_ptr, cute.make_layout(dk, stride=dv))

            qq = f32(0.0)
            kk = f32(0.0)
            for i in cutlass.range_constexpr(dk):
                qi = qh[i].to(f32)
                ki = kh[i].to(f32)
                qq = qq + qi * qi
                kk = kk + ki * ki
            rq = cute.math.rsqrt(qq + f32(L2_EPS))
            rk = cute.math.rsqrt(kk + f32(L2_EPS))
            decay = cute.math.exp(gate)

            col_regs = cute.make_rmem_tensor(cute.make_layout(dk), f32)
            kv = f32(0.0)
            for i in cutlass.range_constexpr(dk):
                s = S[i] * decay
                col_regs[i] = s
                kv = kv + s * (kh[i].to(f32) * rk)
            u = bet * (vj - kv)
            out = f32(0.0)
            for i in cutlass.range_constexpr(dk):
                s = col_regs[i] + (kh[i].to(f32) * rk) * u
                S[i] = s
                out = out + s * (qh[i].to(f32) * rq)
            oj = cute.make_tensor(o + (b * heads_v + hv) * dv + col, cute.make_layout(1))
            oj[0] = (out * scale).to(dtype)

    @cute.jit
    def launch(q: cute.Pointer, k: cute.Pointer, v: cute.Pointer, g: cute.Pointer,
               beta: cute.Pointer, o: cute.Pointer, state: cute.Pointer, slots: cute.Pointer,
               scale: cutlass.Float32, heads_qk: cutlass.Int32, heads_v: cutlass.Int32,
               batch: cutlass.Int32):
        decode(q, k, v, g, beta, o, state, slots, scale, heads_qk, heads_v).launch(
            grid=[dv // tile_v, heads_v, batch], block=[tile_v, 1, 1])

    kiln.entry("kiln_gdn_decode", decode)
    gmem = cute.AddressSpace.gmem

    def ptr(t, align):
        return cute.runtime.make_ptr(t, 0, gmem, assumed_align=align)

    return cute.compile(launch, ptr(dtype, 16), ptr(dtype, 16), ptr(dtype, 16), ptr(f32, 4),
                        ptr(f32, 4), ptr(dtype, 16), ptr(f32, 16), ptr(cutlass.Int32, 4),
                        f32(1.0), cutlass.Int32(1), cutlass.Int32(1), cutlass.Int32(1),
                        options=kiln.options)
