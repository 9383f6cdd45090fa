// GPU numerics of the gdn group (Gated DeltaNet decode): every variant of the linked artifact
// against the float64 reference in kernels/gdn/reference.h, over the cases of
// kernels/gdn/tests/gpu/cases.h marked kNumerics. gdn_decode variants (one token, state in place)
// over batches 1 .. 256 and Hv / H ratios 1 / 2 / 3 / 4 / 24; gdn_decode_mtp variants (T draft
// tokens, every intermediate state into a cache, the pool only read) over T = 1 .. 8, batches
// 1 .. 256 and the same ratios (the second half of this file); and the benchmark's rows.
//
// Each case: fresh random q, k, v (random 16-bit bit patterns, exact on the host), gates g in
// [-1, 0] and beta in [0, 1] (float32, as the model computes them; for the fused-gating variants
// the model's gating inputs a, b, A_log and dt_bias instead: makeGates), a float32 state pool
// with more slots than sequences whose slots are handed out in a random permutation, and some
// sequences given a negative slot (skipped). The output and a guard past it are poisoned (0xffff,
// NaN in fp16 and bf16); the state pool has a poisoned guard past it. One run() on a non-default
// stream, then: status ok; every output of a live sequence written and finite; every output of a
// skipped sequence still poison and the out guard untouched (the runner's contract: "a negative
// slot skips the sequence: neither its state nor its output is touched"); every state slot no live
// sequence owns, and the state guard, bit-identical to what was uploaded; relative L2 error of the
// outputs and of the updated state slots within the bounds. Runner errors (unbuilt head dims, Hv
// not a multiple of H, null and misaligned pointers, batch 0) are checked on the device too, each
// leaving out and state untouched.
//
// Multi-token cases: the same inputs per token ([batch, T, ...] layouts), the output, the cache
// and guards past both poisoned (the cache with 0xffffffff, a float NaN), in the three cache
// layouts of MtpProblem: [batch, T, Hv, d_k, d_v]; entries mapped by cache_slots into a larger
// cache; entries mapped into the state pool itself; only the last token's state, into the
// sequence's own slot (cache_slots -1, ..., -1, slots[b]); the mapped ones with some tokens'
// entries negative (not kept). After one run(): every output and every kept cache entry (the state
// after each token) of a live sequence written, finite and, per token t, within the bounds against
// the reference; every output of a skipped sequence still poison, and every cache entry no live
// token keeps as it was (poison, or in the pool its uploaded state: the slots the batch reads among
// them); the guards untouched; outside the pool layouts the whole state pool bit-identical to what
// was uploaded, since the pool is only read.
// The runner's multi-token errors (tokens 0 and 9, null / misaligned / pool-overlapping cache,
// unbuilt head dims, batch 0) are checked on the device too, each leaving every buffer untouched.
//
// Prefill cases (gdn_prefill, issue 28): ragged packed batches against the token-by-token rule,
// then a decode step from the written states (the prefill section below has the details).
//
// MTP commit cases (gdn_mtp_commit, issue 28): a multi-token verify into a [batch, T] cache
// (checked as above), the pool's slots that no live sequence owns then poisoned, the accepted
// counts uploaded (0, 1, all T, or every count in one batch, T + 1 and -1 among them), one commit
// run(): the pool bit for bit what reference::commitMtp makes of it (committed slots hold the
// accepted cache entry; slots of sequences with count 0, an out-of-contract count or a negative
// slot, and the poisoned ones, unchanged; the guard untouched) and the cache unchanged; then a
// gdn_decode step from the committed pool against the float64 reference over each sequence's
// accepted tokens and the step's token. The commit's runner errors on the device, and the commit
// from fresh threads (GdnFreshThreads) too.
//
// The summary (stdout, and JSON at $KILN_EVIDENCE_OUT) records what docs/performance-method.md asks
// of evidence; the process exits non-zero on any failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/bits16.h"
#include "common/gpu_test_support.h"
#include "gdn/reference.h"
#include "gdn/tests/gpu/cases.h"
#include "kiln/groups/gdn.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/gdn.h"
#include "kiln/runtime.h"

#if !defined(KILN_GDN_ENABLED)
#error "the artifact has no gdn group: kiln build --gpu-arch sm_NN --kernels gdn"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::gdn::reference;
namespace generated = kiln::generated::gdn;
namespace gdn = kiln::gdn;
namespace cases = kiln::gdn::cases;

// Output bounds (docs/performance-method.md, Method 2): inputs exact in the dtype, fp32
// arithmetic, the output
// rounded once to the dtype: ~u / sqrt(3) relative L2 from the rounding (u = 2^-11 fp16, 2^-8
// bf16), and the same bounds as the other groups (about 4x / 3x that) for the fp32 part.
// The state is float32 in and out and never rounded to the dtype. Each element's update is
// exp(g) s + k_i u with u = beta (v - sum_i s_i k_i): a dot product of 128 terms in fp32 (error
// <= ~128 * 2^-24 ~ 8e-6 worst case, ~sqrt(128) * 2^-24 ~ 7e-7 typical), one fast exp and one
// rsqrt (each a few ulp, ~2e-7), one FMA. So ~1e-6 relative L2 is expected; 1e-4 leaves 100x
// room and still catches any real error (a wrong column, a missing decay, a bf16 rounding of the
// state, ~4e-3, is 40x over it). The multi-token cache holds the state after up to 8 such steps,
// whose errors add at most linearly (8 x ~1e-6): the same bound, checked per token.
constexpr double kRelL2BoundState = 1e-4;

// ---- 16-bit formats --------------------------------------------------------------------------

bool isFp16(kiln::DType dtype) {
  return dtype == kiln::DType::kFloat16;
}

kiln::common::Format formatOf(bool fp16) {
  return fp16 ? kiln::common::Format::kFloat16 : kiln::common::Format::kBFloat16;
}

double decode16(bool fp16, std::uint16_t bits) {
  return kiln::common::toDouble(bits, formatOf(fp16));
}

// Uniform in [lo, hi), exactly a float.
float uniform(Rng& rng, float lo, float hi) {
  const double u = static_cast<double>(rng.next() >> 40) / static_cast<double>(1ull << 24);
  return static_cast<float>(lo + (hi - lo) * u);
}

// ---- variants -------------------------------------------------------------------------------

// Whether variant i has the entry kernel `entry` (gdn_decode_*: kiln_gdn_decode; gdn_decode_mtp_*:
// kiln_gdn_decode_mtp): which of the two problems it serves.
bool hasEntry(const generated::VariantInfo& v, const char* entry) {
  const kiln_variant* variant = v.variant();
  for (int e = 0; variant != nullptr && e < variant->num_entries; ++e) {
    if (std::strcmp(variant->entries[e], entry) == 0) return true;
  }
  return false;
}
constexpr const char kDecodeEntry[] = "kiln_gdn_decode";
constexpr const char kMtpEntry[] = "kiln_gdn_decode_mtp";
constexpr const char kCommitEntry[] = "kiln_gdn_mtp_commit";

std::vector<std::size_t> variantsWith(const char* entry) {
  std::vector<std::size_t> picks;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) {
    if (hasEntry(generated::kVariants[i], entry)) picks.push_back(i);
  }
  return picks;
}

// The first variant with `entry` of each built dtype (fp16, then bf16).
std::vector<std::size_t> firstPerDtypeWith(const char* entry) {
  std::vector<std::size_t> picks;
  for (const kiln::DType dtype : {kiln::DType::kFloat16, kiln::DType::kBFloat16}) {
    for (std::size_t i : variantsWith(entry)) {
      if (generated::kVariants[i].dtype == dtype) {
        picks.push_back(i);
        break;
      }
    }
  }
  return picks;
}

// ---- gates ----------------------------------------------------------------------------------

// The gates of `entries` (token, value head) pairs laid out [.., Hv], in the form the variant
// takes. Given gates (fused_gating false): g in [-1, 0] and beta in [0, 1], float32, as the model
// computes them. Fused gating: the model's inputs, a and b random 16-bit values (|a| < 4,
// |b| < 8; every 97th a is 24, past softplus's threshold of 20), a_log in [-2, 1] and dt_bias in
// [-2, 1] float32 per value head; the reference's g and beta are computed from them in float64
// (reference::gates), so the kernel's gating is checked through the outputs and states.
struct GateInputs {
  bool fused = false;
  std::vector<float> g, beta;
  std::vector<std::uint16_t> a, b;
  std::vector<float> a_log, dt_bias;
  std::vector<double> ref_g, ref_beta;  // per entry: what the reference uses
  DeviceBuffer d_g, d_beta, d_a, d_b, d_a_log, d_dt_bias;

  // Uploads the form's arrays; "" or what failed.
  std::string upload() {
    if (!fused) {
      for (const std::string& e :
           {allocate(&d_g, g.size() * 4, g.data(), g.size() * 4),
            allocate(&d_beta, beta.size() * 4, beta.data(), beta.size() * 4)})
        if (!e.empty()) return e;
      return "";
    }
    for (const std::string& e :
         {allocate(&d_a, a.size() * 2, a.data(), a.size() * 2),
          allocate(&d_b, b.size() * 2, b.data(), b.size() * 2),
          allocate(&d_a_log, a_log.size() * 4, a_log.data(), a_log.size() * 4),
          allocate(&d_dt_bias, dt_bias.size() * 4, dt_bias.data(), dt_bias.size() * 4)})
      if (!e.empty()) return e;
    return "";
  }
  // The problem's gate fields (Problem or MtpProblem), after upload().
  template <typename P>
  void into(P* p) const {
    if (!fused) {
      p->g = static_cast<const float*>(d_g.ptr);
      p->beta = static_cast<const float*>(d_beta.ptr);
      return;
    }
    p->gating.a = d_a.ptr;
    p->gating.b = d_b.ptr;
    p->gating.a_log = static_cast<const float*>(d_a_log.ptr);
    p->gating.dt_bias = static_cast<const float*>(d_dt_bias.ptr);
  }
};

void makeGates(Rng& rng, bool fused, bool fp16, std::size_t entries, int hv, GateInputs* gates) {
  gates->fused = fused;
  gates->ref_g.resize(entries);
  gates->ref_beta.resize(entries);
  if (!fused) {
    gates->g.resize(entries);
    gates->beta.resize(entries);
    for (std::size_t i = 0; i < entries; ++i) {
      gates->g[i] = uniform(rng, -1.0f, 0.0f);
      gates->beta[i] = uniform(rng, 0.0f, 1.0f);
      gates->ref_g[i] = gates->g[i];
      gates->ref_beta[i] = gates->beta[i];
    }
    return;
  }
  const std::uint16_t twenty_four = fp16 ? 0x4e00 : 0x41c0;
  gates->a.resize(entries);
  gates->b.resize(entries);
  gates->a_log.resize(static_cast<std::size_t>(hv));
  gates->dt_bias.resize(static_cast<std::size_t>(hv));
  for (auto& x : gates->a_log) x = uniform(rng, -2.0f, 1.0f);
  for (auto& x : gates->dt_bias) x = uniform(rng, -2.0f, 1.0f);
  for (std::size_t i = 0; i < entries; ++i) {
    gates->a[i] = i % 97 == 0 ? twenty_four : randomBits(rng, formatOf(fp16), -4, 1);
    gates->b[i] = randomBits(rng, formatOf(fp16), -4, 2);
    const std::size_t h = i % static_cast<std::size_t>(hv);
    const ref::Gates gt = ref::gates(decode16(fp16, gates->a[i]), decode16(fp16, gates->b[i]),
                                     gates->a_log[h], gates->dt_bias[h]);
    gates->ref_g[i] = gt.g;
    gates->ref_beta[i] = gt.beta;
  }
}

// ---- cases ----------------------------------------------------------------------------------

// The cases are kernels/gdn/tests/gpu/cases.h's marked kNumerics: those of `entry` (decode or
// multi-token), each on the variants of its head dims and gate form.
std::vector<const cases::Case*> numericsCasesOf(cases::Entry entry) {
  std::vector<const cases::Case*> picks;
  for (const cases::Case& c : cases::kCases) {
    if ((c.readers & cases::kNumerics) != 0 && c.entry == entry) picks.push_back(&c);
  }
  return picks;
}
const std::vector<const cases::Case*>& decodeCases() {
  static const std::vector<const cases::Case*> picks = numericsCasesOf(cases::Entry::kDecode);
  return picks;
}
const std::vector<const cases::Case*>& mtpCases() {
  static const std::vector<const cases::Case*> picks = numericsCasesOf(cases::Entry::kMtp);
  return picks;
}

// Whether case `c` is for variant `v` (its head dims and gate form).
bool caseFor(const cases::Case& c, const generated::VariantInfo& v) {
  const bool gates_ok =
      c.gates == cases::Gates::kBoth || (c.gates == cases::Gates::kFused) == v.fused_gating;
  return gates_ok && (c.head_dim_k == 0 || c.head_dim_k == v.head_dim_k) &&
         (c.head_dim_v == 0 || c.head_dim_v == v.head_dim_v);
}

// 0 .. n - 1 in a random order.
std::vector<std::int32_t> permutation(Rng& rng, int n) {
  std::vector<std::int32_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  return perm;
}

struct CaseResult {
  double out_rel = 0.0, state_rel = 0.0;
};

// One (decode variant, case), prepared: its host inputs, its device buffers (inputs uploaded,
// out and the guards poisoned) and the problem that run() takes.
struct PreparedCase {
  bool fp16 = false;
  int dk = 0, dv = 0, batch = 0, hq = 0, hv = 0, num_slots = 0;
  std::size_t out_elems = 0, head_state = 0, state_elems = 0, guard = 0;
  float scale = 0.0f;
  std::vector<std::int32_t> slots;
  std::vector<std::uint16_t> q, k, vv;
  std::vector<float> state;
  GateInputs gates;
  DeviceBuffer d_q, d_k, d_v, d_out, d_state, d_slots;
  gdn::Problem p;
};

