#!/usr/bin/env bash
# Installs the Debian packages mixprec needs (DESIGN.md §6). Idempotent: installs only what is
# missing, and does nothing (no apt-get update, no root needed) when everything is present.
#
# Usage: scripts/install-deps.sh [--fuzz]
#   --fuzz  also clang and its libFuzzer/sanitizer runtimes, for the fuzz build of tests/fuzz/
#           (tests/fuzz/README.md; not needed by `make test`, which replays the committed corpora
#           with the normal compiler)
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  ccache               # compiler cache: the CI consumer stage recompiles nothing make test compiled
  libdnnl-dev          # oneDNN: CPU matmul/convolution
  zlib1g-dev           # gzip-compressed IDX files
  nlohmann-json3-dev   # metrics and model JSON
  libcli11-dev         # the mixprec command line
  libgtest-dev libgmock-dev
  libbenchmark-dev
  python3              # tests/tools/read_tfevents.py (standard library only)
  python3-dev python3-pybind11 python3-numpy libdlpack-dev  # the Python module (python/)
  python3-pytest       # its tests (tests/python)
  dataset-fashion-mnist
  fortunes             # English text (/usr/share/games/fortunes, ~2.5 MB): the language-model corpus
  libopenmpi-dev openmpi-bin  # mixprec::distributed (MPI data parallelism) and its mpirun tests
  dpkg-dev file        # cpack -G DEB (scripts/build-debs.sh): dpkg-shlibdeps, and file to find the ELF files
)

if [[ ${1:-} == --fuzz ]]; then
  # Debian 12's clang is clang 14; libFuzzer and the sanitizer runtimes are in libclang-rt-14-dev.
  packages+=(clang libclang-rt-14-dev)
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/install-deps.sh [--fuzz]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
