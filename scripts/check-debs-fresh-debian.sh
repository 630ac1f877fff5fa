#!/usr/bin/env bash
# Checks that the .debs of scripts/build-debs.sh install and work on a fresh Debian 12: a minimal
# bookworm made with debootstrap (needs root and a Debian mirror), `apt-get install ./*.deb`
# there, then `mixprec --version`/`info`, examples/consumer built with find_package and with
# pkg-config against the installed packages and run, and one `mixprec train` epoch on synthetic
# data. Not part of CI (root, network, about 5 minutes).
# Usage: sudo scripts/check-debs-fresh-debian.sh [DEB_DIR [MIRROR]]   (default build-deb)
# MIRROR is the Debian archive debootstrap reads; by default the first one this machine's apt
# configuration names for the Debian archive (/etc/apt/sources.list, /etc/apt/sources.list.d/*:
# one-line "deb URI SUITE..." entries and deb822 "URIs:" fields; security archives are skipped).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
debs=$(cd "${1:-$root/build-deb}" && pwd)

# The Debian archive URIs of the apt configuration, in the order apt reads them.
apt_mirrors() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    if [[ $f == *.sources ]]; then
      awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f"
    else
      awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }' "$f"
    fi
  done | grep -v -- '-security' | grep -E '^(https?|file)://'
}
mirror=${2:-$(apt_mirrors | head -1 || true)}
[[ -n $mirror ]] || {
  echo "check-debs: no Debian mirror in the apt configuration; pass one: $0 DEB_DIR MIRROR" >&2
  exit 2
}
echo "check-debs: debootstrap from $mirror"
compgen -G "$debs/*.deb" >/dev/null || { echo "check-debs: no .deb in $debs (run scripts/build-debs.sh)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "check-debs: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
chroot_dir=$(mktemp -d /tmp/mixprec-deb12.XXXXXX)
cleanup() { umount "$chroot_dir/proc" 2>/dev/null || true; rm -rf "$chroot_dir"; }
trap cleanup EXIT

debootstrap --variant=minbase bookworm "$chroot_dir" "$mirror" >"$chroot_dir.log" 2>&1 ||
  { tail -20 "$chroot_dir.log"; exit 1; }
rm -f "$chroot_dir.log"
cp /etc/resolv.conf "$chroot_dir/etc/"
mount -t proc proc "$chroot_dir/proc"
mkdir -p "$chroot_dir/check/debs"
cp "$debs"/*.deb "$chroot_dir/check/debs/"
cp -r "$root/examples/consumer" "$chroot_dir/check/consumer"

chroot "$chroot_dir" /bin/bash -euo pipefail -c '
  export DEBIAN_FRONTEND=noninteractive
  cd /check
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends ./debs/*.deb >apt.log 2>&1 || { tail -30 apt.log; exit 1; }
  echo "check-debs: installed $(ls debs | tr "\n" " ")"
  mixprec --version
  mixprec info | head -3
  apt-get install -y -qq --no-install-recommends cmake g++ make pkg-config >tools.log 2>&1
  cmake -S consumer -B cb -DCMAKE_BUILD_TYPE=Release >cb.log 2>&1 || { cat cb.log; exit 1; }
  cmake --build cb -j"$(nproc)" >>cb.log 2>&1 || { cat cb.log; exit 1; }
  ./cb/consumer | grep "trained 1 epoch"
  make -s -f consumer/Makefile OUT=/check /check/consumer-pkgconfig
  ./consumer-pkgconfig | grep "trained 1 epoch"
  mixprec train --model mlp --dataset synthetic:28x28x1:10:2048 --epochs 1 | tail -1
'
echo "check-debs: the packages install and work on a fresh Debian 12"