// Draws the case's inputs and prepares it; returns "" on success, else what failed.
std::string prepareCase(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                        PreparedCase* c) {
  const bool fp16 = isFp16(v.dtype);
  const int dk = v.head_dim_k, dv = v.head_dim_v;
  const int batch = spec.batch, hq = spec.heads_qk, hv = spec.heads_v;
  const int num_slots = batch + batch / 4 + 2;  // unused slots must stay as they were

  // Slots: a random permutation of the pool; some sequences skipped with assorted negatives.
  const std::vector<std::int32_t> perm = permutation(rng, num_slots);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    const bool skip = spec.skip_every > 0 && b % spec.skip_every == spec.skip_every - 1;
    slots[b] = skip ? (b % 2 ? -1 : -1 - rng.below(1 << 20)) : perm[b];
  }

  const std::size_t qk_elems = static_cast<std::size_t>(batch) * hq * dk;
  const std::size_t out_elems = static_cast<std::size_t>(batch) * hv * dv;
  const std::size_t head_state = static_cast<std::size_t>(dk) * dv;
  const std::size_t state_elems = static_cast<std::size_t>(num_slots) * hv * head_state;
  std::vector<std::uint16_t> q(qk_elems), k(qk_elems), vv(out_elems);
  for (auto& x : q) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : k) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : vv) x = randomBits(rng, formatOf(fp16), -4, 0);
  GateInputs& gates = c->gates;
  makeGates(rng, v.fused_gating, fp16, static_cast<std::size_t>(batch) * hv, hv, &gates);
  std::vector<float> state(state_elems);
  for (auto& x : state) x = uniform(rng, -1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));

  DeviceBuffer &d_q = c->d_q, &d_k = c->d_k, &d_v = c->d_v, &d_out = c->d_out,
               &d_state = c->d_state, &d_slots = c->d_slots;
  const std::size_t guard = 64;  // elements past out / state that must stay poisoned
  for (const std::string& e :
       {allocate(&d_q, q.size() * 2, q.data(), q.size() * 2),
        allocate(&d_k, k.size() * 2, k.data(), k.size() * 2),
        allocate(&d_v, vv.size() * 2, vv.data(), vv.size() * 2), gates.upload(),
        allocate(&d_slots, slots.size() * 4, slots.data(), slots.size() * 4),
        allocate(&d_state, (state_elems + guard) * 4, state.data(), state_elems * 4),
        allocate(&d_out, (out_elems + guard) * 2, nullptr, 0)}) {
    if (!e.empty()) return e;
  }

  gdn::Problem& p = c->p;
  p.dtype = v.dtype;
  p.batch = batch;
  p.heads_qk = hq;
  p.heads_v = hv;
  p.head_dim_k = dk;
  p.head_dim_v = dv;
  p.num_slots = num_slots;
  p.scale = scale;
  p.q = d_q.ptr;
  p.k = d_k.ptr;
  p.v = d_v.ptr;
  gates.into(&p);
  p.out = d_out.ptr;
  p.state = static_cast<float*>(d_state.ptr);
  p.slots = static_cast<const std::int32_t*>(d_slots.ptr);
  if (gdn::workspaceSize(p) != 0) return "workspaceSize is not 0";
  c->fp16 = fp16;
  c->dk = dk;
  c->dv = dv;
  c->batch = batch;
  c->hq = hq;
  c->hv = hv;
  c->num_slots = num_slots;
  c->out_elems = out_elems;
  c->head_state = head_state;
  c->state_elems = state_elems;
  c->guard = guard;
  c->scale = scale;
  c->slots = std::move(slots);
  c->q = std::move(q);
  c->k = std::move(k);
  c->vv = std::move(vv);
  c->state = std::move(state);
  return "";
}

// Checks a case whose run() succeeded and whose stream is synchronized against the float64
// reference; returns "" on success, else what failed.
std::string checkCase(const PreparedCase& prepared, CaseResult* result) {
  const bool fp16 = prepared.fp16;
  const int dk = prepared.dk, dv = prepared.dv, batch = prepared.batch, hq = prepared.hq,
            hv = prepared.hv, num_slots = prepared.num_slots;
  const std::size_t out_elems = prepared.out_elems, head_state = prepared.head_state,
                    state_elems = prepared.state_elems, guard = prepared.guard;
  const float scale = prepared.scale;
  const std::vector<std::int32_t>& slots = prepared.slots;
  const std::vector<std::uint16_t>&q = prepared.q, &k = prepared.k, &vv = prepared.vv;
  const std::vector<float>& state = prepared.state;
  const GateInputs& gates = prepared.gates;
  const std::vector<std::uint16_t> out = download<std::uint16_t>(prepared.d_out);
  const std::vector<float> got_state = download<float>(prepared.d_state);
  if (out.size() < out_elems + guard) return "download of out failed";
  if (got_state.size() < state_elems + guard) return "download of state failed";

  // The reference, one (sequence, value head) at a time (reference::decode's loop, without a
  // float64 copy of the whole pool): reference::decodeHead on the head's float64 state.
  std::ostringstream err;
  std::vector<bool> owned(static_cast<std::size_t>(num_slots), false);
  double out_num = 0, out_den = 0, st_num = 0, st_den = 0;
  std::size_t unwritten = 0, nonfinite = 0, skipped_written = 0;
  std::vector<double> dq(dk), dkv(dk), dvv(dv), dstate(head_state), dout(dv);
  const int group = hv / hq;
  for (int b = 0; b < batch; ++b) {
    const std::size_t out_seq = static_cast<std::size_t>(b) * hv * dv;
    if (slots[b] < 0) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(hv) * dv; ++i) {
        skipped_written += out[out_seq + i] != kPoison;
      }
      continue;
    }
    owned[static_cast<std::size_t>(slots[b])] = true;
    for (int h = 0; h < hv; ++h) {
      const std::size_t qk = (static_cast<std::size_t>(b) * hq + h / group) * dk;
      const std::size_t vo = (static_cast<std::size_t>(b) * hv + h) * dv;
      const std::size_t gb = static_cast<std::size_t>(b) * hv + h;
      const std::size_t so = (static_cast<std::size_t>(slots[b]) * hv + h) * head_state;
      for (int i = 0; i < dk; ++i) {
        dq[i] = decode16(fp16, q[qk + i]);
        dkv[i] = decode16(fp16, k[qk + i]);
      }
      for (int j = 0; j < dv; ++j) dvv[j] = decode16(fp16, vv[vo + j]);
      for (std::size_t i = 0; i < head_state; ++i) dstate[i] = state[so + i];
      ref::decodeHead(dk, dv, dq.data(), dkv.data(), dvv.data(), gates.ref_g[gb],
                      gates.ref_beta[gb], scale, dstate.data(), dout.data());
      for (int j = 0; j < dv; ++j) {
        const std::uint16_t bits = out[vo + j];
        const double o = decode16(fp16, bits);
        if (bits == kPoison) {
          ++unwritten;
        } else if (!std::isfinite(o)) {
          ++nonfinite;
        }
        out_num += (o - dout[j]) * (o - dout[j]);
        out_den += dout[j] * dout[j];
      }
      for (std::size_t i = 0; i < head_state; ++i) {
        const double d = static_cast<double>(got_state[so + i]) - dstate[i];
        st_num += d * d;
        st_den += dstate[i] * dstate[i];
      }
    }
  }
  // Slots no live sequence owns, and the state guard: bit-identical.
  std::size_t state_changed = 0;
  const std::size_t slot_elems = static_cast<std::size_t>(hv) * head_state;
  for (int sl = 0; sl < num_slots; ++sl) {
    if (owned[static_cast<std::size_t>(sl)]) continue;
    const std::size_t base = static_cast<std::size_t>(sl) * slot_elems;
    state_changed += std::memcmp(&state[base], &got_state[base], slot_elems * 4) != 0;
  }
  std::size_t state_guard_changed = 0;
  for (std::size_t i = state_elems; i < state_elems + guard; ++i) {
    std::uint32_t u;
    std::memcpy(&u, &got_state[i], 4);
    state_guard_changed += u != 0xffffffffu;
  }
  const std::size_t out_guard_changed = countChanged(out, out_elems, out_elems + guard);

  if (unwritten) err << unwritten << " outputs of live sequences not written (still poison); ";
  if (nonfinite) err << nonfinite << " outputs not finite; ";
  if (skipped_written) err << skipped_written << " outputs of skipped sequences written; ";
  if (out_guard_changed) err << out_guard_changed << " elements written past the end of out; ";
  if (state_changed) err << state_changed << " state slots not owned by a live sequence changed; ";
  if (state_guard_changed) err << state_guard_changed << " elements written past the state pool; ";
  const double out_rel = out_den > 0 ? std::sqrt(out_num / out_den) : 0.0;
  const double st_rel = st_den > 0 ? std::sqrt(st_num / st_den) : 0.0;
  result->out_rel = out_rel;
  result->state_rel = st_rel;
  const double bound = fp16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  if (!(out_rel <= bound))
    err << "output relative L2 error " << out_rel << " > bound " << bound << "; ";
  if (!(st_rel <= kRelL2BoundState)) {
    err << "state relative L2 error " << st_rel << " > bound " << kRelL2BoundState << "; ";
  }
  std::string message = err.str();
  if (!message.empty()) {
    message +=
        "(out rel L2 " + std::to_string(out_rel) + ", state rel L2 " + std::to_string(st_rel) + ")";
  }
  return message;
}

// Runs one (variant, case); returns "" on success, else what failed.
std::string runCase(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                    cudaStream_t stream, CaseResult* result) {
  PreparedCase c;
  if (const std::string e = prepareCase(v, spec, rng, &c); !e.empty()) return e;
  const kiln::Status s = gdn::run(c.p, nullptr, 0, reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return checkCase(c, result);
}

// ---- tests -----------------------------------------------------------------------------------

struct VariantCase {
  std::size_t variant;
  std::size_t spec;
};

// Every (variant with `entry`, case of `picks`) pair whose head dims and gate form fit (`fits`):
// the parameters of one problem's numerics test.
template <typename CaseT, typename Fits>
std::vector<VariantCase> pairsOf(const char* entry, const std::vector<const CaseT*>& picks,
                                 Fits fits) {
  std::vector<VariantCase> all;
  for (std::size_t i : variantsWith(entry)) {
    for (std::size_t c = 0; c < picks.size(); ++c) {
      if (fits(*picks[c], generated::kVariants[i])) all.push_back({i, c});
    }
  }
  return all;
}

std::vector<VariantCase> allCases() {
  return pairsOf(kDecodeEntry, decodeCases(), caseFor);
}

// A stand-in gating input for the probes: batch 0 skips the pointer checks, but a problem's gate
// form is which of its gate pointers are set.
const float kProbeGate = 0.0f;

// A batch-0 problem (its pointer checks skipped) of variant v's dtype, head dims and gate form:
// what canImplement needs to say whether v serves this device. P is Problem, MtpProblem (whose
// tokens must be >= 1) or PrefillProblem.
template <typename P = gdn::Problem>
P probeOf(const generated::VariantInfo& v) {
  P probe;
  if (v.fused_gating) probe.gating.a_log = &kProbeGate;
  probe.dtype = v.dtype;
  probe.heads_qk = 1;
  probe.heads_v = 1;
  probe.head_dim_k = v.head_dim_k;
  probe.head_dim_v = v.head_dim_v;
  if constexpr (std::is_same_v<P, gdn::MtpProblem>) probe.tokens = 1;
  return probe;
}

class GdnNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(GdnNumerics, MatchesFloat64Reference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *decodeCases()[GetParam().spec];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, spec.name);
  if (const kiln::Status s = gdn::canImplement(probeOf(v), run().sm); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec) << 48)};
  CaseResult r;
  const std::string failure = runCase(v, spec, rng, stream, &r);
  counts.recordCase(
      failure,
      "out rel L2 " + std::to_string(r.out_rel) + ", state rel L2 " + std::to_string(r.state_rel),
      std::string(v.name) + " " + spec.name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GdnNumerics, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + decodeCases()[param_info.param.spec]->name;
                         });

