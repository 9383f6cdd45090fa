// A C bridge from Python (ctypes) to the decoderops runner of a kiln artifact, for
// kernels/decoderops/bench/decoderops_vs_torch.py: the benchmark passes raw device pointers
// (torch's data_ptr()), sizes and its CUDA stream, and gets a status code and message back; it
// reads its shapes from here too (the bench cases of kernels/decoderops/tests/gpu/cases.h). The
// artifact's library is linked statically into this shared library with its symbols hidden, so
// only these functions show.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "bridge.h"
#include "decoderops/tests/gpu/cases.h"
#include "kiln/groups/decoderops.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/decoderops.h"

#if !defined(KILN_DECODEROPS_ENABLED)
#error "the artifact has no decoderops group: kiln build --gpu-arch sm_NN --kernels decoderops"
#endif

namespace {

// This group's dtype codes: 0 fp16, 1 bf16, 2 fp32 (bridge.h's dtypeCode knows the first two).
int codeOf(kiln::DType dtype) {
  return dtype == kiln::DType::kFloat16 ? 0 : dtype == kiln::DType::kBFloat16 ? 1 : 2;
}

// The dtype of `code` into *dtype; false (and the message) for a code outside 0..2.
bool dtypeOf(int code, kiln::DType* dtype, char* message, std::size_t message_bytes) {
  if (code < 0 || code > 2) {
    kiln_bench::copyMessage(
        "dtype code " + std::to_string(code) + " is not 0 (fp16), 1 (bf16) or 2 (fp32)", message,
        message_bytes);
    return false;
  }
  *dtype = code == 0   ? kiln::DType::kFloat16
           : code == 1 ? kiln::DType::kBFloat16
                       : kiln::DType::kFloat32;
  return true;
}

int finish(const kiln::Status& s, char* message, std::size_t message_bytes) {
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

}  // namespace

// Each returns 0 on success, else the kiln::StatusCode value, with the status text in `message`.
// stream: a cudaStream_t (torch.cuda.current_stream().cuda_stream), NULL for the legacy default.
KILN_BENCH_EXPORT int kiln_bench_decoderops_embed(int dtype, std::int64_t tokens, std::int64_t rows,
                                                  std::int64_t width, const std::int32_t* ids,
                                                  const void* table, void* out, void* stream,
                                                  char* message, std::size_t message_bytes) {
  kiln::decoderops::EmbedProblem p;
  if (!dtypeOf(dtype, &p.dtype, message, message_bytes)) {
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  p.tokens = tokens;
  p.rows = rows;
  p.width = width;
  p.ids = ids;
  p.table = table;
  p.out = out;
  return finish(kiln::decoderops::run(p, nullptr, 0, static_cast<kiln::Stream>(stream)), message,
                message_bytes);
}

KILN_BENCH_EXPORT int kiln_bench_decoderops_silu_mul(int dtype, std::int64_t tokens,
                                                     std::int64_t width, const void* in, void* out,
                                                     void* stream, char* message,
                                                     std::size_t message_bytes) {
  kiln::decoderops::SiluMulProblem p;
  if (!dtypeOf(dtype, &p.dtype, message, message_bytes)) {
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  p.tokens = tokens;
  p.width = width;
  p.in = in;
  p.out = out;
  return finish(kiln::decoderops::run(p, nullptr, 0, static_cast<kiln::Stream>(stream)), message,
                message_bytes);
}

KILN_BENCH_EXPORT int kiln_bench_decoderops_argmax(int dtype, std::int64_t rows, std::int64_t width,
                                                   const void* x, std::int32_t* out, void* stream,
                                                   char* message, std::size_t message_bytes) {
  kiln::decoderops::ArgmaxProblem p;
  if (!dtypeOf(dtype, &p.dtype, message, message_bytes)) {
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  p.rows = rows;
  p.width = width;
  p.x = x;
  p.out = out;
  return finish(kiln::decoderops::run(p, nullptr, 0, static_cast<kiln::Stream>(stream)), message,
                message_bytes);
}

KILN_BENCH_EXPORT int kiln_bench_variant_count(void) {
  return static_cast<int>(std::size(kiln::generated::decoderops::kVariants));
}

// The i-th decoderops variant: its name and dtype code (0 fp16, 1 bf16, 2 fp32). Returns 0, or -1
// when i is out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* dtype) {
  if (i < 0 || i >= kiln_bench_variant_count()) return -1;
  const auto& v = kiln::generated::decoderops::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (dtype != nullptr) *dtype = codeOf(v.dtype);
  return 0;
}

// The bench cases (kernels/decoderops/tests/gpu/cases.h, those marked kBench), each as the fields
// {op (0 embed, 1 silu_mul, 2 argmax), tokens (argmax: rows), width, table_rows};
// kiln_bench_decoderops_case returns 0, or -1 when i is out of range or num_fields is not
// kiln_bench_decoderops_case_fields().
namespace {
namespace cases = kiln::decoderops::cases;
constexpr int kCaseFields = 4;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_decoderops_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_decoderops_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_decoderops_case(int i, char* name, std::size_t name_bytes,
                                                 double* fields, int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr) return -1;
  const double values[kCaseFields] = {static_cast<double>(static_cast<int>(c->op)),
                                      static_cast<double>(c->tokens), static_cast<double>(c->width),
                                      static_cast<double>(c->table_rows)};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
