#!/usr/bin/env bash
# test.sh: the README's second command, and what CI runs (.ci/run). Installs what is missing,
# builds kiln and its tests (release preset), runs every CPU test through ctest (GPU-labelled
# tests excluded), then builds the host unit tests with ASan + UBSan (asan preset) and runs them.
#
#   KILN_JOBS (all cores) sets build parallelism; tests run 2 at a time, as on a 2-core CI box.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JOBS="${KILN_JOBS:-$(nproc)}"
cd "$ROOT"

step() { printf '\n== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

step "setup"
scripts/setup.sh

step "release: configure and build"
cmake --preset release
cmake --build --preset release -j "$JOBS"

# The e2e tests include a real `kiln build` of the rmsnorm group (shared by a fixture test).
step "release: ctest -LE gpu"
ctest --preset release -LE gpu -j 2

step "asan: configure and build"
cmake --preset asan -DKILN_BUILD_TOOLS=ON
cmake --build --preset asan -j "$JOBS"

step "asan: ctest -L 'unit|runtime|runners'"
ctest --preset asan -L 'unit|runtime|runners' -j 2

step "all tests passed"
