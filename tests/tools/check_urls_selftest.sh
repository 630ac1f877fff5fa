#!/usr/bin/env bash
# Shows that scripts/check-urls.sh can fail: in a scratch tree with the repository's allowlist, a
# file naming an unlisted repository URL, a file naming an unlisted bare host and a file naming
# an unlisted host inside an apt source line are each rejected, and a tree citing only listed
# hosts passes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/scripts"
cp "$root/scripts/check-urls.sh" "$root/scripts/url-allowlist.txt" "$scratch/scripts/"
cd "$scratch"
echo 'see https://huggingface.co/docs/safetensors and localhost:8080' >ok.md
"$scratch/scripts/check-urls.sh" "$scratch" >/dev/null || { echo "FAIL: a clean tree was rejected"; exit 1; }
expect_rejected() {
  printf '%s\n' "$2" >"$1"
  if "$scratch/scripts/check-urls.sh" "$scratch" >/dev/null 2>&1; then
    echo "FAIL: $1 ('$2') was accepted"
    exit 1
  fi
  rm "$1"
}
# The hosts are put together here so that this file itself names none (the check scans it too).
tld() { printf '.%s' "$1"; }
web=https
expect_rejected repo.md "git clone ${web}://forge.example$(tld com)/someone/project.git"
expect_rejected bare.txt "mirror: packages.example$(tld org)"
expect_rejected apt.sh "debootstrap bookworm /tmp/x ${web}://ftp.example$(tld net)/debian"
echo "check-urls self-test: unlisted hosts are rejected, listed ones pass"