// Runner errors on the device, once per built dtype (its first variant).
class GdnRunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(GdnRunnerErrors, RefusesBadProblemsAndTreatsZeroBatchAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  if (const kiln::Status s = gdn::canImplement(probeOf(v), run().sm); !s.ok()) {
    counts.skipped += 9;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const bool fp16 = isFp16(v.dtype);
  const int batch = 2, hq = 2, hv = 4, dk = v.head_dim_k, dv = v.head_dim_v, num_slots = 3;
  const std::size_t qk_elems = static_cast<std::size_t>(batch) * hq * dk;
  const std::size_t out_elems = static_cast<std::size_t>(batch) * hv * dv;
  const std::size_t state_elems = static_cast<std::size_t>(num_slots) * hv * dk * dv;
  // q = k (any equal nonzero values), v = 1, g = 0 (no decay), beta = 1, state 0: the update
  // writes S = k_hat v^T, so o = scale (k_hat . q_hat) v = scale * 1 (to the L2 eps) per element.
  const std::uint16_t one = fp16 ? 0x3c00 : 0x3f80;
  const std::vector<std::uint16_t> ones(std::max(qk_elems, out_elems), one);
  const std::vector<float> zeros_g(static_cast<std::size_t>(batch) * hv, 0.0f);
  const std::vector<float> ones_beta(static_cast<std::size_t>(batch) * hv, 1.0f);
  const std::vector<float> state0(state_elems, 0.0f);
  const std::vector<std::int32_t> slots = {2, 0};
  DeviceBuffer d_q, d_k, d_v, d_g, d_beta, d_out, d_state, d_slots;
  ASSERT_EQ(allocate(&d_q, qk_elems * 2 + 16, ones.data(), qk_elems * 2), "");
  ASSERT_EQ(allocate(&d_k, qk_elems * 2, ones.data(), qk_elems * 2), "");
  ASSERT_EQ(allocate(&d_v, out_elems * 2, ones.data(), out_elems * 2), "");
  ASSERT_EQ(allocate(&d_g, zeros_g.size() * 4, zeros_g.data(), zeros_g.size() * 4), "");
  ASSERT_EQ(allocate(&d_beta, ones_beta.size() * 4, ones_beta.data(), ones_beta.size() * 4), "");
  ASSERT_EQ(allocate(&d_state, state_elems * 4, state0.data(), state_elems * 4), "");
  ASSERT_EQ(allocate(&d_slots, slots.size() * 4, slots.data(), slots.size() * 4), "");
  ASSERT_EQ(allocate(&d_out, out_elems * 2, nullptr, 0), "");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);

  gdn::Problem good;
  good.dtype = v.dtype;
  good.batch = batch;
  good.heads_qk = hq;
  good.heads_v = hv;
  good.head_dim_k = dk;
  good.head_dim_v = dv;
  good.num_slots = num_slots;
  good.scale = 0.125f;
  good.q = d_q.ptr;
  good.k = d_k.ptr;
  good.v = d_v.ptr;
  good.g = static_cast<const float*>(d_g.ptr);
  good.beta = static_cast<const float*>(d_beta.ptr);
  good.out = d_out.ptr;
  good.state = static_cast<float*>(d_state.ptr);
  good.slots = static_cast<const std::int32_t*>(d_slots.ptr);
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto untouched = [&]() {
    if (cudaStreamSynchronize(stream) != cudaSuccess) return false;
    const auto st = download<float>(d_state);
    return allPoison(download<std::uint16_t>(d_out)) && st.size() == state_elems &&
           std::memcmp(st.data(), state0.data(), state_elems * 4) == 0;
  };
  auto refused = [&](const gdn::Problem& p, kiln::StatusCode code, const std::string& needle,
                     const std::string& what) {
    const kiln::Status s = gdn::run(p, nullptr, 0, kstream);
    const kiln::Status c = gdn::canImplement(p, run().sm);
    record(s.code() == code && c.code() == code && s.message().find(needle) != std::string::npos &&
               untouched(),
           what + ": run " + s.toString() + ", canImplement " + c.toString());
  };

  {  // Head dims no variant has.
    gdn::Problem p = good;
    p.head_dim_k = 64;
    p.head_dim_v = 64;
    refused(p, kiln::StatusCode::kNotSupported, "head dims 64x64", "unbuilt head dims");
  }
  {  // Hv not a multiple of H.
    gdn::Problem p = good;
    p.heads_qk = 3;
    refused(p, kiln::StatusCode::kInvalidArgument, "multiple of heads_qk", "Hv 4 over H 3");
  }
  {  // A null state.
    gdn::Problem p = good;
    p.state = nullptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "state is null", "null state");
  }
  {  // A null slots array.
    gdn::Problem p = good;
    p.slots = nullptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "slots is null", "null slots");
  }
  {  // q one element past an aligned address.
    gdn::Problem p = good;
    p.q = static_cast<const std::uint16_t*>(d_q.ptr) + 1;
    refused(p, kiln::StatusCode::kInvalidArgument, "pointer q", "misaligned q");
  }
  {  // g one byte past an aligned address.
    gdn::Problem p = good;
    p.g = reinterpret_cast<const float*>(static_cast<const char*>(d_g.ptr) + 1);
    refused(p, kiln::StatusCode::kInvalidArgument, "pointer g", "misaligned g");
  }
  {  // Both gate forms: g and beta, and a gating input.
    gdn::Problem p = good;
    p.gating.a = d_g.ptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "both gate forms", "both gate forms");
  }
  {  // batch = 0: ok, nothing touched, even with null pointers.
    gdn::Problem p;
    p.dtype = good.dtype;
    p.heads_qk = hq;
    p.heads_v = hv;
    p.head_dim_k = dk;
    p.head_dim_v = dv;
    p.scale = good.scale;
    const kiln::Status s0 = gdn::run(p, nullptr, 0, kstream);
    p = good;
    p.batch = 0;
    const kiln::Status s1 = gdn::run(p, nullptr, 0, kstream);
    record(s0.ok() && s1.ok() && untouched(), "batch 0: " + s0.toString() + ", " + s1.toString());
  }
  {  // The admitted problem runs (and canImplement agrees): o = scale, slot 1 untouched.
    const kiln::Status can = gdn::canImplement(good, run().sm);
    const kiln::Status s = gdn::run(good, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto out = download<std::uint16_t>(d_out);
    const auto st = download<float>(d_state);
    double worst = out.empty() ? 1.0 : 0.0;
    for (std::uint16_t b : out) worst = std::max(worst, std::fabs(decode16(fp16, b) / 0.125 - 1.0));
    const std::size_t slot_elems = static_cast<std::size_t>(hv) * dk * dv;
    const bool slot1_zero = st.size() == state_elems &&
                            std::all_of(st.begin() + slot_elems, st.begin() + 2 * slot_elems,
                                        [](float x) { return x == 0.0f; });
    record(can.ok() && s.ok() && worst < 1e-2 && slot1_zero,
           "valid problem: canImplement " + can.toString() + ", run " + s.toString() +
               ", worst |o / scale - 1| " + std::to_string(worst) +
               (slot1_zero ? "" : ", unused slot 1 changed"));
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GdnRunnerErrors,
                         ::testing::ValuesIn(firstPerDtypeWith(kDecodeEntry)),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- multi-token decode (gdn_decode_mtp) -----------------------------------------------------

// Where the multi-token states go: cases.h's CacheLayout (cache[b, t], mapped into a larger
// cache, mapped into the pool, or only the last token's state into the sequence's own slot).
using cases::CacheLayout;

const char* layoutName(CacheLayout layout) {
  switch (layout) {
    case CacheLayout::kBatch:
      return "batch";
    case CacheLayout::kMapped:
      return "mapped";
    case CacheLayout::kPool:
      return "pool";
    case CacheLayout::kPoolFinal:
      return "pool_final";
  }
  return "?";
}

struct MtpCaseResult {
  double out_rel = 0.0, cache_rel = 0.0;  // the worst token's relative L2 error
};

std::size_t changedFloats(const std::vector<float>& got, std::size_t begin, std::size_t end,
                          std::uint32_t expected_bits) {
  std::size_t n = 0;
  for (std::size_t i = begin; i < end; ++i) {
    std::uint32_t u;
    std::memcpy(&u, &got[i], 4);
    n += u != expected_bits;
  }
  return n;
}

// One (multi-token variant, case), prepared: its host inputs, its device buffers (inputs
// uploaded; out, the cache and the guards poisoned) and the problem that run() takes.
struct PreparedMtpCase {
  bool fp16 = false, mapped = false, in_pool = false;
  int dk = 0, dv = 0, tokens = 0, batch = 0, hq = 0, hv = 0;
  std::size_t entries = 0, out_elems = 0, head_state = 0, entry_elems = 0, state_elems = 0,
              cache_elems = 0, guard = 0;
  float scale = 0.0f;
  std::vector<std::int32_t> slots, cache_slots;
  std::vector<std::uint16_t> q, k, vv;
  std::vector<float> state;
  GateInputs gates;
  DeviceBuffer d_q, d_k, d_v, d_out, d_state, d_slots, d_cache, d_cache_slots;
  gdn::MtpProblem p;
};

// Draws the multi-token case's inputs and prepares it; returns "" on success, else what failed.
std::string prepareMtpCase(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                           PreparedMtpCase* c) {
  const bool fp16 = isFp16(v.dtype);
  const int dk = v.head_dim_k, dv = v.head_dim_v;
  const int tokens = spec.tokens, batch = spec.batch, hq = spec.heads_qk, hv = spec.heads_v;
  const std::size_t T = static_cast<std::size_t>(tokens);
  const std::size_t rows = static_cast<std::size_t>(batch) * T;  // [batch, T]
  const bool mapped = spec.layout != CacheLayout::kBatch;
  const bool in_pool = spec.layout == CacheLayout::kPool || spec.layout == CacheLayout::kPoolFinal;
  // The pool: the batch's slots, in the pool layout one slot per (b, t) besides, and spare ones.
  const int num_slots = batch + batch / 4 + 2 + (in_pool ? static_cast<int>(rows) : 0);

  const std::vector<std::int32_t> perm = permutation(rng, num_slots);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    const bool skip = spec.skip_every > 0 && b % spec.skip_every == spec.skip_every - 1;
    slots[b] = skip ? (b % 2 ? -1 : -1 - rng.below(1 << 20)) : perm[b];
  }
  // Cache entries: [batch, T] order, or cache_slots[b, t] (slots no sequence reads, in the pool).
  const std::size_t entries =
      in_pool ? static_cast<std::size_t>(num_slots) : rows + (mapped ? 3 : 0);
  std::vector<std::int32_t> cache_slots;
  auto notKept = [&]() { return -1 - static_cast<std::int32_t>(rng.below(1 << 20)); };
  if (spec.layout == CacheLayout::kMapped) {
    const std::vector<std::int32_t> map = permutation(rng, static_cast<int>(entries));
    cache_slots.assign(map.begin(), map.begin() + static_cast<std::ptrdiff_t>(rows));
    for (std::size_t r = 1; r < rows; r += 3) cache_slots[r] = notKept();
  } else if (spec.layout == CacheLayout::kPool) {
    cache_slots.assign(perm.begin() + batch,
                       perm.begin() + batch + static_cast<std::ptrdiff_t>(rows));
    for (std::size_t r = 2; r < rows; r += 4) cache_slots[r] = notKept();
  } else if (spec.layout == CacheLayout::kPoolFinal) {  // a skipped sequence's perm[b]: untouched
    for (std::size_t r = 0; r < rows; ++r) {
      cache_slots.push_back(r % T == T - 1 ? perm[r / T] : notKept());
    }
  }

  const std::size_t qk_elems = rows * hq * dk;
  const std::size_t out_elems = rows * hv * dv;
  const std::size_t head_state = static_cast<std::size_t>(dk) * dv;
  const std::size_t entry_elems = static_cast<std::size_t>(hv) * head_state;
  const std::size_t state_elems = static_cast<std::size_t>(num_slots) * entry_elems;
  const std::size_t cache_elems = entries * entry_elems;
  std::vector<std::uint16_t> q(qk_elems), k(qk_elems), vv(out_elems);
  for (auto& x : q) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : k) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : vv) x = randomBits(rng, formatOf(fp16), -4, 0);
  GateInputs& gates = c->gates;
  makeGates(rng, v.fused_gating, fp16, rows * hv, hv, &gates);
  std::vector<float> state(state_elems);
  for (auto& x : state) x = uniform(rng, -1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));

  DeviceBuffer &d_q = c->d_q, &d_k = c->d_k, &d_v = c->d_v, &d_out = c->d_out,
               &d_state = c->d_state, &d_slots = c->d_slots, &d_cache = c->d_cache,
               &d_cache_slots = c->d_cache_slots;
  const std::size_t guard = 64;  // elements past out / state / cache that must stay poisoned
  for (const std::string& e :
       {allocate(&d_q, q.size() * 2, q.data(), q.size() * 2),
        allocate(&d_k, k.size() * 2, k.data(), k.size() * 2),
        allocate(&d_v, vv.size() * 2, vv.data(), vv.size() * 2), gates.upload(),
        allocate(&d_slots, slots.size() * 4, slots.data(), slots.size() * 4),
        allocate(&d_state, (state_elems + guard) * 4, state.data(), state_elems * 4),
        in_pool ? std::string() : allocate(&d_cache, (cache_elems + guard) * 4, nullptr, 0),
        mapped ? allocate(&d_cache_slots, cache_slots.size() * 4, cache_slots.data(),
                          cache_slots.size() * 4)
               : std::string(),
        allocate(&d_out, (out_elems + guard) * 2, nullptr, 0)}) {
    if (!e.empty()) return e;
  }

  gdn::MtpProblem& p = c->p;
  p.dtype = v.dtype;
  p.batch = batch;
  p.tokens = tokens;
  p.heads_qk = hq;
  p.heads_v = hv;
  p.head_dim_k = dk;
  p.head_dim_v = dv;
  p.num_slots = num_slots;
  p.scale = scale;
  p.q = d_q.ptr;
  p.k = d_k.ptr;
  p.v = d_v.ptr;
  gates.into(&p);
  p.out = d_out.ptr;
  p.state = static_cast<const float*>(d_state.ptr);
  p.slots = static_cast<const std::int32_t*>(d_slots.ptr);
  p.cache = static_cast<float*>(in_pool ? d_state.ptr : d_cache.ptr);
  if (mapped) {
    p.cache_slots = static_cast<const std::int32_t*>(d_cache_slots.ptr);
    p.cache_entries = static_cast<std::int64_t>(entries);
  }
  if (gdn::workspaceSize(p) != 0) return "workspaceSize is not 0";
  c->fp16 = fp16;
  c->dk = dk;
  c->dv = dv;
  c->tokens = tokens;
  c->batch = batch;
  c->hq = hq;
  c->hv = hv;
  c->mapped = mapped;
  c->in_pool = in_pool;
  c->entries = entries;
  c->out_elems = out_elems;
  c->head_state = head_state;
  c->entry_elems = entry_elems;
  c->state_elems = state_elems;
  c->cache_elems = cache_elems;
  c->guard = guard;
  c->scale = scale;
  c->slots = std::move(slots);
  c->cache_slots = std::move(cache_slots);
  c->q = std::move(q);
  c->k = std::move(k);
  c->vv = std::move(vv);
  c->state = std::move(state);
  return "";
}

