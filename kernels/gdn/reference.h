// Gated DeltaNet decode, float64 host reference: the ground truth for tests/gpu/gdn_* and itself
// checked on hand-computed cases in kernels/gdn/tests/gdn_reference_test.cpp. Written for reading,
// not speed; the formulas are those of gdn_rule.py's header, step by step. The multi-token form
// (gdn_decode_mtp) is the one-token form applied token after token, with each state recorded; the
// commit (gdn_mtp_commit) copies the accepted one into the pool.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::gdn::reference {

inline constexpr double kL2Eps = 1e-6;  // x / sqrt(sum x^2 + 1e-6), as the kernel
// softplus(x) = x above it, log(1 + exp(x)) at or below it: torch's default, as the models use it.
inline constexpr double kSoftplusThreshold = 20.0;

// The gates of one (token, value head) from the model's gating inputs, as the fused-gating
// variants compute them: g = -exp(a_log) softplus(a + dt_bias), beta = sigmoid(b).
struct Gates {
  double g;
  double beta;
};
inline Gates gates(double a, double b, double a_log, double dt_bias) {
  const double x = a + dt_bias;
  const double soft = x > kSoftplusThreshold ? x : std::log1p(std::exp(x));
  return Gates{-std::exp(a_log) * soft, 1.0 / (1.0 + std::exp(-b))};
}

// One sequence and one value head. `state` is d_k x d_v row-major (S[i][j] at i * dv + j),
// updated in place; `out` gets d_v values.
inline void decodeHead(int dk, int dv, const double* q, const double* k, const double* v, double g,
                       double beta, double scale, double* state, double* out) {
  double qq = 0;
  double kk = 0;
  for (int i = 0; i < dk; ++i) {
    qq += q[i] * q[i];
    kk += k[i] * k[i];
  }
  const double rq = 1.0 / std::sqrt(qq + kL2Eps);
  const double rk = 1.0 / std::sqrt(kk + kL2Eps);
  const double decay = std::exp(g);
  for (int j = 0; j < dv; ++j) {
    double kv = 0;  // (S^T k)_j after the decay
    for (int i = 0; i < dk; ++i) {
      state[i * dv + j] *= decay;
      kv += state[i * dv + j] * k[i] * rk;
    }
    const double u = beta * (v[j] - kv);
    double o = 0;
    for (int i = 0; i < dk; ++i) {
      state[i * dv + j] += k[i] * rk * u;
      o += state[i * dv + j] * q[i] * rq;
    }
    out[j] = scale * o;
  }
}

// The whole batch, in the kernel's layouts: q, k [batch, H, dk]; v, out [batch, Hv, dv];
// g, beta [batch, Hv]; state pool [num_slots, Hv, dk, dv]; slots [batch] (negative: skipped,
// out left as it was). Value head hv reads query/key head hv / (Hv / H).
inline void decode(int batch, int heads_qk, int heads_v, int dk, int dv,
                   const std::vector<double>& q, const std::vector<double>& k,
                   const std::vector<double>& v, const std::vector<double>& g,
                   const std::vector<double>& beta, const std::vector<std::int32_t>& slots,
                   double scale, std::vector<double>& state, std::vector<double>& out) {
  const int group = heads_v / heads_qk;
  for (int b = 0; b < batch; ++b) {
    if (slots[b] < 0) continue;
    for (int hv = 0; hv < heads_v; ++hv) {
      const int h = hv / group;
      const std::size_t qk = (static_cast<std::size_t>(b) * heads_qk + h) * dk;
      const std::size_t vo = (static_cast<std::size_t>(b) * heads_v + hv) * dv;
      const std::size_t gb = static_cast<std::size_t>(b) * heads_v + hv;
      const std::size_t s = (static_cast<std::size_t>(slots[b]) * heads_v + hv) * dk * dv;
      decodeHead(dk, dv, &q[qk], &k[qk], &v[vo], g[gb], beta[gb], scale, &state[s], &out[vo]);
    }
  }
}

