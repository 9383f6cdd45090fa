// GPU numerics of the decoderops group: every variant of the linked artifact (fp16, bf16, fp32)
// over the cases of kernels/decoderops/tests/gpu/cases.h marked kNumerics, against
// kernels/decoderops/reference.h:
//   embed     every output bit for bit: table rows of random bit patterns (NaN payloads
//             included) gathered by random ids, zeros for out-of-range ids (negative, == rows,
//             INT32_MAX, INT32_MIN), repeated ids, no rows at all, rows of 2^21 elements and of
//             2^28 + 4096 (more chunks than grid.y holds: the blocks loop), 70000 tokens (past
//             grid.y's limit)
//   silu_mul  every output within one rounding of the float64 silu(g) * u (fp32: fewer than 8
//             values of fp32 away; reference.h says why), or -0 / +0 where g < -88.7 (exp(-g)
//             overflows fp32 there, for torch's F.silu too)
//   argmax    every row's index exactly, over rows of ties, NaNs (the first wins, whatever its
//             sign or payload), all -inf, all zeros of either sign, +inf ties, the maximum at
//             either end; widths 1, 7 (rows starting anywhere, x itself off a 16-byte boundary),
//             32000, 151936, 151937, 262144, 2^31 - 1; 70000 rows
// Each case: fresh random inputs (the seed is printed; KILN_SEED=<n> replays a run), the output
// poisoned (all bits set: a NaN in every dtype, -1 as an index) with a poisoned guard past it, one
// run() on a non-default stream, then: status ok, every output as above (so every one written),
// the guard untouched, the inputs unchanged. Beside the cases: embed -> silu_mul -> argmax captured
// in a CUDA graph and replayed gives the same outputs; the runner's errors on the device; every
// variant from fresh threads (issue 33). The summary (stdout, and JSON at $KILN_EVIDENCE_OUT)
// records what docs/performance-method.md asks of evidence; the process exits non-zero on any
// failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/gpu_test_support.h"
#include "decoderops/reference.h"
#include "decoderops/tests/gpu/cases.h"
#include "kiln/groups/decoderops.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/decoderops.h"
#include "kiln/runtime.h"

#if !defined(KILN_DECODEROPS_ENABLED)
#error "the artifact has no decoderops group: kiln build --gpu-arch sm_NN --kernels decoderops"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::decoderops::reference;
namespace generated = kiln::generated::decoderops;
namespace dops = kiln::decoderops;
namespace cases = kiln::decoderops::cases;
using cases::Op;

// Elements of a guard past each output.
constexpr std::size_t kGuard = 64;
// Inputs larger than this are not downloaded again to check they are unchanged.
constexpr std::size_t kMaxCheckedInputBytes = std::size_t{1} << 30;
// Failures described per case, at most.
constexpr int kMaxDescribed = 5;

// ---- the three dtypes as bit patterns --------------------------------------------------------

// A variant's element format: fp16 / bf16 as uint16_t patterns, fp32 as uint32_t ones, read and
// written in byte vectors, each pattern widened to uint32_t here.
class Elements {
 public:
  explicit Elements(kiln::DType dtype = kiln::DType::kBFloat16) : dtype_(dtype) {}
  kiln::DType dtype() const { return dtype_; }
  bool is32() const { return dtype_ == kiln::DType::kFloat32; }
  std::size_t bytes() const { return is32() ? 4 : 2; }
  ref::Format format16() const {
    return dtype_ == kiln::DType::kFloat16 ? ref::Format::kFloat16 : ref::Format::kBFloat16;
  }

  double value(std::uint32_t bits) const {
    if (is32()) return ref::fp32ToDouble(bits);
    return decoder()(static_cast<std::uint16_t>(bits));
  }
  // `v` rounded to the format (exact for the values the test plants: 2, -1, 1024, infinities).
  std::uint32_t of(double v) const {
    if (is32()) return ref::fp32Bits(static_cast<float>(v));
    return ref::roundToBits(v, format16());
  }
  // A random finite value of magnitude in [2^lo, 2^(hi + 1)), every mantissa bit drawn.
  std::uint32_t random(Rng& rng, int lo, int hi) const {
    if (!is32()) return randomBits(rng, format16(), lo, hi);
    const std::uint64_t r = rng.next();
    const int exponent = lo + static_cast<int>(r % static_cast<std::uint64_t>(hi - lo + 1));
    const auto mantissa = static_cast<std::uint32_t>((r >> 16) & 0x7fffffu);
    const std::uint32_t sign = ((r >> 40) & 1u) ? 0x80000000u : 0u;
    return sign | (static_cast<std::uint32_t>(exponent + 127) << 23) | mantissa;
  }
  // NaN patterns: quiet, negative quiet, signalling, another payload.
  std::uint32_t nan(int k) const {
    static constexpr std::uint32_t kFp16[] = {0x7e00, 0xfe00, 0x7c01, 0x7d55};
    static constexpr std::uint32_t kBf16[] = {0x7fc0, 0xffc0, 0x7f81, 0x7fd5};
    static constexpr std::uint32_t kFp32[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fd55555u};
    const int i = k % 4;
    return is32() ? kFp32[i] : dtype_ == kiln::DType::kFloat16 ? kFp16[i] : kBf16[i];
  }
  std::uint32_t poison() const { return is32() ? 0xffffffffu : 0xffffu; }
  // silu_mul's acceptance rule (reference.h): one rounding, or fewer than 8 fp32 values.
  bool withinRounding(std::uint32_t got, double exact) const {
    if (is32()) return ref::withinFp32Steps(got, exact);
    return ref::withinOneRounding(static_cast<std::uint16_t>(got), exact, format16());
  }

