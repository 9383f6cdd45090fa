#!/usr/bin/env bash
# test.sh: the README's second command, and what CI runs (.ci/run). Installs what is missing,
# checks that every C++ / CUDA file is clang-formatted (scripts/format.sh --check), builds kiln
# and its tests (release preset), runs every CPU test through ctest (GPU-labelled
# tests excluded; the e2e ones include the aarch64 cross-build of examples/consumer), packages three
# entries of the release matrix, builds examples/qwen3's decoder against the x86_64 one and runs
# its CPU tests, builds the host unit tests with ASan + UBSan (asan preset) and
# runs them, then runs each libFuzzer target for a bounded time on its seed corpus
# (tests/fuzz/run.sh).
#
#   KILN_JOBS (all cores) sets build parallelism; tests run 2 at a time, as on a 2-core CI box.
#   KILN_FUZZ_SECONDS (20) is the time per fuzz target; 0 skips fuzzing.
#
# Compiles go through ccache (installed by setup.sh): CMake's C/C++ compiles
# (CMAKE_<LANG>_COMPILER_LAUNCHER) and the release matrix's nvcc and host compiles
# (KILN_COMPILER_LAUNCHER, docs/cli.md "Caching compiles"). The cache is build/ccache, so a run
# reads and writes nothing outside the checkout: a fresh clone starts cold, a second run is warm.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${KILN_JOBS:-$(nproc)}"
FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-20}"
cd "$ROOT"
export CCACHE_DIR="$ROOT/build/ccache"

step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

step "setup"
scripts/setup.sh

step "format: scripts/format.sh --check"
scripts/format.sh --check

step "release: configure and build"
cmake --preset release -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build --preset release -j "$JOBS"

# The e2e tests include a real `kiln build` of the rmsnorm group (shared by a fixture test).
step "release: ctest -LE gpu"
ctest --preset release -LE gpu -j 2

# Three entries of the release matrix (packaging/matrix.toml), end to end: clean build, coverage
# gate, package, verify. The x86_64 entry is the README's default target; the aarch64 ones are the
# cross build for Jetson Orin with CUDA 13 (JetPack 7) and with CUDA 12 (JetPack 6: nvcc's PTX
# assembled by the CUDA 12 ptxas in .cuda12/). The other entries differ only in SMs.
step "release matrix: x86_64/sm_90, aarch64/sm_87, aarch64/sm_87/cuda12"
ccache --zero-stats >/dev/null
KILN_COMPILER_LAUNCHER=ccache \
  build/release/tools/kiln/kiln package --matrix \
  --entries x86_64/sm_90,aarch64/sm_87,aarch64/sm_87/cuda12 \
  --output-dir build/release/matrix/artifacts --dist build/release/matrix/dist -j "$JOBS"
ccache --show-stats
# Each artifact carries bin/kiln-doctor for its host arch (package verified its ELF machine);
# shown here for the cross-built one, as the target would see it.
doctor=build/release/matrix/artifacts/aarch64/sm_87/bin/kiln-doctor
readelf -h "$doctor" | grep -E 'Machine:|Type:'
echo "$doctor needs $(grep -ao 'GLIBC_2\.[0-9]*' "$doctor" | sort -uV | tail -n 1) on the target"
readelf -h "$doctor" | grep -q 'Machine: *AArch64' || { echo "$doctor is not aarch64" >&2; exit 1; }

# examples/qwen3's decoder, a consumer of the default artifact (the matrix's x86_64/sm_90, every
# group): built against it, and its refusals run with no GPU (each one comes before CUDA is used).
step "examples/qwen3: qwen3_generate against the x86_64/sm_90 artifact"
cmake -S examples/qwen3 -B build/qwen3 -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKiln_DIR="$ROOT/cmake" -DKILN_ARTIFACTS_DIR="$ROOT/build/release/matrix/artifacts" \
  -DKILN_DIST_DIR="$ROOT/build/release/matrix/dist" -DKILN_TAG=sm_90 \
  -DKILN_VERIFY_EXECUTABLE="$ROOT/build/release/tools/kiln-verify/kiln-verify" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build build/qwen3 -j "$JOBS"
ctest --test-dir build/qwen3 -j 2 --output-on-failure

step "asan: configure and build"
cmake --preset asan -DKILN_BUILD_TOOLS=ON -DCMAKE_C_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build --preset asan -j "$JOBS"

# examples: the Qwen3 example's checkpoint loader, a parser of outside files (safetensors, JSON).
step "asan: ctest -L 'unit|runtime|runners|examples'"
ctest --preset asan -L 'unit|runtime|runners|examples' -j 2

if [ "$FUZZ_SECONDS" -gt 0 ]; then
  step "fuzz: ${FUZZ_SECONDS}s per target"
  tests/fuzz/run.sh "$FUZZ_SECONDS"
fi

step "all tests passed"
