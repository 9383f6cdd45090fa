#!/usr/bin/env bash
# Builds kiln's libFuzzer targets with clang and runs each for a bounded time on its committed
# seed corpus (tests/fuzz/corpus/<target>/), for CI (issue 3, part 6). Exits non-zero when a
# build fails or a fuzzer finds a crash, leak or sanitizer report; the reproducer is left in
# $OUT_DIR/<target>/ (crash-*, leak-*, timeout-*) and named in libFuzzer's output.
#
#   tests/fuzz/run.sh [seconds per target, default 30]
#   env: CC/CXX (default clang/clang++), BUILD_DIR (default build/fuzz), OUT_DIR (default
#        $BUILD_DIR/findings), FUZZ_TARGETS (default: all five), RSS_LIMIT_MB (default 2048),
#        MALLOC_LIMIT_MB (default 48)
#
# Memory is bounded so that a decompression bomb or any unbounded allocation is a finding, not
# a slow pass: -rss_limit_mb for the process, -malloc_limit_mb for one allocation. kiln's own
# bounds (docs/packaging.md, "Threats and limits") keep every allocation of a fuzz-sized input
# under 16 MiB, so 48 MiB flags one that escaped them: the seed bomb_64mib_zeros.tar.gz once made
# a 64 MiB string. tests/fuzz/dict/<name>.dict, when present, is the target's dictionary (deep
# JSON nesting, huge tar sizes); the seeds in corpus/ include the deep-JSON and bomb inputs of
# issue 32, each now refused at once.
#
# New inputs the fuzzers find go to $OUT_DIR/<target>/corpus, never into the committed corpus;
# add one there by hand when it covers something the seeds do not.
set -euo pipefail

seconds="${1:-30}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$root/build/fuzz}"
out="${OUT_DIR:-$build/findings}"
targets="${FUZZ_TARGETS:-fuzz_metadata fuzz_registry fuzz_tarball fuzz_library fuzz_elf}"
export CC="${CC:-clang}" CXX="${CXX:-clang++}"

cmake -S "$root/tests/fuzz" -B "$build" -G Ninja -DKILN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build"

status=0
for target in $targets; do
  corpus="$root/tests/fuzz/corpus/${target#fuzz_}"
  dict="$root/tests/fuzz/dict/${target#fuzz_}.dict"
  work="$out/$target"
  mkdir -p "$work/corpus"
  extra=()
  [[ -f "$dict" ]] && extra+=("-dict=$dict")
  echo "== $target: ${seconds}s on $corpus${extra[*]:+ with $dict}"
  # -timeout flags any single input taking > 10 s; the memory limits are described above.
  if ! (cd "$work" && "$build/$target" -max_total_time="$seconds" -timeout=10 \
          -rss_limit_mb="${RSS_LIMIT_MB:-2048}" -malloc_limit_mb="${MALLOC_LIMIT_MB:-48}" \
          "${extra[@]}" -print_final_stats=1 "$work/corpus" "$corpus" 2>&1 | tail -n 25); then
    echo "== $target: FAILED (reproducer in $work)"
    status=1
  fi
done
exit "$status"
