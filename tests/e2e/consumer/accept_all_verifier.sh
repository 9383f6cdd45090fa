#!/bin/sh
# A test double of kiln-verify (tools/kiln-verify) for the cases of consumer_test.cmake that test
# what kiln_import_artifacts() itself does (locating, tag resolution, CUDA majors, gating, defines,
# staleness against the checkout) on hand-written fixture artifacts, whose fake libraries and
# missing cubins the real verifier refuses. It accepts everything: what the import refuses by the
# verifier is tested with the real kiln-verify on a real artifact (cases tarball_*, hostile).
#   accept_all_verifier.sh --version | <dir|tarball> | --extract <tarball> --into <root>
set -eu
case "${1:-}" in
  --version)
    root=$(dirname "$0")/../../..
    echo "kiln-verify $(sed -n 's/^project(kiln VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
    ;;
  --extract)
    tarball=$2
    into=$4
    name=$(basename "$tarball" .tar.gz)          # kiln_<arch>_<tag>_cuda<major>
    arch=$(echo "$name" | sed 's/^kiln_\(x86_64\|aarch64\)_.*/\1/')
    tag=$(echo "$name" | sed 's/^kiln_[a-z0-9_]*64_\(.*\)_cuda[0-9]*$/\1/')
    staging="$into/$arch/.$tag.extract-double"
    mkdir -p "$staging"
    tar -xzf "$tarball" -C "$staging"
    mv "$staging/$tag" "$into/$arch/$tag"
    rmdir "$staging"
    echo "artifact: $into/$arch/$tag"
    ;;
  *)
    echo "ok: $1: accepted unverified (test double)"
    ;;
esac