// Checks a multi-token case whose run() succeeded and whose stream is synchronized against the
// float64 reference; returns "" on success, else what failed.
std::string checkMtpCase(const PreparedMtpCase& prepared, MtpCaseResult* result) {
  const bool fp16 = prepared.fp16, mapped = prepared.mapped, in_pool = prepared.in_pool;
  const int dk = prepared.dk, dv = prepared.dv, tokens = prepared.tokens, batch = prepared.batch,
            hq = prepared.hq, hv = prepared.hv;
  const std::size_t T = static_cast<std::size_t>(tokens);
  const std::size_t entries = prepared.entries, out_elems = prepared.out_elems,
                    head_state = prepared.head_state, entry_elems = prepared.entry_elems,
                    state_elems = prepared.state_elems, cache_elems = prepared.cache_elems,
                    guard = prepared.guard;
  const float scale = prepared.scale;
  const std::vector<std::int32_t>&slots = prepared.slots, &cache_slots = prepared.cache_slots;
  const std::vector<std::uint16_t>&q = prepared.q, &k = prepared.k, &vv = prepared.vv;
  const std::vector<float>& state = prepared.state;
  const GateInputs& gates = prepared.gates;
  // A token row's cache entry; negative: its state is not kept.
  auto entryOf = [&](std::size_t row) -> std::int64_t {
    return mapped ? cache_slots[row] : static_cast<std::int64_t>(row);
  };
  const std::vector<std::uint16_t> out = download<std::uint16_t>(prepared.d_out);
  const std::vector<float> got_state = download<float>(prepared.d_state);
  const std::vector<float> got_cache =
      in_pool ? std::vector<float>() : download<float>(prepared.d_cache);
  const std::vector<float>& cache = in_pool ? got_state : got_cache;
  if (out.size() < out_elems + guard) return "download of out failed";
  if (got_state.size() < state_elems + guard) return "download of state failed";
  if (cache.size() < cache_elems + guard) return "download of cache failed";

  // The reference per (sequence, value head): its T tokens gathered, reference::decodeMtpHead.
  std::ostringstream err;
  std::vector<double> out_num(tokens, 0.0), out_den(tokens, 0.0), c_num(tokens, 0.0),
      c_den(tokens, 0.0);
  std::size_t unwritten = 0, nonfinite = 0, skipped_written = 0, cache_unwritten = 0,
              cache_nonfinite = 0;
  std::vector<bool> written(entries, false);  // the cache entries of live tokens
  std::vector<double> hq_(T * dk), hk_(T * dk), hv_(T * dv), hg(T), hb(T), hstate(head_state);
  std::vector<double> hcache(T * head_state), hout(T * dv);
  const int group = hv / hq;
  for (int b = 0; b < batch; ++b) {
    if (slots[b] < 0) {
      for (std::size_t t = 0; t < T; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * T + t;
        for (std::size_t i = 0; i < static_cast<std::size_t>(hv) * dv; ++i) {
          skipped_written += out[row * hv * dv + i] != kPoison;
        }
      }
      continue;
    }
    for (std::size_t t = 0; t < T; ++t) {
      const std::int64_t e = entryOf(static_cast<std::size_t>(b) * T + t);
      if (e >= 0) written[static_cast<std::size_t>(e)] = true;
    }
    for (int h = 0; h < hv; ++h) {
      for (std::size_t t = 0; t < T; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * T + t;
        const std::size_t qk = (row * hq + h / group) * dk;
        const std::size_t vo = (row * hv + h) * dv;
        for (int i = 0; i < dk; ++i) {
          hq_[t * dk + i] = decode16(fp16, q[qk + i]);
          hk_[t * dk + i] = decode16(fp16, k[qk + i]);
        }
        for (int j = 0; j < dv; ++j) hv_[t * dv + j] = decode16(fp16, vv[vo + j]);
        hg[t] = gates.ref_g[row * hv + h];
        hb[t] = gates.ref_beta[row * hv + h];
      }
      const std::size_t so = (static_cast<std::size_t>(slots[b]) * hv + h) * head_state;
      for (std::size_t i = 0; i < head_state; ++i) hstate[i] = state[so + i];
      ref::decodeMtpHead(tokens, dk, dv, hq_.data(), hk_.data(), hv_.data(), hg.data(), hb.data(),
                         scale, hstate.data(), hcache.data(), hout.data());
      for (std::size_t t = 0; t < T; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * T + t;
        const std::size_t vo = (row * hv + h) * dv;
        for (int j = 0; j < dv; ++j) {
          const std::uint16_t bits = out[vo + j];
          const double o = decode16(fp16, bits);
          if (bits == kPoison) {
            ++unwritten;
          } else if (!std::isfinite(o)) {
            ++nonfinite;
          }
          const double r = hout[t * dv + j];
          out_num[t] += (o - r) * (o - r);
          out_den[t] += r * r;
        }
        if (entryOf(row) < 0) continue;  // not kept: checked with the untouched entries below
        const std::size_t co = static_cast<std::size_t>(entryOf(row)) * entry_elems +
                               static_cast<std::size_t>(h) * head_state;
        for (std::size_t i = 0; i < head_state; ++i) {
          const float c = cache[co + i];
          std::uint32_t u;
          std::memcpy(&u, &c, 4);
          if (u == 0xffffffffu) {
            ++cache_unwritten;
          } else if (!std::isfinite(c)) {
            ++cache_nonfinite;
          }
          const double d = static_cast<double>(c) - hcache[t * head_state + i];
          c_num[t] += d * d;
          c_den[t] += hcache[t * head_state + i] * hcache[t * head_state + i];
        }
      }
    }
  }
  // Every cache entry no live token owns (a skipped sequence's, an unmapped one) as it was: poison,
  // or in the pool its uploaded state (the slots the batch reads among them); outside the pool
  // layout the whole pool is only read. The guards past everything are untouched.
  std::size_t foreign_changed = 0;
  for (std::size_t e = 0; e < entries; ++e) {
    if (written[e]) continue;
    const std::size_t base = e * entry_elems;
    foreign_changed += in_pool ? std::memcmp(&state[base], &got_state[base], entry_elems * 4) != 0
                               : changedFloats(cache, base, base + entry_elems, 0xffffffffu) != 0;
  }
  const bool pool_changed =
      !in_pool && std::memcmp(state.data(), got_state.data(), state_elems * 4) != 0;
  const std::size_t state_guard_changed =
      changedFloats(got_state, state_elems, state_elems + guard, 0xffffffffu);
  const std::size_t cache_guard_changed =
      in_pool ? 0 : changedFloats(cache, cache_elems, cache_elems + guard, 0xffffffffu);
  const std::size_t out_guard_changed = countChanged(out, out_elems, out_elems + guard);

  if (unwritten) err << unwritten << " outputs of live sequences not written (still poison); ";
  if (nonfinite) err << nonfinite << " outputs not finite; ";
  if (cache_unwritten) err << cache_unwritten << " cache elements of live sequences not written; ";
  if (cache_nonfinite) err << cache_nonfinite << " cache elements not finite; ";
  if (skipped_written) err << skipped_written << " outputs of skipped sequences written; ";
  if (foreign_changed) err << foreign_changed << " cache entries that no live token owns changed; ";
  if (out_guard_changed) err << out_guard_changed << " elements written past the end of out; ";
  if (cache_guard_changed)
    err << cache_guard_changed << " elements written past the end of the cache; ";
  if (pool_changed) err << "the state pool changed (it must only be read); ";
  if (state_guard_changed) err << state_guard_changed << " elements written past the state pool; ";
  const double bound = fp16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  double worst_out = 0.0, worst_cache = 0.0;
  for (std::size_t t = 0; t < T; ++t) {
    const double o_rel = out_den[t] > 0 ? std::sqrt(out_num[t] / out_den[t]) : 0.0;
    const double c_rel = c_den[t] > 0 ? std::sqrt(c_num[t] / c_den[t]) : 0.0;
    if (!(o_rel <= bound))
      err << "token " << t << ": output relative L2 error " << o_rel << " > bound " << bound
          << "; ";
    if (!(c_rel <= kRelL2BoundState)) {
      err << "token " << t << ": cached state relative L2 error " << c_rel << " > bound "
          << kRelL2BoundState << "; ";
    }
    // NaN-propagating maxima: a NaN error is the worst.
    worst_out = (o_rel > worst_out || std::isnan(o_rel)) ? o_rel : worst_out;
    worst_cache = (c_rel > worst_cache || std::isnan(c_rel)) ? c_rel : worst_cache;
  }
  result->out_rel = worst_out;
  result->cache_rel = worst_cache;
  std::string message = err.str();
  if (!message.empty()) {
    message += "(worst token: out rel L2 " + std::to_string(worst_out) + ", cache rel L2 " +
               std::to_string(worst_cache) + ")";
  }
  return message;
}

std::string runMtpCase(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                       cudaStream_t stream, MtpCaseResult* result) {
  PreparedMtpCase c;
  if (const std::string e = prepareMtpCase(v, spec, rng, &c); !e.empty()) return e;
  const kiln::Status s = gdn::run(c.p, nullptr, 0, reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return checkMtpCase(c, result);
}

std::vector<VariantCase> allMtpCases() {
  return pairsOf(kMtpEntry, mtpCases(), caseFor);
}

class GdnMtpNumerics : public ::testing::TestWithParam<VariantCase> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GdnMtpNumerics);  // an artifact without mtp variants

TEST_P(GdnMtpNumerics, EveryTokenMatchesFloat64Reference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *mtpCases()[GetParam().spec];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, spec.name);
  if (const kiln::Status s = gdn::canImplement(probeOf<gdn::MtpProblem>(v), run().sm); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec + 0x40) << 48)};
  MtpCaseResult r;
  const std::string failure = runMtpCase(v, spec, rng, stream, &r);
  counts.recordCase(failure,
                    "worst token: out rel L2 " + std::to_string(r.out_rel) + ", cache rel L2 " +
                        std::to_string(r.cache_rel),
                    std::string(v.name) + " " + spec.name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GdnMtpNumerics, ::testing::ValuesIn(allMtpCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + mtpCases()[param_info.param.spec]->name;
                         });

// The multi-token runner's errors on the device, once per built dtype (its first mtp variant).
class GdnMtpRunnerErrors : public ::testing::TestWithParam<std::size_t> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GdnMtpRunnerErrors);

