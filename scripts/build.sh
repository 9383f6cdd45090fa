#!/usr/bin/env bash
# build.sh: the README's first command. Installs what is missing (scripts/setup.sh), builds the
# `kiln` builder (release preset, build/release/), builds every registered kernel group for
# x86_64 / sm_90 into artifacts/x86_64/sm_90/ (kiln prints the table of what it built), packages
# it into dist/kiln_x86_64_sm_90_cuda<major>.tar.gz (+ .sha256) and verifies that tarball, and,
# when a GPU is present, builds the numeric self-test (tests/gpu, a consumer project of the
# artifact) and runs it, ending with how many cases passed.
#
#   KILN_GPU_ARCH (sm_90), KILN_ARCH (x86_64), KILN_JOBS (all cores) override the defaults.
#
# The whole release matrix (packaging/matrix.toml) is `kiln package --matrix`
# (docs/packaging.md); this script builds the default target only.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPU_ARCH="${KILN_GPU_ARCH:-sm_90}"
ARCH="${KILN_ARCH:-x86_64}"
JOBS="${KILN_JOBS:-$(nproc)}"
cd "$ROOT"

step() { printf '\n== %s\n' "$*"; }

step "setup"
scripts/setup.sh

step "build kiln (release)"
cmake --preset release
cmake --build --preset release --target kiln -j "$JOBS"
KILN="$ROOT/build/release/tools/kiln/kiln"

# --clean: the artifact is always rebuilt whole from the current sources, never merged into an
# older one.
step "kiln build --gpu-arch $GPU_ARCH --arch $ARCH --kernels ALL"
"$KILN" build --gpu-arch "$GPU_ARCH" --arch "$ARCH" --kernels ALL --clean -j "$JOBS"
# The tag: the SMs ascending, joined (sm_90; sm_87,sm_90 -> sm_87_sm_90), as kiln names it.
TAG="$(tr ',' '\n' <<<"$GPU_ARCH" | sed 's/^ *sm_//' | sort -n | sed 's/^/sm_/' | paste -sd_)"
ARTIFACT="$ROOT/artifacts/$ARCH/$TAG"

step "kiln package + kiln verify"
package_log="$(mktemp)"
trap 'rm -f "$package_log"' EXIT
"$KILN" package "$ARTIFACT" --dist "$ROOT/dist" | tee "$package_log"
TARBALL="$(sed -n 's/^tarball: //p' "$package_log")"
"$KILN" verify "$TARBALL"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  step "no GPU (nvidia-smi -L failed): numeric self-test skipped"
  echo "artifact: $ARTIFACT"
  echo "tarball: $TARBALL"
  exit 0
fi

step "numeric self-test on $(nvidia-smi -L | head -n 1)"
"$KILN" doctor "$ARTIFACT" || true   # a report, not a gate: the self-test below decides
cmake -S tests/gpu -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKiln_DIR="$ROOT/cmake" -DKILN_ARTIFACTS_DIR="$ROOT/artifacts" -DKILN_TAG="$TAG" \
  -DKILN_VERIFY_EXECUTABLE="$ROOT/build/release/tools/kiln-verify/kiln-verify"
cmake --build build/gpu -j "$JOBS"
log="build/gpu/selftest.log"
set +e
ctest --test-dir build/gpu --output-on-failure -V 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
step "self-test summary"
# One summary line per group's test (each ends with its own "N passed, N failed, N skipped").
grep -E '^([0-9]+: )?[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" || true
grep -E 'tests passed, [0-9]+ tests failed' "$log" | tail -n 1 || true
echo "artifact: $ARTIFACT"
echo "tarball: $TARBALL"
exit "$status"
