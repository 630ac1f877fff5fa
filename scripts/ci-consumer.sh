#!/usr/bin/env bash
# CI stage: mixprec used from another project (issue 12). For the static and then the shared
# library: configure and build the library alone (no tests, benchmarks, examples or CLI), install
# it into a temporary prefix, delete the build tree, then build examples/consumer with
# find_package(mixprec 0.2) and with pkg-config, and run both (one epoch of seed 001's model).
# The shared consumers must run with only the installed libmixprec.so.
#
# The library is configured as `make test` configures build/ (MIXPREC_CUDA=AUTO: with the CUDA
# backend where nvcc is found), and its objects are position-independent in both variants, so
# after `make test` every object comes from ccache: the stage costs links, installs and the
# consumers. MIXPREC_CUDA (default AUTO) and JOBS (default nproc) may be set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${JOBS:-$(nproc)}
cuda=${MIXPREC_CUDA:-AUTO}
work=$(mktemp -d /tmp/mixprec-consumer.XXXXXX)
build_dirs=()
cleanup() { rm -rf "$work" "${build_dirs[@]}"; }
trap cleanup EXIT
stage_start=$(date +%s)
say() { echo "ci-consumer: $*"; }

for variant in static shared; do
  start=$(date +%s)
  shared=$([[ $variant == shared ]] && echo ON || echo OFF)
  # Inside the repository (git-ignored build-*), at the depth of build/: ccache's base_dir makes
  # the compile lines the same as those of the other build directories.
  build=$root/build-consumer-$variant
  prefix=$work/prefix-$variant
  build_dirs+=("$build")
  rm -rf "$build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMIXPREC_CUDA="$cuda" \
    -DBUILD_SHARED_LIBS=$shared -DMIXPREC_BUILD_TESTS=OFF -DMIXPREC_BUILD_BENCH=OFF \
    -DMIXPREC_BUILD_EXAMPLES=OFF -DMIXPREC_BUILD_TOOLS=OFF >"$work/configure-$variant.log" ||
    { cat "$work/configure-$variant.log"; exit 1; }
  cmake --build "$build" -j"$jobs" >"$work/build-$variant.log" 2>&1 || { tail -50 "$work/build-$variant.log"; exit 1; }
  cmake --install "$build" --prefix "$prefix" >"$work/install-$variant.log"
  if [[ $variant == shared ]]; then
    scripts/check-exports.sh "$prefix/lib/libmixprec.so" "$prefix/include/mixprec/version.h"
  fi
  rm -rf "$build"   # from here on only the installed files exist

  # 1. CMake: find_package(mixprec 0.2 CONFIG REQUIRED).
  cmake -S examples/consumer -B "$work/consumer-$variant" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" >"$work/consumer-configure-$variant.log" ||
    { cat "$work/consumer-configure-$variant.log"; exit 1; }
  cmake --build "$work/consumer-$variant" -j"$jobs" >"$work/consumer-build-$variant.log" 2>&1 ||
    { cat "$work/consumer-build-$variant.log"; exit 1; }
  exe=$work/consumer-$variant/consumer
  if [[ $variant == shared ]]; then
    lib=$(ldd "$exe" | awk '/libmixprec/ {print $3}')
    [[ $lib == "$prefix"/lib/libmixprec.so.* ]] ||
      { say "the shared consumer loads '$lib', not the installed library"; exit 1; }
  else
    ! ldd "$exe" | grep -q libmixprec || { say "the static consumer needs a libmixprec.so"; exit 1; }
  fi
  "$exe" | tee "$work/run-$variant.log"
  grep -q "trained 1 epoch" "$work/run-$variant.log"

  # 2. pkg-config, as the README writes it: `pkg-config --libs mixprec`, no --static, for both.
  make -s -f examples/consumer/Makefile OUT="$work" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
    "$work/consumer-pkgconfig"
  LD_LIBRARY_PATH=$([[ $variant == shared ]] && echo "$prefix/lib") "$work/consumer-pkgconfig" |
    grep "trained 1 epoch"
  rm -f "$work/consumer-pkgconfig"
  say "$variant: installed, consumer built with find_package and pkg-config, trained ($(( $(date +%s) - start ))s)"
done
say "done in $(( $(date +%s) - stage_start ))s"
