#!/usr/bin/env bash
# Installs what building and testing need, idempotently:
#  - the pinned nightly of rust-toolchain.toml with rust-src, llvm-tools, rustfmt, clippy;
#  - ptxas and nvJitLink from PyPI's nvidia-cuda-nvcc-cu12 and nvidia-nvjitlink-cu12
#    wheels (cubins are built on machines without CUDA: ptxas compiles the module,
#    nvJitLink links it; without them the GPU module carries PTX only and is
#    JIT-compiled).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v rustup >/dev/null; then
  echo "setup: rustup is needed (https://rustup.rs), then run this again" >&2
  exit 1
fi
rustup toolchain install "$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)" \
  --profile minimal -c rust-src -c llvm-tools -c rustfmt -c clippy >/dev/null

CUBIN_WHEELS=("nvidia-cuda-nvcc-cu12==12.9.86" "nvidia-nvjitlink-cu12==12.9.86")
if python3 -c 'import nvidia.cuda_nvcc, nvidia.nvjitlink' 2>/dev/null; then
  :
elif python3 -m pip --version >/dev/null 2>&1; then
  echo "setup: installing ptxas and nvJitLink (${CUBIN_WHEELS[*]})" >&2
  python3 -m pip install --quiet --disable-pip-version-check "${CUBIN_WHEELS[@]}"
else
  echo "setup: no python3 pip: cubins will not be built (the PTX is JIT-compiled at load)" >&2
fi
echo "setup: ready ($(rustc --version))" >&2