// One sequence and one value head over `tokens` tokens, each input and output contiguous per token:
// q, k [tokens, dk]; v, out [tokens, dv]; g, beta [tokens]; cache [tokens, dk * dv]. `state`
// (dk x dv) is the starting state and is left as the state after the last token; the state after
// token t is also copied to cache[t] (what the runtime keeps when t + 1 tokens are accepted).
inline void decodeMtpHead(int tokens, int dk, int dv, const double* q, const double* k,
                          const double* v, const double* g, const double* beta, double scale,
                          double* state, double* cache, double* out) {
  const std::size_t head = static_cast<std::size_t>(dk) * dv;
  for (int t = 0; t < tokens; ++t) {
    decodeHead(dk, dv, q + static_cast<std::size_t>(t) * dk, k + static_cast<std::size_t>(t) * dk,
               v + static_cast<std::size_t>(t) * dv, g[t], beta[t], scale, state,
               out + static_cast<std::size_t>(t) * dv);
    for (std::size_t i = 0; i < head; ++i) cache[t * head + i] = state[i];
  }
}

// The whole batch of the multi-token problem, in the kernel's layouts: q, k [batch, T, H, dk];
// v, out [batch, T, Hv, dv]; g, beta [batch, T, Hv]; state pool [num_slots, Hv, dk, dv], only
// read; cache [batch, T, Hv, dk, dv]; slots [batch] (negative: skipped, its out and cache left as
// they were). Value head hv reads query/key head hv / (Hv / H).
inline void decodeMtp(int batch, int tokens, int heads_qk, int heads_v, int dk, int dv,
                      const std::vector<double>& q, const std::vector<double>& k,
                      const std::vector<double>& v, const std::vector<double>& g,
                      const std::vector<double>& beta, const std::vector<std::int32_t>& slots,
                      double scale, const std::vector<double>& state, std::vector<double>& cache,
                      std::vector<double>& out) {
  const int group = heads_v / heads_qk;
  const std::size_t head = static_cast<std::size_t>(dk) * dv;
  std::vector<double> hq(static_cast<std::size_t>(tokens) * dk), hk(hq.size());
  std::vector<double> hvv(static_cast<std::size_t>(tokens) * dv), hout(hvv.size());
  std::vector<double> hg(static_cast<std::size_t>(tokens)), hbeta(hg.size());
  std::vector<double> hstate(head), hcache(static_cast<std::size_t>(tokens) * head);
  for (int b = 0; b < batch; ++b) {
    if (slots[b] < 0) continue;
    for (int hv = 0; hv < heads_v; ++hv) {
      const int h = hv / group;
      for (int t = 0; t < tokens; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * tokens + t;  // [batch, T] row
        const std::size_t qk = (row * heads_qk + h) * dk;
        const std::size_t vo = (row * heads_v + hv) * dv;
        for (int i = 0; i < dk; ++i) {
          hq[static_cast<std::size_t>(t) * dk + i] = q[qk + i];
          hk[static_cast<std::size_t>(t) * dk + i] = k[qk + i];
        }
        for (int j = 0; j < dv; ++j) hvv[static_cast<std::size_t>(t) * dv + j] = v[vo + j];
        hg[t] = g[row * heads_v + hv];
        hbeta[t] = beta[row * heads_v + hv];
      }
      const std::size_t s = (static_cast<std::size_t>(slots[b]) * heads_v + hv) * head;
      for (std::size_t i = 0; i < head; ++i) hstate[i] = state[s + i];
      decodeMtpHead(tokens, dk, dv, hq.data(), hk.data(), hvv.data(), hg.data(), hbeta.data(),
                    scale, hstate.data(), hcache.data(), hout.data());
      for (int t = 0; t < tokens; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * tokens + t;
        const std::size_t vo = (row * heads_v + hv) * dv;
        const std::size_t c = (row * heads_v + hv) * head;
        for (int j = 0; j < dv; ++j) out[vo + j] = hout[static_cast<std::size_t>(t) * dv + j];
        for (std::size_t i = 0; i < head; ++i) cache[c + i] = hcache[t * head + i];
      }
    }
  }
}

