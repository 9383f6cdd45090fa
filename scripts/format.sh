#!/usr/bin/env bash
# format.sh: clang-format (.clang-format: Google style, 100 columns) over every C++ and CUDA file
# git tracks. `scripts/format.sh` rewrites them in place; `scripts/format.sh --check` changes
# nothing and fails, listing each file and line that differs, when any would change (test.sh, so
# CI, runs the check). Pinned to Debian 12's clang-format 14: other versions format differently.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
command -v clang-format >/dev/null || { echo "format.sh: no clang-format (scripts/setup.sh)" >&2; exit 1; }
version="$(clang-format --version)"
case "$version" in
  *" 14."*) ;;
  *) echo "format.sh: clang-format 14 expected (Debian 12), found: $version" >&2; exit 1 ;;
esac

mapfile -t files < <(git ls-files '*.cpp' '*.cc' '*.h' '*.hpp' '*.cu' '*.cuh')
case "${1:-}" in
  --check)
    if ! clang-format --dry-run --Werror "${files[@]}"; then
      echo "format.sh: the files above are not clang-formatted; run scripts/format.sh" >&2
      exit 1
    fi
    echo "format.sh: ${#files[@]} files clang-formatted"
    ;;
  "") clang-format -i "${files[@]}" ;;
  *) sed -n '2,5p' "$0" >&2; exit 2 ;;
esac
