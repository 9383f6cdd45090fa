// A hand-made artifact's metadata for the report and doctor tests: two rmsnorm variants, one
// with an sm_90 cubin, one with compute_80 PTX, each image's sha256 and size those of the bytes
// given, so that a test writes the bytes and the metadata and has a consistent artifact.
#pragma once

#include <cstdint>
#include <string>

#include "core/fingerprint.h"
#include "core/metadata.h"
#include "core/naming.h"
#include "io/fs.h"

namespace kiln::testing {

// Two variants: rmsnorm_h1024_bf16 with an sm_90 cubin, rmsnorm_h4096_bf16 with compute_80 PTX.
inline core::ArtifactMetadata twoImageMetadata(const std::string& cubin_bytes,
                                               const std::string& ptx_bytes) {
  using namespace core;  // NOLINT(google-build-using-namespace)
  ArtifactMetadata m;
  Provenance& p = m.provenance;
  p.kiln_version = "0.1.0";
  p.arch = "x86_64";
  p.host_target = "x86_64-linux-gnu";
  p.tag = "compute_80_sm_90";
  p.gpu_archs = {GpuArch(80, true), GpuArch(90)};
  p.compile_targets = {"compute_80", "sm_90"};
  p.cuda_version = "13.0.88";
  p.host_compiler_command = "g++";
  p.host_compiler_version = "g++ 12.2.0";
  m.build_date = "2025-01-01T00:00:00Z";
  m.library = {"lib/libkiln.a", "11", 42};
  for (const char* name : {"rmsnorm_h1024_bf16", "rmsnorm_h4096_bf16"}) {
    const bool ptx = std::string(name) == "rmsnorm_h4096_bf16";
    const int sm = ptx ? 80 : 90;
    VariantRecord v;
    v.name = name;
    v.group = "rmsnorm";
    v.kind = "cuda";
    v.entries = {"kernel_main"};
    v.constants = {{"hidden", ConstantType::kInt, std::int64_t{ptx ? 4096 : 1024}}};
    v.fingerprint = "ff";
    ImageRecord image;
    image.sm = sm;
    image.target = nvccTarget(sm, false, ptx);
    image.format = ptx ? kFormatPtx : kFormatCubin;
    image.symbol = imageSymbol(name, sm);
    image.cubin = imagePath(name, sm, ptx);
    const std::string& bytes = ptx ? ptx_bytes : cubin_bytes;
    image.sha256 = io::sha256Hex(bytes);
    image.size = bytes.size();
    image.compile_seconds = 0.5;
    if (!ptx) image.kernels["kernel_main"] = {40, 2048, 0, 4, 8};
    v.images[sm] = image;
    m.variants[name] = v;
  }
  m.groups["rmsnorm"] = {"cuda", {80, 90}, {"rmsnorm_h1024_bf16", "rmsnorm_h4096_bf16"}};
  m.fingerprint = artifactFingerprint(m);
  return m;
}

}  // namespace kiln::testing