// Whether the MTP commit writes sequence b's slot: a live slot and 1 <= accepted <= tokens (0: no
// draft accepted; a negative count or one above tokens is out of contract and writes nothing).
inline bool commits(std::int32_t slot, std::int32_t accepted, int tokens) {
  return slot >= 0 && accepted >= 1 && accepted <= tokens;
}

// The MTP commit (gdn_mtp_commit): per sequence b that commits(), state[slots[b]] = cache[b,
// accepted[b] - 1] (every value head); every other slot left as it was. cache [batch, tokens, Hv,
// dk, dv] (decodeMtp's), state [num_slots, Hv, dk, dv]. A copy, so T is the element type of both:
// double for the reference, float for the exact expectation of the GPU test.
template <typename T>
void commitMtp(int batch, int tokens, int heads_v, int dk, int dv, const std::vector<T>& cache,
               const std::vector<std::int32_t>& slots, const std::vector<std::int32_t>& accepted,
               std::vector<T>& state) {
  const std::size_t entry = static_cast<std::size_t>(heads_v) * dk * dv;  // one token's states
  for (int b = 0; b < batch; ++b) {
    if (!commits(slots[b], accepted[b], tokens)) continue;
    const std::size_t from = (static_cast<std::size_t>(b) * tokens + accepted[b] - 1) * entry;
    const std::size_t to = static_cast<std::size_t>(slots[b]) * entry;
    for (std::size_t i = 0; i < entry; ++i) state[to + i] = cache[from + i];
  }
}

// Prefill (gdn_prefill), one sequence and one value head: tokens begin .. end - 1 of the packed
// layouts q, k [T, H, dk], v, out [T, Hv, dv], g, beta [T, Hv], token by token from `state` (dk x
// dv, left as the state after the last token). The chunked kernels compute the same in another
// order; this is the definition.
inline void prefillHead(std::int32_t begin, std::int32_t end, int heads_qk, int heads_v, int hv,
                        int dk, int dv, const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v, const std::vector<double>& g,
                        const std::vector<double>& beta, double scale, double* state,
                        std::vector<double>& out) {
  const int h = hv / (heads_v / heads_qk);
  for (std::int32_t t = begin; t < end; ++t) {
    const std::size_t qk = (static_cast<std::size_t>(t) * heads_qk + h) * dk;
    const std::size_t vo = (static_cast<std::size_t>(t) * heads_v + hv) * dv;
    const std::size_t gb = static_cast<std::size_t>(t) * heads_v + hv;
    decodeHead(dk, dv, &q[qk], &k[qk], &v[vo], g[gb], beta[gb], scale, state, &out[vo]);
  }
}

// The whole packed batch: sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1] - 1, starting
// from state[slots[b]] (the pool [num_slots, Hv, dk, dv]) or from zero where has_initial[b] is 0
// (has_initial empty: every sequence from its slot); its final state is written back to the slot.
// A negative slot skips the sequence (out and pool left as they were).
inline void prefill(int batch, int heads_qk, int heads_v, int dk, int dv,
                    const std::vector<std::int32_t>& cu_seqlens, const std::vector<double>& q,
                    const std::vector<double>& k, const std::vector<double>& v,
                    const std::vector<double>& g, const std::vector<double>& beta,
                    const std::vector<std::int32_t>& slots,
                    const std::vector<std::int32_t>& has_initial, double scale,
                    std::vector<double>& state, std::vector<double>& out) {
  const std::size_t head = static_cast<std::size_t>(dk) * dv;
  for (int b = 0; b < batch; ++b) {
    if (slots[b] < 0) continue;
    const bool from_slot = has_initial.empty() || has_initial[b] != 0;
    for (int hv = 0; hv < heads_v; ++hv) {
      double* s = &state[(static_cast<std::size_t>(slots[b]) * heads_v + hv) * head];
      if (!from_slot) std::fill(s, s + head, 0.0);
      prefillHead(cu_seqlens[b], cu_seqlens[b + 1], heads_qk, heads_v, hv, dk, dv, q, k, v, g, beta,
                  scale, s, out);
    }
  }
}

}  // namespace kiln::gdn::reference
