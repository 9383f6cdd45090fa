// The decoderops group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (decoderops_numerics_test.cpp) checks every case marked kNumerics on
//     every variant (fp16, bf16, fp32) against reference.h;
//   - the benchmark (bench/decoderops_bridge.cpp exports the cases marked kBench, in this order, to
//     decoderops_vs_torch.py) times every case marked kBench against eager PyTorch.
// Plain constexpr data (no CUDA, no runtime), kept under tests/ so that editing a case never makes
// an artifact stale (tests/ and bench/ are no input of the artifact). tests/gpu/README.md has the
// convention.
#pragma once

namespace kiln::decoderops::cases {

// Who reads a case: bits of Case::readers.
inline constexpr unsigned kNumerics = 1u << 0;  // checked against the reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peer

enum class Op { kEmbed, kSiluMul, kArgmax };

inline constexpr const char* opName(Op op) {
  return op == Op::kEmbed ? "embed" : op == Op::kSiluMul ? "silu_mul" : "argmax";
}

// The argmax rows' contents (numerics only; the bench's rows are random): with kPatterns, row r
// is pattern r % kArgmaxPatterns of the numerics test (ties, NaNs, -inf rows, equal rows, the
// maximum at either end, +inf ties); with kNearEnd, every element is -1 but two 2.0 at the last
// two indices (the answer: width - 2).
enum class Rows { kRandom, kPatterns, kNearEnd };
inline constexpr int kArgmaxPatterns = 10;

struct Case {
  const char* name;
  Op op;
  long long tokens;  // embed, silu_mul: tokens; argmax: rows
  long long width;
  long long table_rows = 0;   // embed: rows of the table (the vocab)
  int out_of_range = 0;       // embed: every n-th id is outside [0, table_rows) (0: none)
  bool extremes = false;      // silu_mul: |gate| up to 2^8 (exp(-g) overflows fp32 below -88.7)
  Rows rows = Rows::kRandom;  // argmax
  int x_offset = 0;  // argmax: x starts this many elements past an aligned address (rows of
                     // width * elt not a multiple of 16 only)
  unsigned readers = kNumerics;
};

inline constexpr Case kCases[] = {
    // The benchmark's rows (Qwen3-8B: vocab 151936, hidden 4096, intermediate 12288): decode of one
    // token, a batch of 64, a prefill chunk of 4096; all checked too.
    {.name = "embed_t1_h4096",
     .op = Op::kEmbed,
     .tokens = 1,
     .width = 4096,
     .table_rows = 151936,
     .readers = kNumerics | kBench},
    {.name = "embed_t64_h4096",
     .op = Op::kEmbed,
     .tokens = 64,
     .width = 4096,
     .table_rows = 151936,
     .readers = kNumerics | kBench},
    {.name = "embed_t4096_h4096",
     .op = Op::kEmbed,
     .tokens = 4096,
     .width = 4096,
     .table_rows = 151936,
     .readers = kNumerics | kBench},
    {.name = "silu_t1_w12288",
     .op = Op::kSiluMul,
     .tokens = 1,
     .width = 12288,
     .readers = kNumerics | kBench},
    {.name = "silu_t64_w12288",
     .op = Op::kSiluMul,
     .tokens = 64,
     .width = 12288,
     .readers = kNumerics | kBench},
    {.name = "silu_t4096_w12288",
     .op = Op::kSiluMul,
     .tokens = 4096,
     .width = 12288,
     .readers = kNumerics | kBench},
    {.name = "argmax_r1_v151936",
     .op = Op::kArgmax,
     .tokens = 1,
     .width = 151936,
     .readers = kNumerics | kBench},
    {.name = "argmax_r64_v151936",
     .op = Op::kArgmax,
     .tokens = 64,
     .width = 151936,
     .readers = kNumerics | kBench},

    // Embed: out-of-range ids (negative, == rows, INT32_MAX, INT32_MIN in turn) write zeros; the
    // smallest row (8 elements); a row of 513 bf16 vectors (a second, short chunk); repeated ids;
    // rows of 512 chunks (2^21 bf16), and of more chunks than grid.y holds (2^28 + 4096
    // elements: 65537 chunks in fp16 / bf16, 131074 in fp32, so blocks loop over a second one);
    // more tokens than grid.y holds; no table rows at all.
    {.name = "embed_t7_w8_oob",
     .op = Op::kEmbed,
     .tokens = 7,
     .width = 8,
     .table_rows = 5,
     .out_of_range = 2},
    {.name = "embed_t33_w4104_oob",
     .op = Op::kEmbed,
     .tokens = 33,
     .width = 4104,
     .table_rows = 1000,
     .out_of_range = 5},
    {.name = "embed_t300_w12288_repeat",
     .op = Op::kEmbed,
     .tokens = 300,
     .width = 12288,
     .table_rows = 3},
    {.name = "embed_t2_w2097152", .op = Op::kEmbed, .tokens = 2, .width = 2097152, .table_rows = 3},
    {.name = "embed_t2_w268439552",
     .op = Op::kEmbed,
     .tokens = 2,
     .width = 268439552,
     .table_rows = 2},
    {.name = "embed_t70000_w8_oob",
     .op = Op::kEmbed,
     .tokens = 70000,
     .width = 8,
     .table_rows = 1000,
     .out_of_range = 97},
    {.name = "embed_t5_rows0", .op = Op::kEmbed, .tokens = 5, .width = 16, .table_rows = 0},

    // silu_mul: the smallest row, a partial second chunk, a row of many chunks, a row of more
    // chunks than grid.y holds, many tokens, and gates up to +-256 (fp16: silu(g) * up of magnitude
    // up to 4096; bf16 / fp32: exp(-g) overflows
    // below -88.7, where the kernel, like torch, gives -0).
    {.name = "silu_t3_w8", .op = Op::kSiluMul, .tokens = 3, .width = 8},
    {.name = "silu_t17_w4104", .op = Op::kSiluMul, .tokens = 17, .width = 4104},
    {.name = "silu_t1_w1048584", .op = Op::kSiluMul, .tokens = 1, .width = 1048584},
    {.name = "silu_t1_w268439552", .op = Op::kSiluMul, .tokens = 1, .width = 268439552},
    {.name = "silu_t70000_w8", .op = Op::kSiluMul, .tokens = 70000, .width = 8},
    {.name = "silu_t257_w3072_extremes",
     .op = Op::kSiluMul,
     .tokens = 257,
     .width = 3072,
     .extremes = true},

    // argmax over the row patterns: one element; 7 (rows of 14 / 28 bytes start anywhere, and x
    // itself one element past a 16-byte boundary); Llama-2's 32000; Qwen3's 151936 and one more
    // (odd rows); Gemma's 262144; more rows than grid.y holds; the widest row (2^31 - 1
    // elements: 4 GiB in fp16 / bf16, 8 GiB in fp32), its answer near the last index.
    {.name = "argmax_r40_w1", .op = Op::kArgmax, .tokens = 40, .width = 1, .rows = Rows::kPatterns},
    {.name = "argmax_r40_w7",
     .op = Op::kArgmax,
     .tokens = 40,
     .width = 7,
     .rows = Rows::kPatterns,
     .x_offset = 1},
    {.name = "argmax_r40_w32000",
     .op = Op::kArgmax,
     .tokens = 40,
     .width = 32000,
     .rows = Rows::kPatterns},
    {.name = "argmax_r30_w151936",
     .op = Op::kArgmax,
     .tokens = 30,
     .width = 151936,
     .rows = Rows::kPatterns},
    {.name = "argmax_r30_w151937",
     .op = Op::kArgmax,
     .tokens = 30,
     .width = 151937,
     .rows = Rows::kPatterns},
    {.name = "argmax_r20_w262144",
     .op = Op::kArgmax,
     .tokens = 20,
     .width = 262144,
     .rows = Rows::kPatterns},
    {.name = "argmax_r70000_w7",
     .op = Op::kArgmax,
     .tokens = 70000,
     .width = 7,
     .rows = Rows::kPatterns},
    {.name = "argmax_r1_w2147483647",
     .op = Op::kArgmax,
     .tokens = 1,
     .width = 2147483647,
     .rows = Rows::kNearEnd},
};

}  // namespace kiln::decoderops::cases