  std::uint32_t get(const std::vector<unsigned char>& data, std::size_t i) const {
    if (is32()) {
      std::uint32_t b;
      std::memcpy(&b, data.data() + 4 * i, 4);
      return b;
    }
    std::uint16_t b;
    std::memcpy(&b, data.data() + 2 * i, 2);
    return b;
  }
  void set(std::vector<unsigned char>& data, std::size_t i, std::uint32_t bits) const {
    if (is32()) {
      std::memcpy(data.data() + 4 * i, &bits, 4);
    } else {
      const auto b = static_cast<std::uint16_t>(bits);
      std::memcpy(data.data() + 2 * i, &b, 2);
    }
  }

 private:
  const ref::Decoder& decoder() const {
    static const ref::Decoder fp16(ref::Format::kFloat16);
    static const ref::Decoder bf16(ref::Format::kBFloat16);
    return dtype_ == kiln::DType::kFloat16 ? fp16 : bf16;
  }
  kiln::DType dtype_;
};

// `n` random bit patterns (any pattern: the gather copies bits), drawn in parallel.
std::vector<unsigned char> randomBytes(std::size_t n_bytes, std::uint64_t seed) {
  std::vector<unsigned char> data(n_bytes);
  const std::size_t words = n_bytes / 8;
  parallelFor(words, [&](std::size_t begin, std::size_t end, std::size_t part) {
    Rng rng{seed ^ (0x9e3779b97f4a7c15ULL * (part + 1))};
    for (std::size_t w = begin; w < end; ++w) {
      const std::uint64_t r = rng.next();
      std::memcpy(data.data() + 8 * w, &r, 8);
    }
  });
  Rng rng{seed ^ 0x51ULL};
  for (std::size_t i = words * 8; i < n_bytes; ++i)
    data[i] = static_cast<unsigned char>(rng.next());
  return data;
}

// ---- one case ---------------------------------------------------------------------------------

// One (variant, case), prepared: its host inputs, its device buffers (inputs uploaded; the output
// and its guard poisoned) and the problem run() takes.
struct Prepared {
  const cases::Case* spec = nullptr;
  Elements el;
  std::size_t out_elements = 0;  // embed, silu_mul: tokens x width; argmax: rows
  std::vector<std::int32_t> ids;
  std::vector<unsigned char> table, in, x;  // x: x_offset poison elements, then the rows
  DeviceBuffer d_ids, d_table, d_in, d_x, d_out;
  dops::EmbedProblem embed;
  dops::SiluMulProblem silu;
  dops::ArgmaxProblem argmax;
};

std::string allocateOutput(Prepared* c, std::size_t element_bytes) {
  return allocate(&c->d_out, (c->out_elements + kGuard) * element_bytes, nullptr, 0);
}