TEST_P(GdnMtpRunnerErrors, RefusesBadProblemsAndLeavesThePoolAlone) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  if (const kiln::Status s = gdn::canImplement(probeOf<gdn::MtpProblem>(v), run().sm); !s.ok()) {
    counts.skipped += 10;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const bool fp16 = isFp16(v.dtype);
  const int batch = 2, tokens = 3, hq = 2, hv = 4, dk = v.head_dim_k, dv = v.head_dim_v,
            num_slots = 3;
  const std::size_t rows = static_cast<std::size_t>(batch) * tokens;
  const std::size_t qk_elems = rows * hq * dk;
  const std::size_t out_elems = rows * hv * dv;
  const std::size_t state_elems = static_cast<std::size_t>(num_slots) * hv * dk * dv;
  const std::size_t cache_elems = rows * hv * dk * dv;
  // q = k = v = 1, g = 0, beta = 1, state 0. Token 0 writes S = k_hat v^T, so o = scale (k_hat .
  // q_hat) = scale; every later token finds S^T k_hat = v, so u = 0: S and o stay. Each cache
  // entry is k_hat v^T (1 / sqrt(d_k) per element, to the L2 eps); the pool stays 0.
  const std::uint16_t one = fp16 ? 0x3c00 : 0x3f80;
  const std::vector<std::uint16_t> ones(std::max(qk_elems, out_elems), one);
  const std::vector<float> zeros_g(rows * hv, 0.0f), ones_beta(rows * hv, 1.0f);
  const std::vector<float> state0(state_elems, 0.0f);
  const std::vector<std::int32_t> slots = {2, 0};
  DeviceBuffer d_q, d_k, d_v, d_g, d_beta, d_out, d_state, d_slots, d_cache;
  ASSERT_EQ(allocate(&d_q, qk_elems * 2, ones.data(), qk_elems * 2), "");
  ASSERT_EQ(allocate(&d_k, qk_elems * 2, ones.data(), qk_elems * 2), "");
  ASSERT_EQ(allocate(&d_v, out_elems * 2, ones.data(), out_elems * 2), "");
  ASSERT_EQ(allocate(&d_g, zeros_g.size() * 4, zeros_g.data(), zeros_g.size() * 4), "");
  ASSERT_EQ(allocate(&d_beta, ones_beta.size() * 4, ones_beta.data(), ones_beta.size() * 4), "");
  ASSERT_EQ(allocate(&d_state, state_elems * 4, state0.data(), state_elems * 4), "");
  ASSERT_EQ(allocate(&d_slots, slots.size() * 4, slots.data(), slots.size() * 4), "");
  ASSERT_EQ(allocate(&d_cache, cache_elems * 4 + 16, nullptr, 0), "");
  ASSERT_EQ(allocate(&d_out, out_elems * 2, nullptr, 0), "");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);

  gdn::MtpProblem good;
  good.dtype = v.dtype;
  good.batch = batch;
  good.tokens = tokens;
  good.heads_qk = hq;
  good.heads_v = hv;
  good.head_dim_k = dk;
  good.head_dim_v = dv;
  good.num_slots = num_slots;
  good.scale = 0.125f;
  good.q = d_q.ptr;
  good.k = d_k.ptr;
  good.v = d_v.ptr;
  good.g = static_cast<const float*>(d_g.ptr);
  good.beta = static_cast<const float*>(d_beta.ptr);
  good.out = d_out.ptr;
  good.state = static_cast<const float*>(d_state.ptr);
  good.slots = static_cast<const std::int32_t*>(d_slots.ptr);
  good.cache = static_cast<float*>(d_cache.ptr);
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto poolIsZero = [&]() {
    const auto st = download<float>(d_state);
    return st.size() == state_elems && std::memcmp(st.data(), state0.data(), state_elems * 4) == 0;
  };
  auto untouched = [&]() {
    if (cudaStreamSynchronize(stream) != cudaSuccess) return false;
    const auto cache = download<float>(d_cache);
    return allPoison(download<std::uint16_t>(d_out)) && poolIsZero() && !cache.empty() &&
           changedFloats(cache, 0, cache.size(), 0xffffffffu) == 0;
  };
  auto refused = [&](const gdn::MtpProblem& p, kiln::StatusCode code, const std::string& needle,
                     const std::string& what) {
    const kiln::Status s = gdn::run(p, nullptr, 0, kstream);
    const kiln::Status c = gdn::canImplement(p, run().sm);
    record(s.code() == code && c.code() == code && s.message().find(needle) != std::string::npos &&
               untouched(),
           what + ": run " + s.toString() + ", canImplement " + c.toString());
  };

  {
    gdn::MtpProblem p = good;
    p.head_dim_k = 64;
    p.head_dim_v = 64;
    refused(p, kiln::StatusCode::kNotSupported, "multi-token decode: head dims 64x64",
            "unbuilt head dims");
  }
  {
    gdn::MtpProblem p = good;
    p.tokens = v.max_tokens + 1;
    refused(p, kiln::StatusCode::kInvalidArgument,
            "exceeds max_tokens " + std::to_string(v.max_tokens), "tokens past max_tokens");
  }
  {
    gdn::MtpProblem p = good;
    p.tokens = 0;
    refused(p, kiln::StatusCode::kInvalidArgument, "tokens 0 must be >= 1", "tokens 0");
  }
  {
    gdn::MtpProblem p = good;
    p.cache = nullptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "cache is null", "null cache");
  }
  {
    gdn::MtpProblem p = good;
    p.cache = static_cast<float*>(d_cache.ptr) + 1;
    refused(p, kiln::StatusCode::kInvalidArgument, "pointer cache", "misaligned cache");
  }
  {  // The cache on top of the pool: the kernel would read states it had just written.
    gdn::MtpProblem p = good;
    p.cache = static_cast<float*>(d_state.ptr);
    refused(p, kiln::StatusCode::kInvalidArgument, "overlaps the state pool",
            "cache overlapping the pool");
  }
  {
    gdn::MtpProblem p = good;
    p.heads_qk = 3;
    refused(p, kiln::StatusCode::kInvalidArgument, "multiple of heads_qk", "Hv 4 over H 3");
  }
  {
    gdn::MtpProblem p = good;
    p.slots = nullptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "slots is null", "null slots");
  }
  {  // batch = 0: ok, nothing touched, even with null pointers.
    gdn::MtpProblem p;
    p.dtype = good.dtype;
    p.tokens = tokens;
    p.heads_qk = hq;
    p.heads_v = hv;
    p.head_dim_k = dk;
    p.head_dim_v = dv;
    p.scale = good.scale;
    const kiln::Status s0 = gdn::run(p, nullptr, 0, kstream);
    p = good;
    p.batch = 0;
    const kiln::Status s1 = gdn::run(p, nullptr, 0, kstream);
    record(s0.ok() && s1.ok() && untouched(), "batch 0: " + s0.toString() + ", " + s1.toString());
  }
  {  // The admitted problem runs: every o = scale, every cache entry k_hat v^T, the pool still 0.
    const kiln::Status can = gdn::canImplement(good, run().sm);
    const kiln::Status s = gdn::run(good, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto out = download<std::uint16_t>(d_out);
    const auto cache = download<float>(d_cache);
    double worst = out.empty() || cache.size() < cache_elems ? 1.0 : 0.0;
    for (std::uint16_t b : out) worst = std::max(worst, std::fabs(decode16(fp16, b) / 0.125 - 1.0));
    const double expected = 1.0 / std::sqrt(static_cast<double>(dk));
    for (std::size_t i = 0; i < cache_elems && i < cache.size(); ++i) {
      worst = std::max(worst, std::fabs(cache[i] / expected - 1.0));  // NaN: the comparison fails
      if (!std::isfinite(cache[i])) worst = 1.0;
    }
    const bool pool_zero = poolIsZero();
    record(can.ok() && s.ok() && worst < 1e-2 && pool_zero,
           "valid problem: canImplement " + can.toString() + ", run " + s.toString() +
               ", worst |o / scale - 1| and |cache / (1 / sqrt(d_k)) - 1| " +
               std::to_string(worst) + (pool_zero ? "" : ", the pool changed"));
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GdnMtpRunnerErrors,
                         ::testing::ValuesIn(firstPerDtypeWith(kMtpEntry)),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- MTP commit (gdn_mtp_commit) ---------------------------------------------------------------

// The commit cases (cases.h, Entry::kCommit): each is a gdn_decode_mtp verify into a [batch, T]
// cache on an mtp variant with given gates (caseFor), then the commit, then a gdn_decode step.
const std::vector<const cases::Case*>& commitCases() {
  static const std::vector<const cases::Case*> picks = numericsCasesOf(cases::Entry::kCommit);
  return picks;
}

// The commit variant of head dims dk x dv, or null when the artifact has none.
const generated::VariantInfo* commitVariant(int dk, int dv) {
  for (std::size_t i : variantsWith(kCommitEntry)) {
    const auto& v = generated::kVariants[i];
    if (v.head_dim_k == dk && v.head_dim_v == dv) return &v;
  }
  return nullptr;
}

const char* acceptedName(cases::Accepted accepted) {
  switch (accepted) {
    case cases::Accepted::kNone:
      return "none";
    case cases::Accepted::kOne:
      return "one";
    case cases::Accepted::kAll:
      return "all";
    case cases::Accepted::kMixed:
      return "mixed";
  }
  return "?";
}

// The accepted counts of `spec` (cases.h, Accepted) for `batch` sequences of `tokens` tokens.
std::vector<std::int32_t> acceptedCounts(const cases::Case& spec, int batch, int tokens, Rng& rng) {
  std::vector<std::int32_t> n(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    switch (spec.accepted) {
      case cases::Accepted::kNone:
        n[b] = 0;
        break;
      case cases::Accepted::kOne:
        n[b] = 1;
        break;
      case cases::Accepted::kAll:
        n[b] = tokens;
        break;
      case cases::Accepted::kMixed: {
        const std::int32_t cycle[] = {0, 1, tokens, 1 + rng.below(tokens), tokens + 1, -1};
        n[b] = cycle[b % 6];
        break;
      }
    }
  }
  return n;
}

// One commit, prepared: the cache as the device holds it (guard included), the pool before the
// commit (guard included; the slots no live sequence owns poisoned: 0xffffffff, a float NaN), the
// counts uploaded, and the problem run() takes. The cache and pool buffers are `cache_buffer` and
// `state_buffer`: the commit's own (d_cache, d_state) or a verify's.
struct PreparedCommit {
  int tokens = 0, batch = 0, hv = 0, dk = 0, dv = 0, num_slots = 0;
  std::size_t entry_elems = 0, state_elems = 0;
  std::vector<std::int32_t> slots, accepted;
  std::vector<float> cache, pool;
  DeviceBuffer d_cache, d_state, d_slots, d_accepted;
  const DeviceBuffer* cache_buffer = nullptr;
  const DeviceBuffer* state_buffer = nullptr;
  gdn::CommitProblem p;
};

// Poisons, in `pool`, every slot no live sequence of `slots` owns.
void poisonUnowned(const std::vector<std::int32_t>& slots, std::size_t entry_elems, int num_slots,
                   std::vector<float>* pool) {
  std::vector<bool> owned(static_cast<std::size_t>(num_slots), false);
  for (const std::int32_t s : slots)
    if (s >= 0) owned[static_cast<std::size_t>(s)] = true;
  for (int s = 0; s < num_slots; ++s) {
    if (!owned[static_cast<std::size_t>(s)])
      std::memset(pool->data() + static_cast<std::size_t>(s) * entry_elems, 0xff, entry_elems * 4);
  }
}

// The counts uploaded and the problem, once c's vectors, sizes and buffers are set.
std::string finishCommit(const cases::Case& spec, Rng& rng, const DeviceBuffer& slots,
                         PreparedCommit* c) {
  c->accepted = acceptedCounts(spec, c->batch, c->tokens, rng);
  if (const std::string e = allocate(&c->d_accepted, c->accepted.size() * 4, c->accepted.data(),
                                     c->accepted.size() * 4);
      !e.empty())
    return e;
  gdn::CommitProblem& p = c->p;
  p.batch = c->batch;
  p.tokens = c->tokens;
  p.heads_v = c->hv;
  p.head_dim_k = c->dk;
  p.head_dim_v = c->dv;
  p.num_slots = c->num_slots;
  p.cache = static_cast<const float*>(c->cache_buffer->ptr);
  p.state = static_cast<float*>(c->state_buffer->ptr);
  p.slots = static_cast<const std::int32_t*>(slots.ptr);
  p.accepted = static_cast<const std::int32_t*>(c->d_accepted.ptr);
  return gdn::workspaceSize(p) == 0 ? "" : "workspaceSize is not 0";
}

// The commit after the verify `m` (run, synchronized and checked): its cache and pool, the pool's
// unowned slots poisoned on the device; returns "" or what failed.
std::string prepareCommitAfter(const PreparedMtpCase& m, const cases::Case& spec, Rng& rng,
                               PreparedCommit* c) {
  c->tokens = m.tokens;
  c->batch = m.batch;
  c->hv = m.hv;
  c->dk = m.dk;
  c->dv = m.dv;
  c->num_slots = static_cast<int>(m.state_elems / m.entry_elems);
  c->entry_elems = m.entry_elems;
  c->state_elems = m.state_elems;
  c->slots = m.slots;
  c->cache = download<float>(m.d_cache);
  c->pool = download<float>(m.d_state);
  if (c->cache.size() < m.cache_elems || c->pool.size() < m.state_elems)
    return "download of the verify's cache or pool failed";
  poisonUnowned(c->slots, c->entry_elems, c->num_slots, &c->pool);
  if (cudaMemcpy(m.d_state.ptr, c->pool.data(), c->pool.size() * 4, cudaMemcpyHostToDevice) !=
          cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess)
    return "upload of the poisoned pool failed";
  c->cache_buffer = &m.d_cache;
  c->state_buffer = &m.d_state;
  return finishCommit(spec, rng, m.d_slots, c);
}

// A commit of its own (the fresh-threads test): a random cache, a random pool with the unowned
// slots poisoned, slots permuted and skipped as the verify's; returns "" or what failed.
std::string prepareCommit(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                          PreparedCommit* c) {
  c->tokens = spec.tokens;
  c->batch = spec.batch;
  c->hv = spec.heads_v;
  c->dk = v.head_dim_k;
  c->dv = v.head_dim_v;
  c->num_slots = c->batch + c->batch / 4 + 2;
  c->entry_elems = static_cast<std::size_t>(c->hv) * c->dk * c->dv;
  c->state_elems = static_cast<std::size_t>(c->num_slots) * c->entry_elems;
  const std::size_t guard = 64;
  const std::vector<std::int32_t> perm = permutation(rng, c->num_slots);
  c->slots.resize(static_cast<std::size_t>(c->batch));
  for (int b = 0; b < c->batch; ++b) {
    const bool skip = spec.skip_every > 0 && b % spec.skip_every == spec.skip_every - 1;
    c->slots[b] = skip ? -1 - rng.below(1 << 20) : perm[b];
  }
  const std::size_t cache_elems = static_cast<std::size_t>(c->batch) * c->tokens * c->entry_elems;
  c->cache.assign(cache_elems + guard, 0.0f);
  for (std::size_t i = 0; i < cache_elems; ++i) c->cache[i] = uniform(rng, -1.0f, 1.0f);
  std::memset(c->cache.data() + cache_elems, 0xff, guard * 4);
  c->pool.assign(c->state_elems + guard, 0.0f);
  for (std::size_t i = 0; i < c->state_elems; ++i) c->pool[i] = uniform(rng, -1.0f, 1.0f);
  std::memset(c->pool.data() + c->state_elems, 0xff, guard * 4);
  poisonUnowned(c->slots, c->entry_elems, c->num_slots, &c->pool);
  for (const std::string& e :
       {allocate(&c->d_cache, c->cache.size() * 4, c->cache.data(), c->cache.size() * 4),
        allocate(&c->d_state, c->pool.size() * 4, c->pool.data(), c->pool.size() * 4),
        allocate(&c->d_slots, c->slots.size() * 4, c->slots.data(), c->slots.size() * 4)}) {
    if (!e.empty()) return e;
  }
  c->cache_buffer = &c->d_cache;
  c->state_buffer = &c->d_state;
  return finishCommit(spec, rng, c->d_slots, c);
}

// Checks a commit whose run() succeeded and whose stream is synchronized: the pool, guard
// included, bit for bit what reference::commitMtp makes of the pool before it and the cache (a
// copy: no tolerance), and the cache as it was; returns "" or what failed.
std::string checkCommit(const PreparedCommit& c) {
  const std::vector<float> got = download<float>(*c.state_buffer);
  const std::vector<float> cache = download<float>(*c.cache_buffer);
  if (got.size() != c.pool.size()) return "download of state failed";
  if (cache.size() != c.cache.size()) return "download of cache failed";
  std::vector<float> want = c.pool;
  ref::commitMtp(c.batch, c.tokens, c.hv, c.dk, c.dv, c.cache, c.slots, c.accepted, want);
  std::vector<bool> committed(static_cast<std::size_t>(c.num_slots), false);
  for (int b = 0; b < c.batch; ++b) {
    if (ref::commits(c.slots[b], c.accepted[b], c.tokens))
      committed[static_cast<std::size_t>(c.slots[b])] = true;
  }
  std::size_t wrong = 0, changed = 0;
  for (int s = 0; s < c.num_slots; ++s) {
    const std::size_t base = static_cast<std::size_t>(s) * c.entry_elems;
    if (std::memcmp(&want[base], &got[base], c.entry_elems * 4) == 0) continue;
    ++(committed[static_cast<std::size_t>(s)] ? wrong : changed);
  }
  const bool guard_changed = std::memcmp(&want[c.state_elems], &got[c.state_elems],
                                         (want.size() - c.state_elems) * 4) != 0;
  const bool cache_changed = std::memcmp(cache.data(), c.cache.data(), cache.size() * 4) != 0;
  std::ostringstream err;
  if (wrong) err << wrong << " committed slots differ from their accepted cache entry; ";
  if (changed) err << changed << " slots that no sequence commits changed (poisoned or kept); ";
  if (guard_changed) err << "elements written past the state pool; ";
  if (cache_changed) err << "the cache changed (it must only be read); ";
  return err.str();
}

// A gdn_decode step from the committed pool, checked against the float64 reference over each live
// sequence's accepted tokens (the verify's first n, n = its count when the commit takes it, else
// none) and then the step's token: outputs and the sequences' states within the bounds; the
// unowned slots (poisoned) and the guards untouched. Returns "" or what failed.
std::string decodeAfterCommit(const generated::VariantInfo& decode, const PreparedMtpCase& m,
                              const PreparedCommit& c, Rng& rng, cudaStream_t stream,
                              CaseResult* result) {
  const bool fp16 = m.fp16;
  const int batch = m.batch, hq = m.hq, hv = m.hv, dk = m.dk, dv = m.dv;
  const std::size_t qk_elems = static_cast<std::size_t>(batch) * hq * dk;
  const std::size_t out_elems = static_cast<std::size_t>(batch) * hv * dv, guard = 64;
  std::vector<std::uint16_t> q(qk_elems), k(qk_elems), vv(out_elems);
  for (auto& x : q) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : k) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : vv) x = randomBits(rng, formatOf(fp16), -4, 0);
  GateInputs gates;
  makeGates(rng, false, fp16, static_cast<std::size_t>(batch) * hv, hv, &gates);
  DeviceBuffer d_q, d_k, d_v, d_out;
  for (const std::string& e :
       {allocate(&d_q, q.size() * 2, q.data(), q.size() * 2),
        allocate(&d_k, k.size() * 2, k.data(), k.size() * 2),
        allocate(&d_v, vv.size() * 2, vv.data(), vv.size() * 2), gates.upload(),
        allocate(&d_out, (out_elems + guard) * 2, nullptr, 0)})
    if (!e.empty()) return e;
  gdn::Problem p;
  p.dtype = decode.dtype;
  p.batch = batch;
  p.heads_qk = hq;
  p.heads_v = hv;
  p.head_dim_k = dk;
  p.head_dim_v = dv;
  p.num_slots = c.num_slots;
  p.scale = m.scale;
  p.q = d_q.ptr;
  p.k = d_k.ptr;
  p.v = d_v.ptr;
  gates.into(&p);
  p.out = d_out.ptr;
  p.state = static_cast<float*>(m.d_state.ptr);
  p.slots = static_cast<const std::int32_t*>(m.d_slots.ptr);
  if (const kiln::Status s = gdn::run(p, nullptr, 0, reinterpret_cast<kiln::Stream>(stream));
      !s.ok())
    return "decode run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return std::string("decode kernel: ") + cudaGetErrorString(e);
  const std::vector<std::uint16_t> out = download<std::uint16_t>(d_out);
  const std::vector<float> got = download<float>(m.d_state);
  if (out.size() < out_elems + guard || got.size() != c.pool.size()) return "download failed";

  const std::size_t head_state = static_cast<std::size_t>(dk) * dv, T = m.tokens;
  const int group = hv / hq;
  double out_num = 0, out_den = 0, st_num = 0, st_den = 0;
  std::size_t unwritten = 0, skipped_written = 0;
  std::vector<double> dq(dk), dkk(dk), dvv(dv), dstate(head_state), dout(dv);
  for (int b = 0; b < batch; ++b) {
    const std::size_t out_seq = static_cast<std::size_t>(b) * hv * dv;
    if (m.slots[b] < 0) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(hv) * dv; ++i)
        skipped_written += out[out_seq + i] != kPoison;
      continue;
    }
    const int n = ref::commits(m.slots[b], c.accepted[b], m.tokens) ? c.accepted[b] : 0;
    for (int h = 0; h < hv; ++h) {
      const std::size_t so = (static_cast<std::size_t>(m.slots[b]) * hv + h) * head_state;
      for (std::size_t i = 0; i < head_state; ++i) dstate[i] = m.state[so + i];
      // The accepted tokens of the verify (rows b * T + t), then the step's token.
      for (int t = 0; t <= n; ++t) {
        const bool step = t == n;
        const std::size_t row = static_cast<std::size_t>(b) * (step ? 1 : T) + (step ? 0 : t);
        const std::vector<std::uint16_t>&sq = step ? q : m.q, &sk = step ? k : m.k,
              &sv = step ? vv : m.vv;
        const GateInputs& sg = step ? gates : m.gates;
        const std::size_t qk = (row * hq + h / group) * dk, vo = (row * hv + h) * dv;
        for (int i = 0; i < dk; ++i) {
          dq[i] = decode16(fp16, sq[qk + i]);
          dkk[i] = decode16(fp16, sk[qk + i]);
        }
        for (int j = 0; j < dv; ++j) dvv[j] = decode16(fp16, sv[vo + j]);
        ref::decodeHead(dk, dv, dq.data(), dkk.data(), dvv.data(), sg.ref_g[row * hv + h],
                        sg.ref_beta[row * hv + h], m.scale, dstate.data(), dout.data());
      }
      for (int j = 0; j < dv; ++j) {
        const std::uint16_t bits = out[out_seq + static_cast<std::size_t>(h) * dv + j];
        unwritten += bits == kPoison;
        const double o = decode16(fp16, bits);
        out_num += (o - dout[j]) * (o - dout[j]);
        out_den += dout[j] * dout[j];
      }
      for (std::size_t i = 0; i < head_state; ++i) {
        const double d = static_cast<double>(got[so + i]) - dstate[i];
        st_num += d * d;
        st_den += dstate[i] * dstate[i];
      }
    }
  }
  // The poisoned slots no live sequence owns, and the pool's guard, as the commit left them.
  std::vector<bool> owned(static_cast<std::size_t>(c.num_slots), false);
  for (const std::int32_t s : m.slots)
    if (s >= 0) owned[static_cast<std::size_t>(s)] = true;
  std::size_t poison_changed = 0;
  for (int s = 0; s < c.num_slots; ++s) {
    if (owned[static_cast<std::size_t>(s)]) continue;
    poison_changed +=
        changedFloats(got, static_cast<std::size_t>(s) * c.entry_elems,
                      static_cast<std::size_t>(s + 1) * c.entry_elems, 0xffffffffu) != 0;
  }
  poison_changed += changedFloats(got, c.state_elems, got.size(), 0xffffffffu) != 0;
  const double out_rel = out_den > 0 ? std::sqrt(out_num / out_den) : 0.0;
  const double st_rel = st_den > 0 ? std::sqrt(st_num / st_den) : 0.0;
  result->out_rel = out_rel;
  result->state_rel = st_rel;
  std::ostringstream err;
  const double bound = fp16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  if (unwritten) err << unwritten << " decode outputs of live sequences not written; ";
  if (skipped_written) err << skipped_written << " decode outputs of skipped sequences written; ";
  if (countChanged(out, out_elems, out_elems + guard)) err << "decode wrote past the end of out; ";
  if (poison_changed) err << poison_changed << " poisoned slots (or the guard) changed; ";
  if (!(out_rel <= bound)) err << "decode output relative L2 " << out_rel << " > " << bound << "; ";
  if (!(st_rel <= kRelL2BoundState))
    err << "state relative L2 " << st_rel << " > " << kRelL2BoundState << "; ";
  return err.str();
}

