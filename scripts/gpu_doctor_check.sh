#!/usr/bin/env bash
# gpu_doctor_check.sh: an artifact's bin/kiln-doctor on a real GPU (issue 30), against a good
# artifact and a wrong-SM one of the rmsnorm group, each run's output and exit code kept.
#
#   scripts/gpu_doctor_check.sh prepare   on the CPU machine: builds both artifacts with
#                                         build/release/tools/kiln/kiln into $KILN_GPU_DIR/doctor/
#   scripts/gpu_doctor_check.sh run       on the GPU machine (an sm_90 GPU: H100 or H200): runs
#                                         both doctors; results under $OUT/doctor (default
#                                         ./gpu_out/doctor), a summary line per check, exit 0 when
#                                         every check holds
#
# The artifacts ($KILN_GPU_DIR defaults to .gpu, ignored by git; carry .gpu/doctor to the GPU):
#   doctor/good/x86_64/sm_90      rmsnorm for sm_90: every variant must load (kiln-doctor exit 0)
#   doctor/wrongsm/x86_64/sm_80   rmsnorm as sm_80 SASS only, which an sm_90 GPU cannot run: every
#                                 variant NOT runnable, "artifact has sm_80 only; device is sm_90"
#                                 (exit 1)
# They embed the runtime and kernels of the checkout they were built from: prepare again after a
# change to runtime/, kernels/rmsnorm/ or tools/kiln/.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPU_DIR="${KILN_GPU_DIR:-$ROOT/.gpu}"
DOCTOR_DIR="$GPU_DIR/doctor"
GOOD="$DOCTOR_DIR/good/x86_64/sm_90"
WRONG="$DOCTOR_DIR/wrongsm/x86_64/sm_80"

prepare() {
  local kiln="${KILN:-$ROOT/build/release/tools/kiln/kiln}"
  [ -x "$kiln" ] || { echo "no kiln at $kiln: build it first (cmake --build --preset release)" >&2; exit 2; }
  local jobs="${KILN_JOBS:-2}"
  "$kiln" build --gpu-arch sm_90 --arch x86_64 --kernels rmsnorm --root "$ROOT" \
    --output-dir "$DOCTOR_DIR/good" --clean -j "$jobs" || exit 1
  "$kiln" build --gpu-arch sm_80 --arch x86_64 --kernels rmsnorm --root "$ROOT" \
    --output-dir "$DOCTOR_DIR/wrongsm" --clean -j "$jobs" || exit 1
  "$kiln" verify "$GOOD" && "$kiln" verify "$WRONG" || exit 1
  git -C "$ROOT" rev-parse HEAD >"$DOCTOR_DIR/commit" 2>/dev/null || true
  echo "prepared $GOOD and $WRONG"
}

run() {
  local out="${OUT:-$PWD/gpu_out}/doctor"
  mkdir -p "$out"
  local failed=0
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv >"$out/gpu.txt" 2>&1 || true
  cat "$out/gpu.txt"
  [ -f "$DOCTOR_DIR/commit" ] && cp "$DOCTOR_DIR/commit" "$out/commit"

  # check NAME EXPECTED_RC MUST_CONTAIN BINARY [ARGS...]: output and rc into $out/NAME.{txt,rc}.
  check() {
    local name="$1" expected="$2" needle="$3"
    shift 3
    timeout --signal=KILL 120 "$@" >"$out/$name.txt" 2>&1
    local rc=$?
    echo "$rc" >"$out/$name.rc"
    echo "== $name: $* (rc=$rc)"
    cat "$out/$name.txt"
    if [ "$rc" -eq "$expected" ] && grep -qF -- "$needle" "$out/$name.txt"; then
      echo "PASS $name: rc=$rc, has '$needle'" | tee -a "$out/summary.txt"
    else
      echo "FAIL $name: rc=$rc (expected $expected), '$needle' $(grep -qF -- "$needle" "$out/$name.txt" && echo found || echo missing)" |
        tee -a "$out/summary.txt"
      failed=1
    fi
  }
  : >"$out/summary.txt"
  check good 0 "variants runnable" "$GOOD/bin/kiln-doctor"
  check good_device0 0 "device 0:" "$GOOD/bin/kiln-doctor" --device 0
  check wrongsm 1 "artifact has sm_80 only; device is sm_90" "$WRONG/bin/kiln-doctor"
  check bad_device 2 "is out of range" "$GOOD/bin/kiln-doctor" --device 99
  echo "== summary"
  cat "$out/summary.txt"
  return "$failed"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