std::string prepareEmbed(const cases::Case& s, Rng& rng, Prepared* c) {
  const Elements& el = c->el;
  const auto tokens = static_cast<std::size_t>(s.tokens);
  const auto width = static_cast<std::size_t>(s.width);
  c->ids.resize(tokens);
  static constexpr std::int64_t kOutside[] = {-1, 0, 2147483647, -2147483647LL - 1};  // 0: == rows
  int outside = 0;
  for (std::size_t t = 0; t < tokens; ++t) {
    if (s.out_of_range > 0 &&
        static_cast<int>(t % static_cast<std::size_t>(s.out_of_range)) == s.out_of_range - 1) {
      const std::int64_t v = kOutside[outside++ % 4];
      c->ids[t] = static_cast<std::int32_t>(v == 0 ? s.table_rows : v);
    } else {
      c->ids[t] =
          s.table_rows > 0
              ? static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(s.table_rows))
              : 7;  // no rows: every id is out of range
    }
  }
  c->table = randomBytes(static_cast<std::size_t>(s.table_rows) * width * el.bytes(), rng.next());
  c->out_elements = tokens * width;
  for (const std::string& e : {uploadVector(&c->d_ids, c->ids), uploadVector(&c->d_table, c->table),
                               allocateOutput(c, el.bytes())}) {
    if (!e.empty()) return e;
  }
  dops::EmbedProblem& p = c->embed;
  p.dtype = el.dtype();
  p.tokens = s.tokens;
  p.rows = s.table_rows;
  p.width = s.width;
  p.ids = static_cast<const std::int32_t*>(c->d_ids.ptr);
  p.table = c->d_table.ptr;
  p.out = c->d_out.ptr;
  return "";
}

std::string prepareSilu(const cases::Case& s, Rng& rng, Prepared* c) {
  const Elements& el = c->el;
  const auto tokens = static_cast<std::size_t>(s.tokens);
  const auto width = static_cast<std::size_t>(s.width);
  c->in.resize(tokens * 2 * width * el.bytes());
  const int gate_hi = s.extremes ? 7 : 5;  // |g| below 2^8 or 2^6
  const std::uint64_t seed = rng.next();
  parallelFor(tokens * width, [&](std::size_t begin, std::size_t end, std::size_t part) {
    Rng r{seed ^ (0x2545f4914f6cdd1dULL * (part + 1))};
    for (std::size_t k = begin; k < end; ++k) {
      const std::size_t t = k / width, i = k % width;
      el.set(c->in, t * 2 * width + i, el.random(r, -8, gate_hi));    // gate
      el.set(c->in, t * 2 * width + width + i, el.random(r, -4, 3));  // up: |u| < 16
    }
  });
  c->out_elements = tokens * width;
  for (const std::string& e : {uploadVector(&c->d_in, c->in), allocateOutput(c, el.bytes())}) {
    if (!e.empty()) return e;
  }
  dops::SiluMulProblem& p = c->silu;
  p.dtype = el.dtype();
  p.tokens = s.tokens;
  p.width = s.width;
  p.in = c->d_in.ptr;
  p.out = c->d_out.ptr;
  return "";
}

// Row r's pattern (cases.h, Rows::kPatterns); `row` has `width` elements.
void fillPatternRow(const Elements& el, int pattern, std::size_t width, Rng& rng,
                    unsigned char* row_bytes) {
  std::vector<unsigned char> row(width * el.bytes());
  auto set = [&](std::size_t j, std::uint32_t b) { el.set(row, j, b); };
  auto any = [&]() { return static_cast<std::size_t>(rng.next() % width); };
  const std::uint32_t neg_inf = el.of(-INFINITY), pos_inf = el.of(INFINITY);
  const std::uint32_t big = el.of(1024.0);  // above every random value (< 4)
  for (std::size_t j = 0; j < width; ++j) set(j, el.random(rng, -4, 1));
  switch (pattern) {
    case 0:  // random: in fp16 / bf16 many values repeat, so the first of equal maxima matters
      break;
    case 1:  // the maximum planted at three places: the first wins
      for (int k = 0; k < 3; ++k) set(any(), big);
      break;
    case 2:  // one to three NaNs of different signs and payloads: the first wins
      for (int k = 0, n = 1 + static_cast<int>(rng.next() % 3); k < n; ++k) set(any(), el.nan(k));
      break;
    case 3:  // every value -inf: index 0
      for (std::size_t j = 0; j < width; ++j) set(j, neg_inf);
      break;
    case 4:  // zeros of either sign (equal): index 0
      for (std::size_t j = 0; j < width; ++j) set(j, (rng.next() & 1) ? el.of(-0.0) : 0u);
      break;
    case 5:  // the maximum at the last index
      set(width - 1, big);
      break;
    case 6:  // -inf but one finite value
      for (std::size_t j = 0; j < width; ++j) set(j, neg_inf);
      set(any(), el.random(rng, -4, 1));
      break;
    case 7:  // +inf twice: the first
      set(any(), pos_inf);
      set(any(), pos_inf);
      break;
    case 8:  // a NaN at the last index only, beside +inf
      set(any(), pos_inf);
      set(width - 1, el.nan(2));
      break;
    default:  // the maximum at both ends: index 0
      set(0, big);
      set(width - 1, big);
      break;
  }
  std::memcpy(row_bytes, row.data(), row.size());
}

