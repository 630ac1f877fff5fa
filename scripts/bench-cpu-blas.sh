#!/usr/bin/env bash
# The optimised BLAS for the PyTorch peers of the CPU benchmarks (sourced by bench-cpu-cnn.sh and
# bench-cpu-mlp.sh; also runs on its own). Debian's python3-torch calls the generic libblas.so.3,
# which is the reference BLAS (20x slower on a 512x2048x2048 matmul) unless an optimised one is
# installed: this installs libopenblas0-pthread when it is missing (apt-get, as root) and then
# checks that torch really maps OpenBLAS and runs the matmul at its speed
# (bench/peers/cpu_blas.py --require-optimised). It stops with a one-line reason otherwise.
#
#   scripts/bench-cpu-blas.sh [PYTHON]        # check (and install) for PYTHON (/usr/bin/python3)
#
# Settings (environment): BLAS_INSTALL=0 never installs (only checks).

# ensure_optimised_blas PYTHON SCRIPT_NAME
ensure_optimised_blas() {
  local python=$1 name=$2
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if command -v dpkg-query >/dev/null &&
    ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q "ok installed"; then
    if [[ "${BLAS_INSTALL:-1}" == 0 ]]; then
      echo "$name: libopenblas0-pthread is not installed (BLAS_INSTALL=0: not installing)" >&2
    elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
      echo "$name: installing libopenblas0-pthread (the PyTorch peer's BLAS)" >&2
      if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q libopenblas0-pthread >&2; then
        echo "$name: 'apt-get install libopenblas0-pthread' failed; install it by hand" >&2
        return 1
      fi
    else
      echo "$name: libopenblas0-pthread is missing and this is not root with apt-get: run" \
        "'sudo apt-get install libopenblas0-pthread' (or set SKIP_TORCH=1)" >&2
      return 1
    fi
  fi
  if ! "$python" "$root/bench/peers/cpu_blas.py" --require-optimised >/dev/null; then
    echo "$name: torch under $python does not run on OpenBLAS; check" \
      "'update-alternatives --display libblas.so.3-x86_64-linux-gnu'" >&2
    return 1
  fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  python=${1:-/usr/bin/python3}
  ensure_optimised_blas "$python" bench-cpu-blas
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  "$python" "$root/bench/peers/cpu_blas.py"
fi
