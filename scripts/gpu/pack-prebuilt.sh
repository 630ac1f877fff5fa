#!/usr/bin/env bash
# Run HERE (the build machine, Debian 12 with CUDA): packs binaries built here with the CUDA backend
# (build/, CMAKE_CUDA_ARCHITECTURES including 90) into .gpu-carry/ (git-ignored) for a GPU machine
# that has the CUDA libraries (cudart, cuBLAS(Lt), cuDNN, NCCL) but none of mixprec's other
# dependencies: the stripped binaries, every shared library they load that is neither the C/C++
# runtime nor a CUDA library, and (WITH_DATA=1) Fashion-MNIST. Carry .gpu-carry to the machine and
# run scripts/gpu/acceptance.sh there; building there (scripts/gpu/build.sh) is the alternative
# that costs the GPU machine's time.
#
#   scripts/gpu/pack-prebuilt.sh                 # build/ -> .gpu-carry/prebuilt.tar.xz
#   WITH_DATA=1 BUILD=build scripts/gpu/pack-prebuilt.sh
#   BUILD=/work/wt/x/build NAME=prebuilt-x scripts/gpu/pack-prebuilt.sh   # a second build, for an
#                                   # A/B in one device call (acceptance.sh's TAR=prebuilt-x.tar.xz)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD:-$root/build}
dest=${DEST:-$root/.gpu-carry}
binaries=("$build/tools/mixprec/mixprec" "$build/tests/mixprec_gpu_tests")
# Optional: the attention benchmark (acceptance.sh's attention stage), when the build has it.
[[ -x "$build/bench/attention_bench" ]] && binaries+=("$build/bench/attention_bench")
[[ -x "$build/bench/graph_step_bench" ]] && binaries+=("$build/bench/graph_step_bench")

grep -q '^CMAKE_CUDA_ARCHITECTURES:STRING=.*90' "$build/CMakeCache.txt" || {
  echo "pack-prebuilt: $build was not configured with CUDA architecture 90" >&2
  exit 1
}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$dest"
for b in "${binaries[@]}"; do
  [[ -x "$b" ]] || { echo "pack-prebuilt: $b is missing; build it first" >&2; exit 1; }
  strip -o "$stage/bin/$(basename "$b")" "$b"
done
# Libraries: what ldd resolves, less the C/C++ runtime (the GPU machine's is newer) and CUDA's.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcudnn|libnccl)'
for b in "${binaries[@]}"; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$stage/lib/$name"
done
git -C "$build/.." rev-parse --short HEAD >"$stage/commit" 2>/dev/null || git -C "$root" rev-parse --short HEAD >"$stage/commit"
tar -C "$stage" -cJf "$dest/${NAME:-prebuilt}.tar.xz" bin lib commit
if [[ "${WITH_DATA:-0}" == 1 ]]; then
  mkdir -p "$dest/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/*.gz "$dest/fashion-mnist/"
fi
echo "pack-prebuilt: $(ls "$stage/lib" | tr '\n' ' ')"
du -sh "$dest"/*