std::string prepareArgmax(const cases::Case& s, Rng& rng, Prepared* c) {
  const Elements& el = c->el;
  const auto rows = static_cast<std::size_t>(s.tokens);
  const auto width = static_cast<std::size_t>(s.width);
  const auto offset = static_cast<std::size_t>(s.x_offset);
  const std::size_t elements = offset + rows * width;
  c->x.assign(elements * el.bytes(), 0xff);
  if (s.rows == cases::Rows::kNearEnd) {
    // -1 everywhere but 2.0 at the last two indices: fill the first row's bytes by doubling.
    const std::uint32_t minus_one = el.of(-1.0);
    unsigned char* base = c->x.data() + offset * el.bytes();
    const std::size_t row_bytes = width * el.bytes();
    std::size_t done = 0;
    std::vector<unsigned char> one(el.bytes());
    el.set(one, 0, minus_one);
    std::memcpy(base, one.data(), el.bytes());
    done = el.bytes();
    while (done < row_bytes) {
      const std::size_t n = std::min(done, row_bytes - done);
      std::memcpy(base + done, base, n);
      done += n;
    }
    el.set(c->x, offset + width - 2, el.of(2.0));
    el.set(c->x, offset + width - 1, el.of(2.0));
  } else {
    const std::uint64_t seed = rng.next();
    parallelFor(rows, [&](std::size_t begin, std::size_t end, std::size_t part) {
      Rng r{seed ^ (0xd1b54a32d192ed03ULL * (part + 1))};
      for (std::size_t row = begin; row < end; ++row) {
        const int pattern =
            s.rows == cases::Rows::kPatterns ? static_cast<int>(row % cases::kArgmaxPatterns) : 0;
        fillPatternRow(el, pattern, width, r, c->x.data() + (offset + row * width) * el.bytes());
      }
    });
  }
  c->out_elements = rows;
  for (const std::string& e : {uploadVector(&c->d_x, c->x), allocateOutput(c, 4)}) {
    if (!e.empty()) return e;
  }
  dops::ArgmaxProblem& p = c->argmax;
  p.dtype = el.dtype();
  p.rows = s.tokens;
  p.width = s.width;
  p.x = static_cast<const unsigned char*>(c->d_x.ptr) + offset * el.bytes();
  p.out = static_cast<std::int32_t*>(c->d_out.ptr);
  return "";
}

// Draws the case's inputs and prepares it; returns "" on success, else what failed.
std::string prepareCase(kiln::DType dtype, const cases::Case& spec, Rng& rng, Prepared* c) {
  c->spec = &spec;
  c->el = Elements(dtype);
  switch (spec.op) {
    case Op::kEmbed:
      return prepareEmbed(spec, rng, c);
    case Op::kSiluMul:
      return prepareSilu(spec, rng, c);
    case Op::kArgmax:
      return prepareArgmax(spec, rng, c);
  }
  return "unknown op";
}

kiln::Status runPrepared(const Prepared& c, cudaStream_t stream) {
  const auto s = reinterpret_cast<kiln::Stream>(stream);
  switch (c.spec->op) {
    case Op::kEmbed:
      return dops::run(c.embed, nullptr, 0, s);
    case Op::kSiluMul:
      return dops::run(c.silu, nullptr, 0, s);
    case Op::kArgmax:
      return dops::run(c.argmax, nullptr, 0, s);
  }
  return kiln::Status(kiln::StatusCode::kInternal, "unknown op");
}

// "" or "<what> was modified; " for an input buffer whose device copy differs from the host's.
std::string unchanged(const char* what, const DeviceBuffer& d, const void* host,
                      std::size_t bytes) {
  if (bytes == 0 || bytes > kMaxCheckedInputBytes) return "";
  const std::vector<unsigned char> after = download<unsigned char>(d);
  if (after.size() < bytes || std::memcmp(after.data(), host, bytes) != 0) {
    return std::string(what) + " was modified; ";
  }
  return "";
}

// The poisoned guard past the output: "" or how many of its elements were written.
std::string guardIntact(const std::vector<unsigned char>& out, std::size_t n, std::size_t elt) {
  std::size_t changed = 0;
  for (std::size_t i = n * elt; i < (n + kGuard) * elt && i < out.size(); ++i) {
    changed += out[i] != 0xff;
  }
  return changed ? std::to_string(changed) + " bytes written past the end of out; " : "";
}

