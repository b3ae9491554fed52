#!/usr/bin/env bash
# Measure this machine's NVIDIA GPU with `gpusim measure` and write measurements/<gpu>-<date>.toml.
#
#   bash scripts/measure-on-gpu.sh                    # the quick suite (a few minutes on an H100/H200)
#   bash scripts/measure-on-gpu.sh --suite full       # any `gpusim measure` arguments
#   bash scripts/measure-on-gpu.sh --only gemm,chase -o measurements/mine.toml
#
# Needs only an NVIDIA driver (R580 or newer for the CUDA 13 libraries). Everything else is set up
# here: a Rust toolchain through rustup if cargo is missing, gpusim built with `--features cuda`,
# and the CUDA 13 runtime libraries the harness opens at run time (NVRTC, cuBLAS) from their PyPI
# wheels, installed into a cache folder and put on LD_LIBRARY_PATH. No CUDA toolkit is needed.
#
# Environment:
#   GPUSIM_BIN        an already-built gpusim (built with --features cuda): skips the build, so no
#                     Rust toolchain is needed (for machines without internet access).
#   GPUSIM_CUDA_LIBS  a folder (searched recursively) that already holds libnvrtc.so.13 and
#                     libcublas.so.13 (with libcublasLt.so.13 beside it, as the wheel and the toolkit
#                     ship them; the fp8 GEMMs need it): no wheel is downloaded when both are found there. Default:
#                     $GPUSIM_WHEEL_CACHE, else ~/.cache/gpusim-wheels (where scripts/test.sh puts
#                     NVRTC too). Also searched: /usr/local/cuda*/lib64 and Python's site-packages
#                     (a PyTorch install brings both libraries as nvidia-* wheels).
#   NVRTC_VERSION, CUBLAS_VERSION   the wheel versions installed when the libraries are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

NVRTC_VERSION="${NVRTC_VERSION:-13.5.37}"
CUBLAS_VERSION="${CUBLAS_VERSION:-13.10.0.20}"
LIBS="${GPUSIM_CUDA_LIBS:-${GPUSIM_WHEEL_CACHE:-$HOME/.cache/gpusim-wheels}}"

die() { echo "measure-on-gpu.sh: $*" >&2; exit 2; }

# 1. The driver.
if [ ! -e /dev/nvidiactl ] && ! command -v nvidia-smi >/dev/null 2>&1; then
  die "no NVIDIA driver on this machine (no /dev/nvidiactl, no nvidia-smi)"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,clocks.max.mem --format=csv || true
fi

# 2. The CUDA 13 libraries: found, or installed from PyPI.
find_lib() { # find_lib NAME DIR... -> the folder holding NAME, first match
  local name="$1"; shift
  local d
  for d in "$@"; do
    [ -d "$d" ] || continue
    local hit
    hit="$(find "$d" -name "$name" \( -type f -o -type l \) 2>/dev/null | sort | head -n 1)"
    if [ -n "$hit" ]; then dirname "$hit"; return 0; fi
  done
  return 1
}
site_dirs() {
  command -v python3 >/dev/null 2>&1 || return 0
  python3 - <<'EOF' 2>/dev/null || true
import site, sys
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]
print("\n".join(d + "/nvidia" for d in dirs))
EOF
}
mapfile -t SEARCH < <(echo "$LIBS"; ls -d /usr/local/cuda*/lib64 2>/dev/null || true; site_dirs)

install_wheel() { # install_wheel PACKAGE VERSION SUBDIR
  local pkg="$1" version="$2" dir="$LIBS/$3"
  local stamp="$dir/.installed-$version"
  if [ ! -e "$stamp" ]; then
    command -v python3 >/dev/null 2>&1 || die "python3 with pip is needed to install $pkg (or set GPUSIM_CUDA_LIBS)"
    echo "== installing $pkg==$version into $dir"
    rm -rf "$dir"
    mkdir -p "$LIBS"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
      --no-warn-script-location --target "$dir" "$pkg==$version" \
      || die "could not install $pkg==$version from PyPI (no network?): set GPUSIM_CUDA_LIBS to a folder that holds it"
    touch "$stamp"
  fi
}

NVRTC_DIR="$(find_lib libnvrtc.so.13 "${SEARCH[@]}" || true)"
if [ -z "$NVRTC_DIR" ]; then
  install_wheel nvidia-cuda-nvrtc "$NVRTC_VERSION" nvrtc
  NVRTC_DIR="$(find_lib libnvrtc.so.13 "$LIBS/nvrtc")" || die "the nvidia-cuda-nvrtc wheel holds no libnvrtc.so.13"
fi
CUBLAS_DIR="$(find_lib libcublas.so.13 "${SEARCH[@]}" || true)"
if [ -z "$CUBLAS_DIR" ]; then
  install_wheel nvidia-cublas "$CUBLAS_VERSION" cublas
  CUBLAS_DIR="$(find_lib libcublas.so.13 "$LIBS/cublas")" || die "the nvidia-cublas wheel holds no libcublas.so.13"
fi
echo "== NVRTC from $NVRTC_DIR, cuBLAS from $CUBLAS_DIR"
export LD_LIBRARY_PATH="$NVRTC_DIR:$CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# 3. The binary.
if [ -n "${GPUSIM_BIN:-}" ]; then
  [ -x "$GPUSIM_BIN" ] || die "GPUSIM_BIN=$GPUSIM_BIN is not an executable"
  BIN="$GPUSIM_BIN"
else
  if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || {
      echo "== installing Rust (rustup, minimal profile)"
      command -v curl >/dev/null 2>&1 || die "cargo is missing and curl is needed to install rustup"
      curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    }
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  echo "== cargo build --release --features cuda"
  cargo build --release --features cuda -p gpusim
  BIN="${CARGO_TARGET_DIR:-target}/release/gpusim"
fi

# 4. Measure (the quick suite unless the arguments choose).
ARGS=("$@")
case " ${ARGS[*]-} " in
  *" --suite "*|*" --suite="*) ;;
  *) ARGS=(--suite quick "${ARGS[@]}") ;;
esac
echo "== $BIN measure ${ARGS[*]}"
exec "$BIN" measure "${ARGS[@]}"
