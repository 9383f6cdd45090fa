#!/usr/bin/env bash
# setup.sh: installs what kiln needs and is missing, and nothing else. Safe to run again.
#
#   Debian packages: only the missing ones, through apt-get (as root, or through sudo).
#   Python: .venv/ at the repository root with the pinned nvidia-cutlass (its CUTLASS/CuTe C++
#           headers, site-packages/cutlass_library/source/include, are what kernels include);
#           skipped when the pinned version is already there; and the pinned nvidia-cutlass-dsl[cu13]
#           that `kiln build` runs CuTe DSL kernel scripts with; the pinned matplotlib that draws
#           docs/performance.md. Nothing at run time needs Python.
#   CUDA:   checked, not installed (CUDA 13.0 is not a Debian package): nvcc at
#           $CUDA_HOME/bin/nvcc or /usr/local/cuda/bin/nvcc.
#   CUDA 12: the pinned nvidia-cuda-nvcc-cu12 (its ptxas) in .cuda12/ (pip --target, beside the
#           system CUDA 13), for `kiln build --cuda-version 12` (docs/cli.md, "CUDA versions").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CUTLASS_VERSION="4.2.0.0"   # nvidia-cutlass on PyPI; headers only (--no-deps)
# nvidia-cutlass-dsl for kind = "cute_dsl" groups (build time only; docs/cute-dsl.md), with its
# CUDA 13 libraries (extra "cu13"). Must equal kCuteDslVersion in tools/kiln/core/cute_dsl_frontend.h
# (tests/unit/cute_dsl_frontend_test.cpp checks that).
CUTE_DSL_VERSION="4.8.1"
# The CUDA 12 ptxas for `kiln build --cuda-version 12` (JetPack 6 drivers are CUDA 12.6); must
# equal kCuda12NvccWheelVersion in tools/kiln/core/toolchain.h (a unit test checks).
CUDA12_NVCC_VERSION="12.6.85"
# matplotlib (and the Pillow that writes its PNGs) for scripts/charts.py, which draws
# docs/performance.md from the evidence; must equal MATPLOTLIB_VERSION in scripts/charts.py.
MATPLOTLIB_VERSION="3.11.2"
PILLOW_VERSION="13.0.0"
PACKAGES=(
  cmake ninja-build g++ pkg-config
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libfmt-dev libssl-dev libarchive-dev
  libgtest-dev libbenchmark-dev
  g++-aarch64-linux-gnu        # kiln build --arch aarch64
  clang-format                 # scripts/format.sh --check (Debian 12: clang-format 14)
  clang libclang-rt-14-dev     # tests/fuzz/run.sh: libFuzzer + ASan/UBSan runtimes (Debian 12: clang 14)
  ccache                       # scripts/test.sh: KILN_COMPILER_LAUNCHER, CMake's compiler launcher
  python3 python3-venv
)

log() { printf 'setup: %s\n' "$*"; }

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

install_debian_packages() {
  local missing=()
  for pkg in "${PACKAGES[@]}"; do
    installed "$pkg" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "Debian packages: all present"
    return
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      log "missing Debian packages (${missing[*]}) and not root, no sudo: install them and re-run"
      exit 1
    fi
    sudo=(sudo)
  fi
  log "installing: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

check_cuda() {
  local nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
  if [ ! -x "$nvcc" ]; then
    log "nvcc not found at $nvcc: install the CUDA 13.0 toolkit (or set CUDA_HOME)"
    exit 1
  fi
  log "CUDA: $("$nvcc" --version | grep -o 'release [0-9.]*')"
}

setup_venv() {
  local venv="$ROOT/.venv"
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv"
    python3 -m venv "$venv"
  fi
  local have
  have="$("$venv/bin/python" -c \
    'import importlib.metadata as m; print(m.version("nvidia-cutlass"))' 2>/dev/null || true)"
  if [ "$have" = "$CUTLASS_VERSION" ]; then
    log "nvidia-cutlass $CUTLASS_VERSION: present"
  else
    log "pip install nvidia-cutlass==$CUTLASS_VERSION (was: ${have:-absent})"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      "nvidia-cutlass==$CUTLASS_VERSION"
  fi
  have="$("$venv/bin/python" -c 'import importlib.metadata as m
print(m.version("matplotlib"), m.version("pillow"))' 2>/dev/null || true)"
  if [ "$have" = "$MATPLOTLIB_VERSION $PILLOW_VERSION" ]; then
    log "matplotlib $MATPLOTLIB_VERSION, pillow $PILLOW_VERSION: present"
  else
    log "pip install matplotlib==$MATPLOTLIB_VERSION pillow==$PILLOW_VERSION (was: ${have:-absent})"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "matplotlib==$MATPLOTLIB_VERSION" "pillow==$PILLOW_VERSION"
  fi
  # The DSL and its CUDA 13 libraries must both be at the pin (kiln checks both before a build).
  have="$("$venv/bin/python" -c 'import importlib.metadata as m
print(m.version("nvidia-cutlass-dsl"), m.version("nvidia-cutlass-dsl-libs-cu13"))' 2>/dev/null || true)"
  if [ "$have" = "$CUTE_DSL_VERSION $CUTE_DSL_VERSION" ]; then
    log "nvidia-cutlass-dsl[cu13] $CUTE_DSL_VERSION: present"
    return
  fi
  log "pip install nvidia-cutlass-dsl[cu13]==$CUTE_DSL_VERSION (was: ${have:-absent})"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "nvidia-cutlass-dsl[cu13]==$CUTE_DSL_VERSION"
}

# pip --target into .cuda12/: a folder of its own, not the venv (the wheel holds a toolkit's
# files, bin/ptxas among them, not a Python package anyone imports).
setup_cuda12() {
  local dir="$ROOT/.cuda12"
  if [ -d "$dir/nvidia_cuda_nvcc_cu12-$CUDA12_NVCC_VERSION.dist-info" ] &&
    [ -x "$dir/nvidia/cuda_nvcc/bin/ptxas" ]; then
    log "nvidia-cuda-nvcc-cu12 $CUDA12_NVCC_VERSION (.cuda12): present"
    return
  fi
  log "pip install --target .cuda12 nvidia-cuda-nvcc-cu12==$CUDA12_NVCC_VERSION"
  rm -rf "$dir"
  "$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$dir" "nvidia-cuda-nvcc-cu12==$CUDA12_NVCC_VERSION"
}

install_debian_packages
check_cuda
setup_venv
setup_cuda12
log "done"
