#!/usr/bin/env bash
# gpu_check.sh: the steps of one call on the GPU machine, over binaries built on a CPU machine
# (the GPU machine's time is the scarce resource: build here, carry, run many steps per call).
#
#   scripts/gpu_check.sh STEP...        results and logs under $OUT (default: ./gpu_out)
#
# Binaries are looked up under $KILN_GPU_DIR (default .gpu/, ignored by git; scripts/build_refs.sh
# fills .gpu/<name>/ for several git refs of one group):
#   $KILN_GPU_DIR/build/gpu/<group>_numerics_test   tests/gpu built against the artifact
#   $KILN_GPU_DIR/build/bench/libkiln_bench_<group>.so
# Every step's output is appended to $OUT/steps.log. Steps:
#   info                 GPU, driver, clocks, commit
#   wheels               pip-installs the carried .whl/*.whl into /tmp/site (PYTHONPATH) for the
#                        benches' optional peers (flash-linear-attention)
#   <group>-numerics     the group's numerics test (JSON: $OUT/<group>_numerics_<label>.json)
#   <group>-smoke        the first cases of the test only (a hang or a crash shows in seconds)
#   <group>-memcheck     compute-sanitizer memcheck over $KILN_MEMCHECK_FILTER of the test
#   <group>-racecheck    compute-sanitizer racecheck (shared memory) over the same filter
#   <group>-bench[-quick] python3 kernels/<group>/bench/<group>_vs_torch.py [--quick] $KILN_BENCH_ARGS
#                        (JSON: $OUT/<group>_bench_<label>.json)
#   probe-<which>        $KILN_GPU_DIR/memory_paths <which> (gdn, decodeattn, all, locality or
#                        timeline: the access-pattern probe, bench/probes/memory_paths.cu built with
#                        the nvcc line in its header;
#                        JSON lines: $OUT/memory_paths_<which>_<label>.json)
# <label> is the last component of $KILN_GPU_DIR, so one call can run two builds side by side.
# Each step runs under a timeout ($KILN_STEP_TIMEOUT seconds, default 240) so that a hung kernel
# costs one step, not the call; the exit codes are printed, the last lines summarise.
set -uo pipefail

OUT="${OUT:-$PWD/gpu_out}"
GPU_DIR="${KILN_GPU_DIR:-.gpu}"
label="$(basename "$GPU_DIR")"   # names the JSON files, so that versions can be compared in one call
STEP_TIMEOUT="${KILN_STEP_TIMEOUT:-240}"
FILTER="${KILN_MEMCHECK_FILTER:-*}"
mkdir -p "$OUT"
summary=()

run_step() {
  local name="$1"
  shift
  echo "== $name: $*"
  local log="$OUT/.$name.log"
  timeout --signal=KILL "$STEP_TIMEOUT" "$@" >"$log" 2>&1
  local rc=$?
  { echo "== $name: $*"; cat "$log"; echo "rc=$rc"; } >>"$OUT/steps.log"
  tail -n 25 "$log"
  echo "rc=$rc"
  summary+=("$name rc=$rc $(grep -E '[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)")
  rm -f "$log"
}

for step in "$@"; do
  group="${step%%-*}"
  test_bin="$GPU_DIR/build/gpu/${group}_numerics_test"
  bench_script="kernels/${group}/bench/${group}_vs_torch.py"
  lib="$GPU_DIR/build/bench/libkiln_bench_${group}.so"
  case "$step" in
    info)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$OUT/steps.log"
      git rev-parse HEAD 2>/dev/null | tee -a "$OUT/steps.log" || true
      ;;
    wheels)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
      ;;
    probe-*)
      which="${step#probe-}"
      run_step "$step" sh -c '"$1" "$2" > "$3"' probe "$GPU_DIR/memory_paths" "$which" \
        "$OUT/memory_paths_${which}_${label}.json" ;;
    *-smoke)
      run_step "$step" "$test_bin" --gtest_filter='*_s1_*:*_s129_*:*ragged_lengths*' ;;
    *-numerics)
      run_step "$step" env KILN_EVIDENCE_OUT="$OUT/${group}_numerics_${label}.json" "$test_bin" ;;
    *-memcheck)
      run_step "$step" compute-sanitizer --tool memcheck --error-exitcode 3 "$test_bin" \
        --gtest_filter="$FILTER" ;;
    *-racecheck)
      run_step "$step" compute-sanitizer --tool racecheck --racecheck-report hazard \
        --error-exitcode 3 "$test_bin" --gtest_filter="$FILTER" ;;
    *-bench-quick)
      run_step "$step" env PYTHONUNBUFFERED=1 python3 "$bench_script" --lib "$lib" \
        --json "$OUT/${group}_bench_${label}.json" --quick ${KILN_BENCH_ARGS:-} ;;
    *-bench)
      run_step "$step" env PYTHONUNBUFFERED=1 python3 "$bench_script" --lib "$lib" \
        --json "$OUT/${group}_bench_${label}.json" ${KILN_BENCH_ARGS:-} ;;
    *)
      echo "unknown step $step"; exit 2 ;;
  esac
done
echo "== summary"
printf '%s\n' "${summary[@]}"