std::string checkEmbed(const Prepared& c) {
  const cases::Case& s = *c.spec;
  const Elements& el = c.el;
  const auto width = static_cast<std::size_t>(s.width);
  const std::vector<unsigned char> out = download<unsigned char>(c.d_out);
  if (out.size() < (c.out_elements + kGuard) * el.bytes()) return "download of out failed";
  std::ostringstream err;
  std::size_t wrong_rows = 0;
  int described = 0;
  for (std::size_t t = 0; t < static_cast<std::size_t>(s.tokens); ++t) {
    const std::int64_t id = c.ids[t];
    const bool valid = id >= 0 && id < s.table_rows;
    const unsigned char* got = out.data() + t * width * el.bytes();
    bool ok = true;
    if (valid) {
      ok = std::memcmp(got, c.table.data() + static_cast<std::size_t>(id) * width * el.bytes(),
                       width * el.bytes()) == 0;
    } else {
      for (std::size_t b = 0; b < width * el.bytes() && ok; ++b) ok = got[b] == 0;
    }
    if (!ok) {
      ++wrong_rows;
      if (described++ < kMaxDescribed) {
        err << "token " << t << " (id " << id << (valid ? "" : ", out of range")
            << ") row differs; ";
      }
    }
  }
  if (wrong_rows) err << wrong_rows << " of " << s.tokens << " rows differ; ";
  err << guardIntact(out, c.out_elements, el.bytes());
  err << unchanged("ids", c.d_ids, c.ids.data(), c.ids.size() * 4);
  err << unchanged("table", c.d_table, c.table.data(), c.table.size());
  return err.str();
}

std::string checkSilu(const Prepared& c) {
  const cases::Case& s = *c.spec;
  const Elements& el = c.el;
  const auto tokens = static_cast<std::size_t>(s.tokens);
  const auto width = static_cast<std::size_t>(s.width);
  const std::vector<unsigned char> out = download<unsigned char>(c.d_out);
  if (out.size() < (c.out_elements + kGuard) * el.bytes()) return "download of out failed";
  std::vector<std::size_t> failures(64, 0);
  std::vector<std::string> notes(64);
  parallelFor(tokens * width, [&](std::size_t begin, std::size_t end, std::size_t part) {
    std::ostringstream note;
    int described = 0;
    for (std::size_t k = begin; k < end; ++k) {
      const std::size_t t = k / width, i = k % width;
      const double g = el.value(el.get(c.in, t * 2 * width + i));
      const double u = el.value(el.get(c.in, t * 2 * width + width + i));
      const std::uint32_t got = el.get(out, k);
      const double exact = ref::siluMul(g, u);
      const bool zero_ok = g < ref::kSiluZeroBelow && el.value(got) == 0.0;
      if (el.withinRounding(got, exact) || zero_ok) continue;
      ++failures[part];
      if (described++ < kMaxDescribed) {
        note << "[" << t << ", " << i << "] silu(" << g << ") * " << u << " = " << exact << ", got "
             << el.value(got) << " (0x" << std::hex << got << std::dec << "); ";
      }
    }
    notes[part] = note.str();
  });
  std::ostringstream err;
  std::size_t total = 0;
  for (std::size_t part = 0; part < failures.size(); ++part) {
    total += failures[part];
    if (failures[part]) err << notes[part];
  }
  if (total) {
    err << total << " of " << c.out_elements << " outputs not within "
        << (el.is32() ? "8 fp32 values" : "one rounding") << " of silu(g) * u; ";
  }
  err << guardIntact(out, c.out_elements, el.bytes());
  err << unchanged("in", c.d_in, c.in.data(), c.in.size());
  return err.str();
}

// ref::argmax of one row, in parallel parts for a long row: the first NaN of the row is the
// first part's that has one; else the first maximum is the first part's whose maximum is largest.
std::int64_t referenceArgmax(const Elements& el, const std::vector<unsigned char>& x,
                             std::size_t first, std::size_t width) {
  auto get = [&](std::size_t j) { return el.value(el.get(x, first + j)); };
  if (width < (std::size_t{1} << 22)) {
    return ref::argmax(static_cast<std::int64_t>(width),
                       [&](std::int64_t j) { return get(static_cast<std::size_t>(j)); });
  }
  std::vector<std::int64_t> best(64, -1);
  std::vector<std::size_t> starts(64, 0);
  parallelFor(width, [&](std::size_t begin, std::size_t end, std::size_t part) {
    starts[part] = begin;
    best[part] = static_cast<std::int64_t>(begin) +
                 ref::argmax(static_cast<std::int64_t>(end - begin), [&](std::int64_t j) {
                   return get(begin + static_cast<std::size_t>(j));
                 });
  });
  for (std::int64_t b : best) {
    if (b >= 0 && std::isnan(get(static_cast<std::size_t>(b)))) return b;
  }
  std::int64_t answer = -1;
  for (std::int64_t b : best) {
    if (b < 0) continue;
    if (answer < 0 || get(static_cast<std::size_t>(b)) > get(static_cast<std::size_t>(answer))) {
      answer = b;
    }
  }
  return answer;
}

