#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with network): downloads the Debian packages the mixprec build needs
# into .gpu-deps/debs (git-ignored), for a GPU machine that has CUDA, CMake and a compiler but no
# network and none of these -dev packages. Then carry the folder there and run
# scripts/gpu/build.sh (see README, "Building on a GPU machine without network").
#
#   scripts/gpu/fetch-deps.sh              # libraries and headers (about 9 MB)
#   WITH_DATA=1 scripts/gpu/fetch-deps.sh  # also the Fashion-MNIST package (about 31 MB more)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest=${DEST:-$root/.gpu-deps/debs}
packages=(
  libdnnl-dev libdnnl2              # oneDNN headers and library
  zlib1g-dev zlib1g                 # gzip IDX files
  nlohmann-json3-dev                # JSON
  libcli11-dev                      # the CLI
  libgtest-dev libgmock-dev googletest  # tests
)
if [[ "${WITH_DATA:-0}" == 1 ]]; then packages+=(dataset-fashion-mnist); fi

mkdir -p "$dest"
cd "$dest"
rm -f ./*.deb
# apt-get download needs no root; it drops privileges when it can, which fails in a root-owned
# folder, hence the sandbox user override.
apt-get download -o APT::Sandbox::User=root "${packages[@]}"
echo "fetch-deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in $dest"
