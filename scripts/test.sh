#!/usr/bin/env bash
# The test command of the README: installs what the tests need that cargo does not (the CUDA
# wheels for the CUDA-twin test), then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# CUDA wheels for the CUDA-twin instruction-mix test (workloads/tests/cuda_twins.rs): NVRTC and
# nvdisasm from PyPI, no toolkit and no GPU needed. Installed once into a cache folder (about 150 MB;
# a few seconds to download and unpack when the folder is empty, nothing afterwards). Pinned for
# reproducible SASS; workloads/cuda/sass/*.sass were produced with these versions.
CUDA_WHEELS_VERSION=13.5.37
export GPUSIM_WHEEL_CACHE="${GPUSIM_WHEEL_CACHE:-$HOME/.cache/gpusim-wheels}"
echo "== CUDA wheels ${CUDA_WHEELS_VERSION} in ${GPUSIM_WHEEL_CACHE}"
for pkg in nvrtc nvdisasm; do
  dir="${GPUSIM_WHEEL_CACHE}/${pkg}"
  stamp="${dir}/.installed-${CUDA_WHEELS_VERSION}"
  if [ ! -e "${stamp}" ]; then
    # A half-finished or older install is removed first: pip --target skips existing folders.
    rm -rf "${dir}"
    mkdir -p "${GPUSIM_WHEEL_CACHE}"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
      --no-warn-script-location --target "${dir}" "nvidia-cuda-${pkg}==${CUDA_WHEELS_VERSION}"
    touch "${stamp}"
  fi
done

echo "== cargo test --workspace"
cargo test --workspace "$@"