std::string checkArgmax(const Prepared& c) {
  const cases::Case& s = *c.spec;
  const Elements& el = c.el;
  const auto rows = static_cast<std::size_t>(s.tokens);
  const auto width = static_cast<std::size_t>(s.width);
  const auto offset = static_cast<std::size_t>(s.x_offset);
  const std::vector<unsigned char> out = download<unsigned char>(c.d_out);
  if (out.size() < (rows + kGuard) * 4) return "download of out failed";
  std::vector<std::int64_t> want(rows);
  if (rows == 1) {
    want[0] = referenceArgmax(el, c.x, offset, width);
  } else {
    parallelFor(rows, [&](std::size_t begin, std::size_t end, std::size_t) {
      for (std::size_t r = begin; r < end; ++r)
        want[r] = referenceArgmax(el, c.x, offset + r * width, width);
    });
  }
  std::ostringstream err;
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    std::int32_t got;
    std::memcpy(&got, out.data() + 4 * r, 4);
    if (got == want[r]) continue;
    if (++wrong <= kMaxDescribed) {
      err << "row " << r << " (pattern " << r % cases::kArgmaxPatterns << "): got " << got
          << ", want " << want[r] << "; ";
    }
  }
  if (wrong) err << wrong << " of " << rows << " rows wrong; ";
  err << guardIntact(out, rows, 4);
  err << unchanged("x", c.d_x, c.x.data(), c.x.size());
  return err.str();
}

// Checks a case that ran; "" on success, else what failed.
std::string checkCase(const Prepared& c) {
  switch (c.spec->op) {
    case Op::kEmbed:
      return checkEmbed(c);
    case Op::kSiluMul:
      return checkSilu(c);
    case Op::kArgmax:
      return checkArgmax(c);
  }
  return "unknown op";
}

// Runs one (variant, case); returns "" on success, else what failed.
std::string runCase(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                    cudaStream_t stream) {
  Prepared c;
  if (const std::string e = prepareCase(v.dtype, spec, rng, &c); !e.empty()) return e;
  const kiln::Status s = runPrepared(c, stream);
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return checkCase(c);
}

// The selector's own answer for a variant on this device (tokens = 0 skips the other checks).
kiln::Status deviceVerdict(const generated::VariantInfo& v) {
  dops::EmbedProblem probe;
  probe.dtype = v.dtype;
  return dops::canImplement(probe, run().sm);
}

const cases::Case* caseNamed(const char* name) {
  for (const cases::Case& c : cases::kCases) {
    if (std::string(c.name) == name) return &c;
  }
  return nullptr;
}

const std::vector<const cases::Case*>& numericsCases() {
  static const std::vector<const cases::Case*> picks = [] {
    std::vector<const cases::Case*> all;
    for (const cases::Case& c : cases::kCases) {
      if ((c.readers & cases::kNumerics) != 0) all.push_back(&c);
    }
    return all;
  }();
  return picks;
}

// The small cases the fresh threads and the graph run: one of each op.
constexpr const char* kSmallCases[] = {"embed_t33_w4104_oob", "silu_t17_w4104", "argmax_r40_w7"};

// ---- tests -----------------------------------------------------------------------------------

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md). On the
// main thread: per thread and variant the three small cases (one per op), with random inputs and
// poisoned outputs, and one non-blocking stream per thread. Then kFreshThreads threads with no
// current CUDA context and one whose current context is another context of the device
// (runOnFreshThreads) call run() for the three, for every variant, in an order that makes the
// first launch of a variant race on several threads. A plain TEST runs before every parameterized
// one, so in a process of its own (--gtest_filter='*FreshThreads*') or first in a whole run,
// nothing has loaded a variant before these threads. Back on the main thread: every status ok,
// the streams synchronize, every output checks out, counted as the variant's "fresh_threads" and
// "fresh_threads_other_context" results.
TEST(DecoderopsFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    const kiln::Status s = deviceVerdict(v);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  using Triple = std::array<std::unique_ptr<Prepared>, 3>;
  std::vector<std::vector<Triple>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) -> std::string {
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        for (int k = 0; k < 3; ++k) {
          const cases::Case* spec = caseNamed(kSmallCases[k]);
          if (spec == nullptr) return std::string(kSmallCases[k]) + ": no such case in cases.h";
          prepared[t][i][k] = std::make_unique<Prepared>();
          const std::string e =
              prepareCase(generated::kVariants[i].dtype, *spec, rng, prepared[t][i][k].get());
          if (!e.empty()) return std::string(kSmallCases[k]) + ": " + e;
        }
        return "";
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        for (int k = 0; k < 3; ++k) {
          const kiln::Status s = runPrepared(*prepared[t][i][k], stream);
          if (!s.ok()) return s;
        }
        return kiln::Status::Ok();
      },
      [&](int t, std::size_t i) {
        std::string failure;
        for (int k = 0; k < 3; ++k) {
          const std::string f = checkCase(*prepared[t][i][k]);
          if (!f.empty()) failure += std::string(kSmallCases[k]) + ": " + f;
        }
        return failure;
      });
}

