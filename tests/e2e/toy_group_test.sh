#!/usr/bin/env bash
# toy_group_test.sh KILN SOURCE_ROOT WORK: a group is one folder. Copies the checkout (what a
# build reads: CMake, runtime, kernels, tests, tools) to WORK/src, adds the toy group
# (fixtures/toygroup/toy) as kernels/toy/ with no edit anywhere else, and checks that every part
# of kiln that works per group picks it up from the folder alone:
#   1. kiln's own CMake: the toy selector library and its CPU test (built and run);
#   2. `kiln build --kernels toy`: the artifact, its library compiling the toy runner against the
#      generated table in the runner's own types;
#   3. the GPU test project (tests/gpu): toy_numerics_test is built against that artifact;
#   4. the bench project (bench): libkiln_bench_toy.so is built against it.
set -euo pipefail
KILN="$1"
ROOT="$2"
WORK="$3"
rm -rf "$WORK"
mkdir -p "$WORK/src"
for path in CMakeLists.txt CMakePresets.json cmake runtime kernels tests tools bench examples; do
  cp -r "$ROOT/$path" "$WORK/src/"
done
rm -rf "$WORK/src/kernels/toy"
cp -r "$ROOT/tests/e2e/fixtures/toygroup/toy" "$WORK/src/kernels/toy"
# The copy must differ from the checkout by the toy folder only.
diff -r -q -x toy "$ROOT/kernels" "$WORK/src/kernels"

step() { printf '== %s\n' "$*"; }
step "kiln's CMake finds the toy selector and its test"
cmake -S "$WORK/src" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$WORK/configure.log"
cmake --build "$WORK/build" --target toy_selector_test >"$WORK/build.log"
"$WORK/build/kernels/toy_selector_test"

step "kiln build --kernels toy"
"$KILN" build --root "$WORK/src" --gpu-arch sm_90 --kernels toy --clean -j 2 \
  --output-dir "$WORK/artifacts"
grep -q '"toy_fp16_plain"' "$WORK/artifacts/x86_64/sm_90/metadata.json"

common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DKiln_DIR="$WORK/src/cmake"
        -DKILN_ARTIFACTS_DIR="$WORK/artifacts" -DKILN_DIST_DIR="$WORK/dist" -DKILN_TAG=sm_90
        -DKILN_VERIFY_EXECUTABLE="$(dirname "$KILN")/../kiln-verify/kiln-verify")
step "tests/gpu builds toy_numerics_test"
cmake -S "$WORK/src/tests/gpu" -B "$WORK/gpu" "${common[@]}" >"$WORK/gpu.log"
cmake --build "$WORK/gpu" --target toy_numerics_test >>"$WORK/gpu.log"
test -x "$WORK/gpu/toy_numerics_test"

step "bench builds libkiln_bench_toy.so"
cmake -S "$WORK/src/bench" -B "$WORK/bench" "${common[@]}" >"$WORK/bench.log"
cmake --build "$WORK/bench" --target kiln_bench_toy >>"$WORK/bench.log"
nm -D --defined-only "$WORK/bench/libkiln_bench_toy.so" | grep -q ' kiln_bench_toy$'
step "the toy group was picked up everywhere"