std::vector<VariantCase> allCommitCases() {
  return pairsOf(kMtpEntry, commitCases(), caseFor);
}

gdn::CommitProblem commitProbeOf(const generated::VariantInfo& v) {
  gdn::CommitProblem probe;  // batch 0: the pointer checks are skipped
  probe.tokens = 1;
  probe.heads_v = 1;
  probe.head_dim_k = v.head_dim_k;
  probe.head_dim_v = v.head_dim_v;
  return probe;
}

// Per (mtp variant with given gates, commit case): the verify (checked as GdnMtpNumerics checks
// it), the commit (bit for bit), then a decode step from the committed pool (against the
// reference over the accepted tokens), counted under the commit variant and the verify's dtype.
class GdnCommitNumerics : public ::testing::TestWithParam<VariantCase> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GdnCommitNumerics);

TEST_P(GdnCommitNumerics, CommitsTheAcceptedStateAndDecodeContinuesFromIt) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *commitCases()[GetParam().spec];
  const generated::VariantInfo* commit = commitVariant(v.head_dim_k, v.head_dim_v);
  const generated::VariantInfo* decode = nullptr;
  for (std::size_t i : variantsWith(kDecodeEntry)) {
    const auto& d = generated::kVariants[i];
    if (d.dtype == v.dtype && !d.fused_gating && d.head_dim_k == v.head_dim_k &&
        d.head_dim_v == v.head_dim_v)
      decode = &d;
  }
  Counts& counts = run().at(kiln::dtypeName(v.dtype),
                            commit != nullptr ? commit->name : "gdn_mtp_commit", spec.name);
  std::string skip = commit == nullptr   ? "the artifact has no gdn_mtp_commit variant"
                     : decode == nullptr ? "the artifact has no gdn_decode variant of this dtype"
                                         : "";
  if (skip.empty()) {
    for (const kiln::Status& s : {gdn::canImplement(probeOf<gdn::MtpProblem>(v), run().sm),
                                  gdn::canImplement(commitProbeOf(*commit), run().sm),
                                  gdn::canImplement(probeOf(*decode), run().sm)}) {
      if (!s.ok()) skip = s.toString();
    }
  }
  if (!skip.empty()) {
    ++counts.skipped;
    counts.notes.push_back(skip);
    GTEST_SKIP() << skip;
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec + 0x80) << 48)};
  CaseResult r;
  std::string failure;
  PreparedMtpCase m;
  PreparedCommit c;
  MtpCaseResult mr;
  if (failure = prepareMtpCase(v, spec, rng, &m); failure.empty()) {
    const kiln::Status s = gdn::run(m.p, nullptr, 0, kstream);
    failure = !s.ok()                                        ? "verify run: " + s.toString()
              : cudaStreamSynchronize(stream) != cudaSuccess ? "verify kernel failed"
                                                             : checkMtpCase(m, &mr);
    if (!failure.empty()) failure = "verify: " + failure;
  }
  if (failure.empty()) failure = prepareCommitAfter(m, spec, rng, &c);
  if (failure.empty()) {
    const kiln::Status can = gdn::canImplement(c.p, run().sm);
    const kiln::Status s = gdn::run(c.p, nullptr, 0, kstream);
    failure = !can.ok() || !s.ok()
                  ? "commit: canImplement " + can.toString() + ", run " + s.toString()
              : cudaStreamSynchronize(stream) != cudaSuccess ? "commit kernel failed"
                                                             : checkCommit(c);
    if (!failure.empty()) failure = "commit: " + failure;
  }
  if (failure.empty()) failure = decodeAfterCommit(*decode, m, c, rng, stream, &r);
  counts.recordCase(failure,
                    "decode after the commit: out rel L2 " + std::to_string(r.out_rel) +
                        ", state rel L2 " + std::to_string(r.state_rel),
                    std::string(v.name) + " " + spec.name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GdnCommitNumerics, ::testing::ValuesIn(allCommitCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + commitCases()[param_info.param.spec]->name;
                         });

// The commit's runner errors on the device, once per commit variant: each refused as
// canImplement says, the pool and the cache untouched; batch 0 a no-op.
class GdnCommitRunnerErrors : public ::testing::TestWithParam<std::size_t> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GdnCommitRunnerErrors);