struct VariantCase {
  std::size_t variant;
  std::size_t spec;
};

std::vector<VariantCase> allCases() {
  std::vector<VariantCase> all;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) {
    for (std::size_t c = 0; c < numericsCases().size(); ++c) all.push_back({i, c});
  }
  return all;
}

class DecoderopsNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(DecoderopsNumerics, MatchesTheReference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *numericsCases()[GetParam().spec];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, spec.name);
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec) << 48)};
  const std::string failure = runCase(v, spec, rng, stream);
  counts.recordCase(failure, "", std::string(v.name) + " " + spec.name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, DecoderopsNumerics, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + numericsCases()[param_info.param.spec]->name;
                         });

// Per variant: embed -> silu_mul -> argmax (the small cases) captured into one CUDA graph on a
// non-blocking stream after a first run loaded the variant, the outputs poisoned again, the graph
// launched twice: every output checks out, as from the direct run.
class DecoderopsGraph : public ::testing::TestWithParam<std::size_t> {};

TEST_P(DecoderopsGraph, CapturedRunsReplay) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "cuda_graph");
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ 0x6a09e667f3bcc908ULL ^ GetParam()};
  std::array<Prepared, 3> c;
  for (int k = 0; k < 3; ++k) {
    const cases::Case* spec = caseNamed(kSmallCases[k]);
    ASSERT_NE(spec, nullptr) << kSmallCases[k];
    ASSERT_EQ(prepareCase(v.dtype, *spec, rng, &c[k]), "");
  }
  std::string failure;
  for (int k = 0; k < 3 && failure.empty(); ++k) {  // loads the variant: not capturable
    const kiln::Status s = runPrepared(c[k], stream);
    if (!s.ok()) failure = "first run: " + s.toString();
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  for (int k = 0; k < 3; ++k) CUDA_OK(cudaMemset(c[k].d_out.ptr, 0xff, c[k].d_out.bytes));
  CUDA_OK(cudaDeviceSynchronize());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (failure.empty()) {
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < 3; ++k) {
      const kiln::Status s = runPrepared(c[k], stream);
      if (!s.ok() && failure.empty()) failure = "captured run: " + s.toString();
    }
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
  }
  if (failure.empty()) {
    std::size_t nodes = 0;
    CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
    if (nodes != 3) failure = "the graph has " + std::to_string(nodes) + " nodes, not 3; ";
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    for (int k = 0; k < 3; ++k) {
      const std::string f = checkCase(c[k]);
      if (!f.empty()) failure += std::string(kSmallCases[k]) + ": " + f;
    }
  }
  counts.recordCase(failure, "", std::string(v.name) + " cuda_graph");
  if (exec != nullptr) CUDA_OK(cudaGraphExecDestroy(exec));
  if (graph != nullptr) CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

