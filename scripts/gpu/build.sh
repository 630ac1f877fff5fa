#!/usr/bin/env bash
# Run THERE (the GPU machine, no network): unpacks the packages that scripts/gpu/fetch-deps.sh
# fetched into a private prefix (.gpu-deps/root; nothing is installed system-wide) and builds
# mixprec with the CUDA backend against it into build-gpu/. Prints the environment to run with.
#
#   scripts/gpu/build.sh                       # configure + build everything (tests included)
#   TARGETS=mixprec_cli scripts/gpu/build.sh   # only the CLI (benchmark calls need no tests)
#   BUILD=build-gpu CUDA_ARCHS=90 scripts/gpu/build.sh
#   source .gpu-deps/env.sh && ctest --test-dir build-gpu -L gpu   # env.sh sets MIXPREC_REQUIRE_GPU=1
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
debs=${DEBS:-$root/.gpu-deps/debs}
prefix=${PREFIX:-$root/.gpu-deps/root}
build=${BUILD:-$root/build-gpu}
archs=${CUDA_ARCHS:-90}

ls "$debs"/*.deb >/dev/null 2>&1 || {
  echo "gpu/build: no .deb files in $debs; run scripts/gpu/fetch-deps.sh on a machine with network and carry .gpu-deps" >&2
  exit 1
}

# A .deb is an ar archive holding data.tar.*; unpack with dpkg-deb, else ar + tar, else Python.
unpack() {
  local deb=$1
  if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$deb" "$prefix"; return; fi
  local tmp
  tmp=$(mktemp -d)
  if command -v ar >/dev/null; then
    (cd "$tmp" && ar x "$deb")
  else
    python3 - "$deb" "$tmp" <<'PY'
import sys, os
deb, out = sys.argv[1], sys.argv[2]
with open(deb, "rb") as f:
    assert f.read(8) == b"!<arch>\n", deb + ": not an ar archive"
    while True:
        header = f.read(60)
        if len(header) < 60:
            break
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        data = f.read(size)
        if size % 2:
            f.read(1)
        with open(os.path.join(out, name), "wb") as o:
            o.write(data)
PY
  fi
  tar -xf "$tmp"/data.tar.* -C "$prefix"
  rm -rf "$tmp"
}

mkdir -p "$prefix"
for deb in "$debs"/*.deb; do unpack "$deb"; done
libdir=$prefix/usr/lib/x86_64-linux-gnu
cat >"$root/.gpu-deps/env.sh" <<ENV
export LD_LIBRARY_PATH=$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export MIXPREC_FASHION_MNIST_DIR=$prefix/usr/share/datasets/fashion-mnist
# This machine is meant to have a GPU: a GPU test that finds none fails instead of skipping.
export MIXPREC_REQUIRE_GPU=1
ENV
# shellcheck disable=SC1091
source "$root/.gpu-deps/env.sh"

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu \
  -DMIXPREC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" -DMIXPREC_BUILD_BENCH=ON
targets=()
if [[ -n "${TARGETS:-}" ]]; then
  read -r -a names <<<"$TARGETS"
  targets=(--target "${names[@]}")
fi
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
echo "gpu/build: built $build; run with: source .gpu-deps/env.sh"
