#!/usr/bin/env bash
# build_refs.sh: the binaries of one group at several git refs, for an A/B comparison in one GPU
# call (docs/performance-method.md: the base and each candidate in the same call, passes in both orders).
#
#   scripts/build_refs.sh GROUP NAME=REF...      e.g. decodeattn base=main addr=candidate/decodeattn-addr
#
# For each NAME=REF: a detached worktree of REF under build/refs/NAME/src, its GROUP artifact for
# sm_90 (kiln build of this checkout, --root the worktree: the kernels, runtime and CMake package
# of REF), and against it the bench bridge and the numerics test in the layout scripts/gpu_check.sh
# reads: .gpu/NAME/build/bench/libkiln_bench_GROUP.so, .gpu/NAME/build/gpu/<test>. Then, on the GPU:
#   for n in base addr addr base; do KILN_GPU_DIR=.gpu/$n scripts/gpu_check.sh GROUP-bench; done
# Needs this checkout's kiln (build/release/tools/kiln/kiln; scripts/build.sh makes it).
# Environment: KILN_TAG (default sm_90), JOBS (default: every core).
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KILN="$ROOT/build/release/tools/kiln/kiln"
GROUP="$1"
shift
TAG="${KILN_TAG:-sm_90}"
JOBS="${JOBS:-$(nproc)}"
[ -x "$KILN" ] || { echo "build_refs.sh: no $KILN (run scripts/build.sh first)" >&2; exit 1; }

for spec in "$@"; do
  name="${spec%%=*}"
  ref="${spec#*=}"
  if [ "$name" = "$spec" ] || [ -z "$name" ] || [ -z "$ref" ]; then
    echo "build_refs.sh: '$spec' is not NAME=REF" >&2
    exit 2
  fi
  case "$name" in
    *[!A-Za-z0-9_-]*) echo "build_refs.sh: NAME '$name' must be letters, digits, _ or -" >&2; exit 2 ;;
  esac
  if ! commit="$(git -C "$ROOT" rev-parse --verify --quiet "$ref^{commit}")"; then
    echo "build_refs.sh: $name=$ref: no such commit, branch or tag" >&2
    exit 2
  fi
  work="$ROOT/build/refs/$name"
  echo "== $name: $ref ($commit)"
  if [ -d "$work/src" ]; then git -C "$ROOT" worktree remove --force "$work/src"; fi
  rm -rf "$work" "$ROOT/.gpu/$name"
  mkdir -p "$work/dist"   # empty: the consumer builds import the fresh artifact, not a tarball
  git -C "$ROOT" worktree add --detach "$work/src" "$commit" >/dev/null
  "$KILN" build --root "$work/src" --gpu-arch "$TAG" --kernels "$GROUP" \
    --output-dir "$work/artifacts" --clean -j "$JOBS"
  common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DKiln_DIR="$work/src/cmake"
          -DKILN_ARTIFACTS_DIR="$work/artifacts" -DKILN_DIST_DIR="$work/dist" -DKILN_TAG="$TAG")
  cmake -S "$work/src/bench" -B "$ROOT/.gpu/$name/build/bench" "${common[@]}" \
    -DKILN_BENCH_GROUPS="$GROUP" >/dev/null
  cmake --build "$ROOT/.gpu/$name/build/bench" -j "$JOBS" >/dev/null
  cmake -S "$work/src/tests/gpu" -B "$ROOT/.gpu/$name/build/gpu" "${common[@]}" \
    -DKILN_GPU_TEST_GROUPS="$GROUP" >/dev/null
  cmake --build "$ROOT/.gpu/$name/build/gpu" -j "$JOBS" >/dev/null
  echo "   .gpu/$name: $(cd "$ROOT/.gpu/$name/build" && ls bench/*.so gpu/*_test 2>/dev/null | tr '\n' ' ')"
done