TEST_P(GdnCommitRunnerErrors, RefusesBadProblemsAndLeavesThePoolAlone) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  if (const kiln::Status s = gdn::canImplement(commitProbeOf(v), run().sm); !s.ok()) {
    counts.skipped += 6;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const cases::Case spec{"commit_errors",
                         cases::Entry::kCommit,
                         3,
                         4,
                         2,
                         4,
                         0,
                         cases::CacheLayout::kBatch,
                         cases::Gates::kGiven,
                         0,
                         0,
                         cases::kNumerics,
                         cases::Accepted::kAll};
  Rng rng{run().seed ^ 0x28ULL};
  PreparedCommit c;
  ASSERT_EQ(prepareCommit(v, spec, rng, &c), "");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);
  auto untouched = [&]() {
    if (cudaStreamSynchronize(stream) != cudaSuccess) return false;
    const auto pool = download<float>(c.d_state);
    return pool.size() == c.pool.size() &&
           std::memcmp(pool.data(), c.pool.data(), pool.size() * 4) == 0;
  };
  auto refused = [&](const gdn::CommitProblem& p, kiln::StatusCode code, const std::string& needle,
                     const std::string& what) {
    const kiln::Status s = gdn::run(p, nullptr, 0, kstream);
    const kiln::Status can = gdn::canImplement(p, run().sm);
    EXPECT_TRUE(counts.record(s.code() == code && can.code() == code &&
                                  s.message().find(needle) != std::string::npos && untouched(),
                              what + ": run " + s.toString() + ", canImplement " + can.toString()));
  };
  {
    gdn::CommitProblem p = c.p;
    p.tokens = v.max_tokens + 1;
    refused(p, kiln::StatusCode::kInvalidArgument,
            "exceeds max_tokens " + std::to_string(v.max_tokens), "tokens past max_tokens");
  }
  {
    gdn::CommitProblem p = c.p;
    p.head_dim_k = 64;
    refused(p, kiln::StatusCode::kNotSupported, "mtp commit: head dims 64x", "unbuilt head dims");
  }
  {
    gdn::CommitProblem p = c.p;
    p.accepted = nullptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "accepted is null", "null accepted");
  }
  {
    gdn::CommitProblem p = c.p;
    p.cache = c.p.state;  // the pool as the cache: the commit would read what it writes
    refused(p, kiln::StatusCode::kInvalidArgument, "overlaps the state pool",
            "cache overlapping the pool");
  }
  {
    gdn::CommitProblem p = c.p;
    p.batch = 0;
    p.cache = nullptr;
    const kiln::Status s = gdn::run(p, nullptr, 0, kstream);
    EXPECT_TRUE(counts.record(s.ok() && untouched(), "batch 0: " + s.toString()));
  }
  {  // The admitted problem commits every sequence's last token.
    const kiln::Status s = gdn::run(c.p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::string failure = s.ok() ? checkCommit(c) : "run " + s.toString();
    EXPECT_TRUE(counts.record(failure.empty(), "valid problem: " + failure));
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GdnCommitRunnerErrors,
                         ::testing::ValuesIn(variantsWith(kCommitEntry)),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- issue 33: fresh threads --------------------------------------------------------------

// Every variant run from threads that did nothing else (tests/gpu/README.md). On the main thread:
// per thread and variant one case of cases.h (decode variants: one of three decode cases with
// skipped sequences; multi-token variants: a [batch, T] cache, a mapped cache or only the final
// state into the pool; the commit: one of three commit cases over a random cache; by thread), with
// random inputs and gates in the variant's form, out, the cache and the guards poisoned, and one
// non-blocking stream per thread. Then kFreshThreads threads with no current CUDA context and one
// whose current context is another context of the device (runOnFreshThreads) call run() at once,
// for every variant (both entries, both gate forms, both dtypes), in an order that makes the first
// launch of a variant race on several threads. A plain TEST runs before every parameterized one, so
// in a process of its own
// (--gtest_filter='*FreshThreads*') or first in a whole run, nothing has loaded a variant before
// these threads. Back on the main thread: every status ok, the streams synchronize, outputs and
// states (and cache entries) match the float64 reference within the bounds, untouched what must
// be, counted as the variant's "fresh_threads" and "fresh_threads_other_context" results.
TEST(GdnFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  constexpr const char* kDecodeNames[] = {"b7_h16_hv32_skip", "b5_h6_hv18_skip",
                                          "b32_h16_hv16_skip"};
  constexpr const char* kMtpNames[] = {"t3_b7_h16_hv32_skip", "t3_b5_h16_hv32_skip_mapped",
                                       "t1_b3_h16_hv32_final"};
  constexpr const char* kCommitNames[] = {"commit_t4_b8_h16_hv32_skip_all",
                                          "commit_t8_b32_h8_hv16_skip_mixed",
                                          "commit_t1_b7_h16_hv32_all"};
  auto isMtp = [](std::size_t i) { return hasEntry(generated::kVariants[i], kMtpEntry); };
  auto isCommit = [](std::size_t i) { return hasEntry(generated::kVariants[i], kCommitEntry); };
  auto nameOf = [&](int t, std::size_t i) {
    return isCommit(i) ? kCommitNames[t % 3] : isMtp(i) ? kMtpNames[t % 3] : kDecodeNames[t % 3];
  };
  auto specOf = [&](int t, std::size_t i) -> const cases::Case* {
    for (const cases::Case* c : isCommit(i) ? commitCases()
                                : isMtp(i)  ? mtpCases()
                                            : decodeCases()) {
      if (std::string(c->name) == nameOf(t, i)) return c;
    }
    return nullptr;
  };
  std::vector<FreshThreadsVariant> variants;
  for (std::size_t i = 0; i < nv; ++i) {
    const auto& v = generated::kVariants[i];
    const kiln::Status s = isCommit(i) ? gdn::canImplement(commitProbeOf(v), run().sm)
                           : isMtp(i)  ? gdn::canImplement(probeOf<gdn::MtpProblem>(v), run().sm)
                                       : gdn::canImplement(probeOf(v), run().sm);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  // Per thread and variant: the decode, multi-token or commit case (the others stay null).
  std::vector<std::vector<std::unique_ptr<PreparedCase>>> decode(kFreshThreads + 1);
  std::vector<std::vector<std::unique_ptr<PreparedMtpCase>>> mtp(kFreshThreads + 1);
  std::vector<std::vector<std::unique_ptr<PreparedCommit>>> commit(kFreshThreads + 1);
  for (auto& per_thread : decode) per_thread.resize(nv);
  for (auto& per_thread : mtp) per_thread.resize(nv);
  for (auto& per_thread : commit) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) -> std::string {
        const cases::Case* spec = specOf(t, i);
        const auto& v = generated::kVariants[i];
        if (spec == nullptr) return std::string(nameOf(t, i)) + ": no such numerics case";
        if (!caseFor(*spec, v)) return std::string(spec->name) + ": not a case of this variant";
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        if (isCommit(i)) {
          commit[t][i] = std::make_unique<PreparedCommit>();
          return prepareCommit(v, *spec, rng, commit[t][i].get());
        }
        if (isMtp(i)) {
          mtp[t][i] = std::make_unique<PreparedMtpCase>();
          return prepareMtpCase(v, *spec, rng, mtp[t][i].get());
        }
        decode[t][i] = std::make_unique<PreparedCase>();
        return prepareCase(v, *spec, rng, decode[t][i].get());
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        const auto kstream = reinterpret_cast<kiln::Stream>(stream);
        if (commit[t][i] != nullptr) return gdn::run(commit[t][i]->p, nullptr, 0, kstream);
        return mtp[t][i] != nullptr ? gdn::run(mtp[t][i]->p, nullptr, 0, kstream)
                                    : gdn::run(decode[t][i]->p, nullptr, 0, kstream);
      },
      [&](int t, std::size_t i) {
        std::string failure;
        if (commit[t][i] != nullptr) {
          failure = checkCommit(*commit[t][i]);
        } else if (mtp[t][i] != nullptr) {
          MtpCaseResult r;
          failure = checkMtpCase(*mtp[t][i], &r);
        } else {
          CaseResult r;
          failure = checkCase(*decode[t][i], &r);
        }
        return failure.empty() ? failure : std::string(nameOf(t, i)) + ": " + failure;
      });
}

// ---- summary ---------------------------------------------------------------------------------

// ---- prefill (gdn_prefill) --------------------------------------------------------------------

// Prefill cases (cases.h's kPrefillCases marked kNumerics) on every gdn_prefill variant of their
// gate form. Per case: the sequences packed into [T, ...] inputs (random 16-bit q, k, v; gates as
// for decode), cu_seqlens on the device, a pool with more slots than sequences handed out in a
// random permutation, some sequences skipped, some fresh (has_initial_state 0: their slot is filled
// with poison first, so a read of it shows), out poisoned with a guard. One run() with the
// workspace workspaceSize() asks for; then every output of a live sequence written, finite and
// within the bound against reference::prefillHead; every output of a skipped sequence still
// poison; the slots no live sequence owns and the guards bit-identical; the live slots' final
// states within the bound. then_decode cases then run one gdn_decode step per sequence on the pool
// the prefill wrote, against the float64 rule continued from the reference's final states.
//
// Bounds: the workspace holds w, u and the decayed q, k rounded to the dtype (as
// flash-linear-attention keeps them), so outputs and states carry the error of a few 16-bit
// roundings in series, not only the output's one: the groups' 16-bit output bounds
// (kRelL2BoundFp16 2e-3, kRelL2BoundBf16 1.2e-2, ~4x u / sqrt(3)) for both the outputs and the
// states, instead of decode's float32 state bound.
constexpr const char kPrefillEntry[] = "kiln_gdn_prefill_chunk";

const std::vector<const cases::PrefillCase*>& prefillCases() {
  static const std::vector<const cases::PrefillCase*> picks = [] {
    std::vector<const cases::PrefillCase*> all;
    for (const cases::PrefillCase& c : cases::kPrefillCases) {
      if ((c.readers & cases::kNumerics) != 0) all.push_back(&c);
    }
    return all;
  }();
  return picks;
}

bool prefillCaseFor(const cases::PrefillCase& c, const generated::VariantInfo& v) {
  return c.gates == cases::Gates::kBoth || (c.gates == cases::Gates::kFused) == v.fused_gating;
}

struct PrefillResult {
  double out_rel = 0.0, state_rel = 0.0, decode_out_rel = 0.0, decode_state_rel = 0.0;
  std::int64_t tokens = 0;
};

// sqrt(num / den), 0 for an empty sum.
double relL2(double num, double den) {
  return den > 0 ? std::sqrt(num / den) : 0.0;
}

// The float64 values of 16-bit inputs.
std::vector<double> decodeAll(bool fp16, const std::vector<std::uint16_t>& bits) {
  std::vector<double> out(bits.size());
  parallelFor(bits.size(), [&](std::size_t begin, std::size_t end, std::size_t) {
    for (std::size_t i = begin; i < end; ++i) out[i] = decode16(fp16, bits[i]);
  });
  return out;
}

// After a prefill, one gdn_decode step per sequence (the decode variant of the prefill's dtype and
// gate form) on the pool the prefill wrote, checked against reference::decodeHead continued from
// the reference's final states `ref_states` ([count * Hv] heads; those of skipped sequences
// unused). "" on success.
std::string decodeAfterPrefill(const generated::VariantInfo& pv, int count, int hq, int hv,
                               const std::vector<std::int32_t>& slots, int num_slots,
                               const DeviceBuffer& d_state, const DeviceBuffer& d_slots,
                               std::vector<double> ref_states, Rng& rng, cudaStream_t stream,
                               PrefillResult* r) {
  const generated::VariantInfo* dv_info = nullptr;
  for (std::size_t i : variantsWith(kDecodeEntry)) {
    const generated::VariantInfo& v = generated::kVariants[i];
    if (v.dtype == pv.dtype && v.fused_gating == pv.fused_gating && v.head_dim_k == pv.head_dim_k &&
        v.head_dim_v == pv.head_dim_v) {
      dv_info = &v;
    }
  }
  if (dv_info == nullptr) return "no gdn_decode variant of the prefill's dtype and gate form";
  const bool fp16 = isFp16(pv.dtype);
  const int dk = pv.head_dim_k, dv = pv.head_dim_v;
  const std::size_t head = static_cast<std::size_t>(dk) * dv;
  std::vector<std::uint16_t> q(static_cast<std::size_t>(count) * hq * dk), k(q.size()),
      vv(static_cast<std::size_t>(count) * hv * dv);
  for (auto& x : q) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : k) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : vv) x = randomBits(rng, formatOf(fp16), -4, 0);
  GateInputs gates;
  makeGates(rng, pv.fused_gating, fp16, static_cast<std::size_t>(count) * hv, hv, &gates);
  DeviceBuffer d_q, d_k, d_v, d_out;
  for (const std::string& e : {allocate(&d_q, q.size() * 2, q.data(), q.size() * 2),
                               allocate(&d_k, k.size() * 2, k.data(), k.size() * 2),
                               allocate(&d_v, vv.size() * 2, vv.data(), vv.size() * 2),
                               gates.upload(), allocate(&d_out, vv.size() * 2, nullptr, 0)}) {
    if (!e.empty()) return "decode after prefill: " + e;
  }
  gdn::Problem p;
  p.dtype = pv.dtype;
  p.batch = count;
  p.heads_qk = hq;
  p.heads_v = hv;
  p.head_dim_k = dk;
  p.head_dim_v = dv;
  p.num_slots = num_slots;
  p.scale = 1.0f / std::sqrt(static_cast<float>(dk));
  p.q = d_q.ptr;
  p.k = d_k.ptr;
  p.v = d_v.ptr;
  gates.into(&p);
  p.out = d_out.ptr;
  p.state = static_cast<float*>(d_state.ptr);
  p.slots = static_cast<const std::int32_t*>(d_slots.ptr);
  if (const kiln::Status s = gdn::run(p, nullptr, 0, reinterpret_cast<kiln::Stream>(stream));
      !s.ok()) {
    return "decode after prefill: run: " + s.toString();
  }
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("decode after prefill: kernel: ") + cudaGetErrorString(e);
  }
  const std::vector<std::uint16_t> out = download<std::uint16_t>(d_out);
  const std::vector<float> got = download<float>(d_state);
  const std::vector<double> dq = decodeAll(fp16, q), dkk = decodeAll(fp16, k),
                            dvv = decodeAll(fp16, vv);
  double on = 0, od = 0, sn = 0, sd = 0;
  std::size_t bad = 0;
  std::vector<double> o(static_cast<std::size_t>(dv));
  for (int b = 0; b < count; ++b) {
    if (slots[b] < 0) continue;
    for (int h = 0; h < hv; ++h) {
      double* st = &ref_states[(static_cast<std::size_t>(b) * hv + h) * head];
      const std::size_t qk = (static_cast<std::size_t>(b) * hq + h / (hv / hq)) * dk;
      const std::size_t vo = (static_cast<std::size_t>(b) * hv + h) * dv;
      const std::size_t gb = static_cast<std::size_t>(b) * hv + h;
      ref::decodeHead(dk, dv, &dq[qk], &dkk[qk], &dvv[vo], gates.ref_g[gb], gates.ref_beta[gb],
                      p.scale, st, o.data());
      for (int j = 0; j < dv; ++j) {
        const double x = decode16(fp16, out[vo + j]);
        bad += !std::isfinite(x);
        on += (x - o[j]) * (x - o[j]);
        od += o[j] * o[j];
      }
      const std::size_t so = (static_cast<std::size_t>(slots[b]) * hv + h) * head;
      for (std::size_t i = 0; i < head; ++i) {
        const double d = static_cast<double>(got[so + i]) - st[i];
        sn += d * d;
        sd += st[i] * st[i];
      }
    }
  }
  r->decode_out_rel = relL2(on, od);
  r->decode_state_rel = relL2(sn, sd);
  const double bound = fp16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  std::ostringstream err;
  if (bad) err << bad << " decode outputs after the prefill not finite; ";
  if (!(r->decode_out_rel <= bound)) {
    err << "decode after prefill: output relative L2 error " << r->decode_out_rel << " > bound "
        << bound << "; ";
  }
  if (!(r->decode_state_rel <= bound)) {
    err << "decode after prefill: state relative L2 error " << r->decode_state_rel << " > bound "
        << bound << "; ";
  }
  return err.str();
}

