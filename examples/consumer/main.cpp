// A consumer of a kiln artifact: asks the rmsnorm runner whether it can run a problem, and on a
// machine with a GPU runs it and checks a few rows against a float64 host computation.
//
// Exit code: 0 when the GPU run matched, or when there is no GPU and the runtime says so in the
// expected way (libcuda.so.1 absent, or no CUDA device); 1 otherwise.
#ifndef KILN_RMSNORM_ENABLED
// The gate kiln_import_artifacts() sets from the artifact's metadata; without it, fail here with
// the fix rather than at run time.
#error "no rmsnorm in the artifact: kiln build --gpu-arch sm_90 --arch x86_64 --kernels rmsnorm"
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/kiln_all.h"
#include "kiln/runners/rmsnorm.h"
#include "kiln/runtime.h"

#ifdef KILN_CONSUMER_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

namespace {

constexpr std::int64_t kRows = 7;  // an odd count, so a row-tail bug shows
constexpr float kEps = 1e-6f;

// bf16 is the top half of an fp32, rounded to nearest even.
std::uint16_t toBf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float fromBf16(std::uint16_t value) {
  std::uint32_t bits = static_cast<std::uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

// The first bf16 variant the artifact carries: its hidden size comes from the generated table,
// so nothing here repeats a constant baked into the artifact.
std::int64_t pickHidden() {
  for (const auto& entry : kiln::generated::rmsnorm::kVariants) {
    if (entry.dtype == kiln::DType::kBFloat16) return entry.hidden;
  }
  return 0;
}

// The expected kind of failure on a machine without a GPU.
bool isNoGpu(const kiln::Status& status) {
  if (status.code() == kiln::StatusCode::kDriverUnavailable) return true;
  return status.code() == kiln::StatusCode::kDriverError &&
         status.message().find("NO_DEVICE") != std::string::npos;
}

// Host float64 RMSNorm of one row, from the bf16 inputs as the kernel sees them.
double referenceAt(const std::vector<std::uint16_t>& x, const std::vector<std::uint16_t>& w,
                   std::int64_t hidden, std::int64_t row, std::int64_t col) {
  double sum = 0;
  for (std::int64_t i = 0; i < hidden; ++i) {
    double v = fromBf16(x[static_cast<std::size_t>(row * hidden + i)]);
    sum += v * v;
  }
  double scale = 1.0 / std::sqrt(sum / static_cast<double>(hidden) + kEps);
  return fromBf16(x[static_cast<std::size_t>(row * hidden + col)]) * scale *
         fromBf16(w[static_cast<std::size_t>(col)]);
}

#ifdef KILN_CONSUMER_HAVE_CUDART
// Allocates, runs and checks; returns the process exit code.
int runOnGpu(kiln::rmsnorm::Problem problem, const std::vector<std::uint16_t>& x,
             const std::vector<std::uint16_t>& weight) {
  const std::size_t bytes = x.size() * sizeof(std::uint16_t);
  void *d_x = nullptr, *d_out = nullptr, *d_w = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&d_x, bytes) != cudaSuccess || cudaMalloc(&d_out, bytes) != cudaSuccess ||
      cudaMalloc(&d_w, weight.size() * sizeof(std::uint16_t)) != cudaSuccess ||
      cudaStreamCreate(&stream) != cudaSuccess) {
    std::printf("cuda: allocation failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaMemcpy(d_x, x.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(d_w, weight.data(), weight.size() * sizeof(std::uint16_t), cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0xff, bytes);  // poison: NaN in bf16, so an unwritten element fails
  problem.x = d_x;
  problem.out = d_out;
  problem.weight = d_w;

  kiln::Status status = kiln::rmsnorm::run(problem, nullptr, 0, stream);
  std::printf("run: %s\n", status.toString().c_str());
  if (!status.ok()) return 1;
  std::vector<std::uint16_t> out(x.size());
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(out.data(), d_out, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::printf("cuda: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  int bad = 0, checked = 0;
  for (std::int64_t row = 0; row < problem.rows; ++row) {
    for (std::int64_t col : {std::int64_t{0}, problem.hidden / 2, problem.hidden - 1}) {
      double want = referenceAt(x, weight, problem.hidden, row, col);
      double got = fromBf16(out[static_cast<std::size_t>(row * problem.hidden + col)]);
      ++checked;
      if (!(std::fabs(got - want) <= 1e-2 + 1e-2 * std::fabs(want))) {
        std::printf("mismatch at [%lld, %lld]: got %g, want %g\n", static_cast<long long>(row),
                    static_cast<long long>(col), got, want);
        ++bad;
      }
    }
  }
  cudaFree(d_x);
  cudaFree(d_out);
  cudaFree(d_w);
  cudaStreamDestroy(stream);
  std::printf("%d of %d checked values match\n", checked - bad, checked);
  return bad == 0 ? 0 : 1;
}
#endif

}  // namespace

int main() {
  std::printf("artifact %s, fingerprint %s\n", kiln_artifact_tag(), kiln_artifact_fingerprint());
  if (std::string(kiln_artifact_fingerprint()) != KILN_CONSUMER_FINGERPRINT) {
    std::printf("the linked library's fingerprint differs from metadata.json's (%s)\n",
                KILN_CONSUMER_FINGERPRINT);
    return 1;
  }
  const std::int64_t hidden = pickHidden();
  if (hidden == 0) {
    std::printf("the artifact has no bf16 rmsnorm variant; nothing to run\n");
    return 1;
  }

  // Host buffers stand in for device ones in the admission check, which looks only at shapes,
  // dtype and alignment; run() gets device buffers.
  std::vector<std::uint16_t> x(static_cast<std::size_t>(kRows * hidden));
  std::vector<std::uint16_t> weight(static_cast<std::size_t>(hidden));
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = toBf16(std::sin(0.37f * static_cast<float>(i)));
  for (std::size_t i = 0; i < weight.size(); ++i) {
    weight[i] = toBf16(1.0f + 0.25f * std::cos(0.11f * static_cast<float>(i)));
  }
  kiln::rmsnorm::Problem problem;
  problem.dtype = kiln::rmsnorm::DType::kBFloat16;
  problem.rows = kRows;
  problem.hidden = hidden;
  problem.eps = kEps;
  problem.x = x.data();
  problem.out = out.data();
  problem.weight = weight.data();
  kiln::Status admitted = kiln::rmsnorm::canImplement(problem);
  std::printf("canImplement(rows=%lld, hidden=%lld, bf16): %s\n", static_cast<long long>(kRows),
              static_cast<long long>(hidden), admitted.toString().c_str());
  if (!admitted.ok()) return 1;

  // Which variants this machine can run, before any allocation or launch.
  std::size_t count = 0;
  const kiln_variant* const* variants = kiln_artifact_variants(&count);
  kiln::DoctorReport report;
  kiln::Status device = kiln::doctor({variants, count}, 0, &report);
  if (!device.ok()) {
    std::printf("no GPU: %s\n", device.toString().c_str());
    return isNoGpu(device) ? 0 : 1;
  }
  std::printf("device 0: %s, sm_%d\n", report.device.name.c_str(), report.device.sm);
  int runnable = 0;
  for (const kiln::VariantReport& v : report.variants) {
    if (v.runnable) {
      ++runnable;
      std::printf("  %s: runs the %s_%d image%s\n", v.name.c_str(), v.image_ptx ? "compute" : "sm",
                  v.image_sm, v.image_ptx ? " (PTX, JIT-compiled by the driver at load)" : "");
    } else {
      std::printf("  %s: cannot run: %s\n", v.name.c_str(), v.reason.c_str());
    }
  }
  std::printf("doctor: %d of %zu variants can run here\n", runnable, report.variants.size());
#ifdef KILN_CONSUMER_HAVE_CUDART
  return runOnGpu(problem, x, weight);
#else
  std::printf("built without the CUDA runtime: cannot allocate device buffers\n");
  return 1;
#endif
}