std::vector<std::size_t> everyVariant() {
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) all.push_back(i);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Artifact, DecoderopsGraph, ::testing::ValuesIn(everyVariant()),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// Runner errors on the device, per variant: bad problems are refused naming what is wrong and
// touch nothing; zero tokens and rows are no-ops; the admitted problems run and check out, and
// canImplement agrees.
class DecoderopsRunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(DecoderopsRunnerErrors, RefusesBadProblemsAndTreatsZeroAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    counts.skipped += 8;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  Rng rng{run().seed ^ 0x5eedULL ^ GetParam()};
  std::array<Prepared, 3> c;
  for (int k = 0; k < 3; ++k) {
    const cases::Case* spec = caseNamed(kSmallCases[k]);
    ASSERT_NE(spec, nullptr) << kSmallCases[k];
    ASSERT_EQ(prepareCase(v.dtype, *spec, rng, &c[k]), "");
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto untouched = [&]() {
    bool all = true;
    for (const Prepared& p : c) {
      const std::vector<unsigned char> out = download<unsigned char>(p.d_out);
      all = all && !out.empty() &&
            std::all_of(out.begin(), out.end(), [](unsigned char b) { return b == 0xff; });
    }
    return all;
  };
  auto refused = [](const kiln::Status& s, const std::string& part) {
    return s.code() == kiln::StatusCode::kInvalidArgument &&
           s.message().find(part) != std::string::npos;
  };

  {  // embed: a width that is not a multiple of 8
    dops::EmbedProblem p = c[0].embed;
    p.width = 4100;
    const kiln::Status s = dops::run(p, nullptr, 0, kstream);
    record(refused(s, "width 4100 is not a multiple of 8"), "embed width 4100: " + s.toString());
  }
  {  // silu_mul: in one element past an aligned address
    dops::SiluMulProblem p = c[1].silu;
    p.in = static_cast<const unsigned char*>(c[1].d_in.ptr) + c[1].el.bytes();
    const kiln::Status s = dops::run(p, nullptr, 0, kstream);
    record(refused(s, "pointer in"), "misaligned in: " + s.toString());
  }
  {  // silu_mul in place: out overlaps in
    dops::SiluMulProblem p = c[1].silu;
    p.out = c[1].d_in.ptr;
    const kiln::Status s = dops::run(p, nullptr, 0, kstream);
    record(refused(s, "overlaps in"), "silu_mul in place: " + s.toString());
  }
  {  // argmax: out not 4-byte aligned
    dops::ArgmaxProblem p = c[2].argmax;
    p.out = reinterpret_cast<std::int32_t*>(static_cast<unsigned char*>(c[2].d_out.ptr) + 2);
    const kiln::Status s = dops::run(p, nullptr, 0, kstream);
    record(refused(s, "pointer out"), "misaligned argmax out: " + s.toString());
  }
  {  // argmax: width 0
    dops::ArgmaxProblem p = c[2].argmax;
    p.width = 0;
    const kiln::Status s = dops::run(p, nullptr, 0, kstream);
    record(refused(s, "width 0 is not positive"), "argmax width 0: " + s.toString());
  }
  {  // zero tokens / rows: ok, nothing written
    dops::EmbedProblem e = c[0].embed;
    e.tokens = 0;
    dops::SiluMulProblem m = c[1].silu;
    m.tokens = 0;
    dops::ArgmaxProblem a = c[2].argmax;
    a.rows = 0;
    const kiln::Status s1 = dops::run(e, nullptr, 0, kstream);
    const kiln::Status s2 = dops::run(m, nullptr, 0, kstream);
    const kiln::Status s3 = dops::run(a, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(s1.ok() && s2.ok() && s3.ok() && untouched(),
           "tokens / rows 0: " + s1.toString() + ", " + s2.toString() + ", " + s3.toString());
  }
  {  // nothing refused above wrote anything
    record(untouched(), "a refused problem wrote its output");
  }
  {  // the admitted problems run (and canImplement agrees) and check out
    std::string failure;
    for (int k = 0; k < 3; ++k) {
      const kiln::Status can = k == 0   ? dops::canImplement(c[k].embed, run().sm)
                               : k == 1 ? dops::canImplement(c[k].silu, run().sm)
                                        : dops::canImplement(c[k].argmax, run().sm);
      const kiln::Status s = runPrepared(c[k], stream);
      if (!can.ok() || !s.ok())
        failure += "canImplement " + can.toString() + ", run " + s.toString();
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    for (int k = 0; k < 3 && failure.empty(); ++k) failure += checkCase(c[k]);
    record(failure.empty(), "valid problems: " + failure);
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, DecoderopsRunnerErrors, ::testing::ValuesIn(everyVariant()),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "decoderops";
  f.case_key = "case";
  f.per_variant_totals = true;
  std::ostringstream json;
  json << "\"rules\": {\"embed\": \"bit exact\", \"silu_mul\": \"one rounding (fp32: fewer than "
       << ref::kFp32Steps << " fp32 values); 0 where g < " << ref::kSiluZeroBelow
       << "\", \"argmax\": \"exact\"}, \"cases\": [";
  for (std::size_t i = 0; i < numericsCases().size(); ++i) {
    const cases::Case& c = *numericsCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"op\": \"" << cases::opName(c.op)
         << "\", \"tokens\": " << c.tokens << ", \"width\": " << c.width << "}";
  }
  json << "]";
  f.extra_json = json.str();
  // Not relative L2 bounds: the rules above are per element (the JSON's "rules").
  f.bound_fp16 = 0.0;
  f.bound_bf16 = 0.0;
  f.artifact_tag = kiln_artifact_tag();
  f.artifact_fingerprint = kiln_artifact_fingerprint();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  return kiln::gpu_test::numericsMain(argc, argv, reportFormat);
}
