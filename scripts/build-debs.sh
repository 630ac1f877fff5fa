#!/usr/bin/env bash
# Builds the Debian packages libmixprec, libmixprec-dev, mixprec and python3-mixprec
# (cmake/packaging.cmake) into
# build-deb/: a shared-library Release build installed under /usr, packaged by cpack -G DEB, with
# the dependencies computed by dpkg-shlibdeps (dpkg-dev). Prints each package's control fields.
# MIXPREC_CUDA (default OFF: the packages' dependencies are then Debian's alone) and JOBS may be set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD:-build-deb}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_SHARED_LIBS=ON -DMIXPREC_CUDA="${MIXPREC_CUDA:-OFF}" -DMIXPREC_BUILD_TESTS=OFF \
  -DMIXPREC_BUILD_BENCH=OFF -DMIXPREC_BUILD_EXAMPLES=OFF -DMIXPREC_BUILD_TOOLS=ON \
  -DMIXPREC_PYTHON_INSTALL_DIR=lib/python3/dist-packages >/dev/null
cmake --build "$build" -j"${JOBS:-$(nproc)}"
scripts/check-exports.sh "$build/libmixprec.so" "$build/include/mixprec/version.h"
(cd "$build" && rm -f ./*.deb && cpack -G DEB)
for deb in "$build"/*.deb; do
  echo "== $deb"
  dpkg-deb -f "$deb" Package Version Section Depends
done
