// Gated DeltaNet decode, float64 host reference: the ground truth for tests/gpu/gdn_* and itself
// checked on hand-computed cases in tests/runners/gdn_reference_test.cpp. Written for reading,
// not speed; the formulas are those of gdn_decode.py's header, step by step.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace kiln::gdn::reference {

inline constexpr double kL2Eps = 1e-6;  // x / sqrt(sum x^2 + 1e-6), as the kernel

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
inline void decode(int batch, int heads_qk, int heads_v, int dk, int dv, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v,
                   const std::vector<double>& g, const std::vector<double>& beta,
                   const std::vector<std::int32_t>& slots, double scale, std::vector<double>& state,
                   std::vector<double>& out) {
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

}  // namespace kiln::gdn::reference
