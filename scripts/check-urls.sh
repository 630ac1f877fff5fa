#!/usr/bin/env bash
# Fails when a tracked file names a place that may not exist: every URL (a scheme, ://, a host) and
# every bare host name (name.tld) in the tree must have its host in scripts/url-allowlist.txt, the
# short list of real, public documentation sites the sources cite. The project has no public
# repository or homepage, and scripts take package mirrors from the machine's apt configuration,
# so neither an invented repository nor a mirror host can pass (both are rejected for not being
# listed, without this script having to name them).
# Usage: scripts/check-urls.sh [ROOT]   (default: the repository holding this script).
# Registered as the ctest `no_invented_urls` (tests/CMakeLists.txt).
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
allow_file="$root/scripts/url-allowlist.txt"
[[ -f $allow_file ]] || { echo "check-urls: $allow_file is missing" >&2; exit 2; }
mapfile -t allowed < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$allow_file" | grep -v '^$')

cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard)
else
  mapfile -t files < <(find . -type f -not -path './build*' -not -path './.git/*' | sed 's|^\./||')
fi

is_allowed() {
  local host=${1,,} a
  for a in "${allowed[@]}"; do
    [[ $host == "$a" || $host == *".$a" ]] && return 0
  done
  return 1
}

bad=0
# A URL's host, or a bare dotted name ending in a top-level domain that web and package hosts use.
url_re='[a-zA-Z][a-zA-Z0-9+.-]*://[^/[:space:]"'"'"'<>)]+'
host_re='\b([A-Za-z0-9-]+\.)+(org|com|net|io|dev|co|edu|gov)\b'
existing=()
for f in "${files[@]}"; do
  [[ -f $f && $f != scripts/url-allowlist.txt ]] && existing+=("$f")
done
# -I skips binary files; -H keeps the file name even for a single file.
while IFS= read -r hit; do
  f=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  match=${rest#*:}
  host=${match#*://}
  host=${host##*@}
  host=${host%%:*}
  host=${host%%/*}
  if ! is_allowed "$host"; then
    echo "check-urls: $f:$line: '$match' names a host that is not in scripts/url-allowlist.txt" >&2
    bad=1
  fi
done < <(printf '%s\0' "${existing[@]}" | xargs -0 grep -HnoIE "$url_re|$host_re" -- || true)
if ((bad)); then
  echo "check-urls: name only places that exist; package mirrors come from the apt configuration" >&2
  exit 1
fi
echo "check-urls: ${#files[@]} files, every URL and host name is on the allowlist"
