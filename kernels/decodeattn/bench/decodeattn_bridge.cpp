// A C bridge from Python (ctypes) to the decodeattn runner of a kiln artifact, for
// kernels/decodeattn/bench/decodeattn_vs_torch.py: the benchmark passes raw device pointers
// (torch's data_ptr()), sizes, a workspace and its CUDA stream, and gets a status code and message
// back; it reads its rows from here too (the bench cases of
// kernels/decodeattn/tests/gpu/cases.h). The artifact's library is linked statically into this
// shared library with its symbols hidden, so only these functions show.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "bridge.h"
#include "decodeattn/tests/gpu/cases.h"
#include "kiln/groups/decodeattn.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/decodeattn.h"

#if !defined(KILN_DECODEATTN_ENABLED)
#error "the artifact has no decodeattn group: kiln build --gpu-arch sm_NN --kernels decodeattn"
#endif

namespace {

// Shapes as one array, so that the three entry points below cannot take them in different orders:
// {dtype (0 fp16, 1 bf16), batch, q_heads, kv_heads, head_dim, page_size, num_pages,
//  max_pages_per_seq, max_seq_len, multiprocessors, kv_layout (0 NHD, 1 HND), query_tokens}.
constexpr int kShapeFields = 12;

kiln::decodeattn::Problem problemOf(const int* shape, float scale) {
  kiln::decodeattn::Problem p;
  p.dtype = kiln_bench::dtypeOfCode(shape[0]);
  p.batch = shape[1];
  p.q_heads = shape[2];
  p.kv_heads = shape[3];
  p.head_dim = shape[4];
  p.page_size = shape[5];
  p.num_pages = shape[6];
  p.max_pages_per_seq = shape[7];
  p.max_seq_len = shape[8];
  p.multiprocessors = shape[9];
  p.kv_layout =
      shape[10] == 1 ? kiln::decodeattn::KvLayout::kHND : kiln::decodeattn::KvLayout::kNHD;
  p.query_tokens = shape[11];
  p.scale = scale;
  return p;
}

}  // namespace

KILN_BENCH_EXPORT int kiln_bench_decodeattn_shape_fields(void) {
  return kShapeFields;
}

// Runs decode attention. Returns 0 on success, else the kiln::StatusCode value, with the status
// text in `message`. stream: a cudaStream_t (torch.cuda.current_stream().cuda_stream).
KILN_BENCH_EXPORT int kiln_bench_decodeattn(const int* shape, float scale, void* out, const void* q,
                                            const void* k_cache, const void* v_cache,
                                            const std::int32_t* page_table,
                                            const std::int32_t* seq_lens, void* workspace,
                                            std::size_t workspace_bytes, void* stream,
                                            char* message, std::size_t message_bytes) {
  if (shape[0] != 0 && shape[0] != 1) {
    kiln_bench::copyMessage(
        "dtype code " + std::to_string(shape[0]) + " is not 0 (fp16) or 1 (bf16)", message,
        message_bytes);
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  if (shape[10] != 0 && shape[10] != 1) {
    kiln_bench::copyMessage(
        "kv_layout code " + std::to_string(shape[10]) + " is not 0 (NHD) or 1 (HND)", message,
        message_bytes);
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  kiln::decodeattn::Problem p = problemOf(shape, scale);
  p.out = out;
  p.q = q;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.page_table = page_table;
  p.seq_lens = seq_lens;
  const kiln::Status s =
      kiln::decodeattn::run(p, workspace, workspace_bytes, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

// workspaceSize() of the problem (pointers play no part in it).
KILN_BENCH_EXPORT std::size_t kiln_bench_decodeattn_workspace(const int* shape, float scale) {
  return kiln::decodeattn::workspaceSize(problemOf(shape, scale));
}

// The split count run() uses on a device of `multiprocessors` SMs; 0 when not admitted.
KILN_BENCH_EXPORT int kiln_bench_decodeattn_splits(const int* shape, float scale,
                                                   int multiprocessors) {
  kiln::decodeattn::Problem p = problemOf(shape, scale);
  // numSplits admits the problem as a whole; aligned placeholders stand in for the pointers.
  static const std::int32_t placeholder[4] = {};
  p.out = reinterpret_cast<void*>(0x100);
  p.q = p.k_cache = p.v_cache = reinterpret_cast<const void*>(0x100);
  p.page_table = p.seq_lens = placeholder;
  return kiln::decodeattn::numSplits(p, multiprocessors);
}

// The i-th decodeattn variant: its name, head dim and dtype code (0 fp16, 1 bf16). Returns 0, or
// -1 when i is out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* head_dim,
                                         int* dtype) {
  if (i < 0 || i >= static_cast<int>(std::size(kiln::generated::decodeattn::kVariants))) return -1;
  const auto& v = kiln::generated::decodeattn::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (head_dim != nullptr) *head_dim = v.head_dim;
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  return 0;
}

// The bench cases (kernels/decodeattn/tests/gpu/cases.h, those marked kBench), each as the fields
// {batch, keys, q_heads, kv_heads, head_dim, page_size, query_tokens, max_seq_len,
//  multiprocessors, scale_factor}: `batch` sequences of `keys` keys each (a bench case has one
// length). kiln_bench_decodeattn_case returns 0, or -1 when i is out of range, the case has not
// one length, or num_fields is not kiln_bench_decodeattn_case_fields().
namespace {
namespace cases = kiln::decodeattn::cases;
constexpr int kCaseFields = 10;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_decodeattn_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_decodeattn_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_decodeattn_case(int i, char* name, std::size_t name_bytes,
                                                 double* fields, int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr || c->lengths.count != 1) return -1;
  const double values[kCaseFields] = {
      static_cast<double>(cases::batchOf(*c)), static_cast<double>(c->lengths.values[0]),
      static_cast<double>(c->q_heads),         static_cast<double>(c->kv_heads),
      static_cast<double>(c->head_dim),        static_cast<double>(c->page_size),
      static_cast<double>(c->query_tokens),    static_cast<double>(c->max_seq_len),
      static_cast<double>(c->multiprocessors), c->scale_factor};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