// Runs one (prefill variant, case); "" on success, else what failed.
std::string runPrefillCase(const generated::VariantInfo& v, const cases::PrefillCase& spec,
                           Rng& rng, cudaStream_t stream, PrefillResult* r) {
  const bool fp16 = isFp16(v.dtype);
  const int dk = v.head_dim_k, dv = v.head_dim_v;
  const int count = spec.count, hq = spec.heads_qk, hv = spec.heads_v;
  const int num_slots = count + count / 4 + 2;
  std::vector<std::int32_t> cu(static_cast<std::size_t>(count) + 1, 0);
  int max_len = 0;
  for (int b = 0; b < count; ++b) {
    cu[b + 1] = cu[b] + cases::prefillLength(spec, b);
    max_len = std::max(max_len, cases::prefillLength(spec, b));
  }
  const std::int64_t tokens = cu[count];
  r->tokens = tokens;
  const std::vector<std::int32_t> perm = permutation(rng, num_slots);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(count)), initial;
  for (int b = 0; b < count; ++b) {
    const bool skip = spec.skip_every > 0 && b % spec.skip_every == spec.skip_every - 1;
    slots[b] = skip ? -1 - rng.below(1 << 20) : perm[b];
  }
  if (spec.fresh_every > 0) {
    initial.resize(static_cast<std::size_t>(count));
    for (int b = 0; b < count; ++b)
      initial[b] = b % spec.fresh_every == spec.fresh_every - 1 ? 0 : 1;
  }
  const std::size_t head = static_cast<std::size_t>(dk) * dv;
  const std::size_t qk_elems = static_cast<std::size_t>(tokens) * hq * dk;
  const std::size_t out_elems = static_cast<std::size_t>(tokens) * hv * dv;
  const std::size_t slot_elems = static_cast<std::size_t>(hv) * head;
  const std::size_t state_elems = static_cast<std::size_t>(num_slots) * slot_elems;
  std::vector<std::uint16_t> q(qk_elems), k(qk_elems), vv(out_elems);
  for (auto& x : q) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : k) x = randomBits(rng, formatOf(fp16), -4, 0);
  for (auto& x : vv) x = randomBits(rng, formatOf(fp16), -4, 0);
  GateInputs gates;
  makeGates(rng, v.fused_gating, fp16, static_cast<std::size_t>(tokens) * hv, hv, &gates);
  std::vector<float> state(state_elems);
  for (auto& x : state) x = uniform(rng, -1.0f, 1.0f);
  // A fresh sequence's slot holds NaN: the kernel must not read it.
  for (int b = 0; b < count; ++b) {
    if (slots[b] >= 0 && !initial.empty() && initial[b] == 0) {
      std::fill_n(state.begin() + static_cast<std::ptrdiff_t>(slots[b] * slot_elems), slot_elems,
                  std::numeric_limits<float>::quiet_NaN());
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const std::size_t guard = 64;
  DeviceBuffer d_q, d_k, d_v, d_out, d_state, d_slots, d_cu, d_initial, d_ws;
  for (const std::string& e :
       {allocate(&d_q, std::max<std::size_t>(q.size(), 1) * 2, q.data(), q.size() * 2),
        allocate(&d_k, std::max<std::size_t>(k.size(), 1) * 2, k.data(), k.size() * 2),
        allocate(&d_v, std::max<std::size_t>(vv.size(), 1) * 2, vv.data(), vv.size() * 2),
        gates.upload(), allocate(&d_slots, slots.size() * 4, slots.data(), slots.size() * 4),
        allocate(&d_cu, cu.size() * 4, cu.data(), cu.size() * 4),
        allocate(&d_state, (state_elems + guard) * 4, state.data(), state_elems * 4),
        allocate(&d_out, (out_elems + guard) * 2, nullptr, 0)}) {
    if (!e.empty()) return e;
  }
  if (!initial.empty()) {
    if (const std::string e =
            allocate(&d_initial, initial.size() * 4, initial.data(), initial.size() * 4);
        !e.empty()) {
      return e;
    }
  }
  gdn::PrefillProblem p;
  p.dtype = v.dtype;
  p.batch = count;
  p.tokens = tokens;
  p.max_seqlen = max_len;
  p.heads_qk = hq;
  p.heads_v = hv;
  p.head_dim_k = dk;
  p.head_dim_v = dv;
  p.num_slots = num_slots;
  p.scale = scale;
  p.q = d_q.ptr;
  p.k = d_k.ptr;
  p.v = d_v.ptr;
  gates.into(&p);
  p.out = d_out.ptr;
  p.state = static_cast<float*>(d_state.ptr);
  p.slots = static_cast<const std::int32_t*>(d_slots.ptr);
  p.cu_seqlens = static_cast<const std::int32_t*>(d_cu.ptr);
  p.has_initial_state = initial.empty() ? nullptr : static_cast<const std::int32_t*>(d_initial.ptr);
  const std::size_t ws_bytes = gdn::workspaceSize(p);
  if (ws_bytes > 0) {
    if (const std::string e = allocate(&d_ws, ws_bytes, nullptr, 0); !e.empty()) return e;
  }
  if (const kiln::Status s =
          gdn::run(p, d_ws.ptr, ws_bytes, reinterpret_cast<kiln::Stream>(stream));
      !s.ok()) {
    return "run: " + s.toString();
  }
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  const std::vector<std::uint16_t> out = download<std::uint16_t>(d_out);
  const std::vector<float> got = download<float>(d_state);
  if (out.size() < out_elems + guard || got.size() < state_elems + guard) return "download failed";

  // The reference per (sequence, value head), in parallel: its final state into ref_states.
  const std::vector<double> dq = decodeAll(fp16, q), dkk = decodeAll(fp16, k),
                            dvv = decodeAll(fp16, vv);
  std::vector<double> ref_out(out_elems, 0.0),
      ref_states(static_cast<std::size_t>(count) * slot_elems);
  parallelFor(static_cast<std::size_t>(count) * hv,
              [&](std::size_t begin, std::size_t end, std::size_t) {
                for (std::size_t item = begin; item < end; ++item) {
                  const int b = static_cast<int>(item / hv), h = static_cast<int>(item % hv);
                  if (slots[b] < 0) continue;
                  double* st = &ref_states[item * head];
                  const bool from_slot = initial.empty() || initial[b] != 0;
                  const std::size_t so = (static_cast<std::size_t>(slots[b]) * hv + h) * head;
                  for (std::size_t i = 0; i < head; ++i) st[i] = from_slot ? state[so + i] : 0.0;
                  ref::prefillHead(cu[b], cu[b + 1], hq, hv, h, dk, dv, dq, dkk, dvv, gates.ref_g,
                                   gates.ref_beta, scale, st, ref_out);
                }
              });

  double on = 0, od = 0, sn = 0, sd = 0;
  std::size_t unwritten = 0, nonfinite = 0, skipped_written = 0, state_changed = 0;
  std::vector<bool> owned(static_cast<std::size_t>(num_slots), false);
  for (int b = 0; b < count; ++b) {
    const std::size_t first = static_cast<std::size_t>(cu[b]) * hv * dv;
    const std::size_t last = static_cast<std::size_t>(cu[b + 1]) * hv * dv;
    if (slots[b] < 0) {
      for (std::size_t i = first; i < last; ++i) skipped_written += out[i] != kPoison;
      continue;
    }
    owned[static_cast<std::size_t>(slots[b])] = true;
    for (std::size_t i = first; i < last; ++i) {
      const double x = decode16(fp16, out[i]);
      if (out[i] == kPoison) {
        ++unwritten;
      } else if (!std::isfinite(x)) {
        ++nonfinite;
      }
      on += (x - ref_out[i]) * (x - ref_out[i]);
      od += ref_out[i] * ref_out[i];
    }
    for (int h = 0; h < hv; ++h) {
      const double* st = &ref_states[(static_cast<std::size_t>(b) * hv + h) * head];
      const std::size_t so = (static_cast<std::size_t>(slots[b]) * hv + h) * head;
      for (std::size_t i = 0; i < head; ++i) {
        const double d = static_cast<double>(got[so + i]) - st[i];
        sn += d * d;
        sd += st[i] * st[i];
      }
    }
  }
  for (int sl = 0; sl < num_slots; ++sl) {
    if (owned[static_cast<std::size_t>(sl)]) continue;
    const std::size_t base = static_cast<std::size_t>(sl) * slot_elems;
    state_changed += std::memcmp(&state[base], &got[base], slot_elems * 4) != 0;
  }
  std::size_t state_guard_changed = 0;
  for (std::size_t i = state_elems; i < state_elems + guard; ++i) {
    std::uint32_t u;
    std::memcpy(&u, &got[i], 4);
    state_guard_changed += u != 0xffffffffu;
  }
  const std::size_t out_guard_changed = countChanged(out, out_elems, out_elems + guard);
  r->out_rel = relL2(on, od);
  r->state_rel = relL2(sn, sd);
  const double bound = fp16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  std::ostringstream err;
  if (unwritten) err << unwritten << " outputs of live sequences not written (still poison); ";
  if (nonfinite) err << nonfinite << " outputs not finite; ";
  if (skipped_written) err << skipped_written << " outputs of skipped sequences written; ";
  if (out_guard_changed) err << out_guard_changed << " elements written past the end of out; ";
  if (state_changed) err << state_changed << " state slots not owned by a live sequence changed; ";
  if (state_guard_changed) err << state_guard_changed << " elements written past the state pool; ";
  if (!(r->out_rel <= bound))
    err << "output relative L2 error " << r->out_rel << " > bound " << bound << "; ";
  if (!(r->state_rel <= bound))
    err << "state relative L2 error " << r->state_rel << " > bound " << bound << "; ";
  if (!err.str().empty() || !spec.then_decode) return err.str();
  return decodeAfterPrefill(v, count, hq, hv, slots, num_slots, d_state, d_slots,
                            std::move(ref_states), rng, stream, r);
}

std::vector<VariantCase> allPrefillCases() {
  return pairsOf(kPrefillEntry, prefillCases(), prefillCaseFor);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GdnPrefillNumerics);  // an artifact without prefill

class GdnPrefillNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(GdnPrefillNumerics, MatchesTheTokenByTokenRule) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::PrefillCase& spec = *prefillCases()[GetParam().spec];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, spec.name);
  if (const kiln::Status s = gdn::canImplement(probeOf<gdn::PrefillProblem>(v), run().sm);
      !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec + 0x500) << 48)};
  PrefillResult r;
  const std::string failure = runPrefillCase(v, spec, rng, stream, &r);
  std::string note = std::to_string(r.tokens) + " tokens: out rel L2 " + std::to_string(r.out_rel) +
                     ", state rel L2 " + std::to_string(r.state_rel);
  if (spec.then_decode) {
    note += "; decode after: out rel L2 " + std::to_string(r.decode_out_rel) + ", state rel L2 " +
            std::to_string(r.decode_state_rel);
  }
  counts.recordCase(failure, note, std::string(v.name) + " " + spec.name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GdnPrefillNumerics, ::testing::ValuesIn(allPrefillCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + prefillCases()[param_info.param.spec]->name;
                         });

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "gdn";
  f.case_key = "case";
  f.show_multiprocessors = true;
  f.per_variant_totals = true;
  std::ostringstream json;
  json << "\"state_bound\": " << kRelL2BoundState << ", \"cases\": [";
  for (std::size_t i = 0; i < decodeCases().size(); ++i) {
    const cases::Case& c = *decodeCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"batch\": " << c.batch
         << ", \"heads_qk\": " << c.heads_qk << ", \"heads_v\": " << c.heads_v
         << ", \"skip_every\": " << c.skip_every << "}";
  }
  json << "], \"mtp_cases\": [";
  for (std::size_t i = 0; i < mtpCases().size(); ++i) {
    const cases::Case& c = *mtpCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"tokens\": " << c.tokens
         << ", \"batch\": " << c.batch << ", \"heads_qk\": " << c.heads_qk
         << ", \"heads_v\": " << c.heads_v << ", \"skip_every\": " << c.skip_every
         << ", \"cache_layout\": \"" << layoutName(c.layout) << "\"}";
  }
  json << "], \"commit_cases\": [";
  for (std::size_t i = 0; i < commitCases().size(); ++i) {
    const cases::Case& c = *commitCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"tokens\": " << c.tokens
         << ", \"batch\": " << c.batch << ", \"heads_qk\": " << c.heads_qk
         << ", \"heads_v\": " << c.heads_v << ", \"skip_every\": " << c.skip_every
         << ", \"accepted\": \"" << acceptedName(c.accepted) << "\"}";
  }
  json << "], \"prefill_cases\": [";
  for (std::size_t i = 0; i < prefillCases().size(); ++i) {
    const cases::PrefillCase& c = *prefillCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"sequences\": " << c.count
         << ", \"heads_qk\": " << c.heads_qk << ", \"heads_v\": " << c.heads_v
         << ", \"skip_every\": " << c.skip_every << ", \"fresh_every\": " << c.fresh_every
         << ", \"then_decode\": " << (c.then_decode ? "true" : "false") << "}";
  }
  json << "]";
  f.extra_json = json.str();
  f.bound_fp16 = kRelL2BoundFp16;
  f.bound_bf16 = kRelL2BoundBf16;
  f.artifact_tag = kiln_artifact_tag();
  f.artifact_fingerprint = kiln_artifact_fingerprint();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  return kiln::gpu_test::numericsMain(argc, argv, reportFormat);
}
