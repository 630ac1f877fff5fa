#!/usr/bin/env bash
# Asserts that every public header (include/mixprec/**/*.h and the generated mixprec/version.h)
#  1. marks its declarations visible: `#pragma GCC visibility push(default)` after its last
#     #include (a standard or third-party header included inside the push would have its symbols
#     exported by a shared libmixprec) and `#pragma GCC visibility pop` at its end. The library is
#     compiled with -fvisibility=hidden, so a header without the markers silently drops its API
#     from libmixprec.so;
#  2. compiles on its own (includes what it uses).
# Usage: scripts/check-public-headers.sh [BUILD_DIR]   (BUILD_DIR holds include/mixprec/version.h;
# default: build). CXX picks the compiler (default c++), JOBS the parallelism (default nproc).
# Registered as the ctest `public_headers` (tests/CMakeLists.txt).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cxx=${CXX:-c++}
jobs=${JOBS:-$(nproc)}
[[ -f $build/include/mixprec/version.h ]] || {
  echo "check-public-headers: $build/include/mixprec/version.h is missing (configure first)" >&2
  exit 2
}

headers=()
while IFS= read -r f; do headers+=("$f"); done < <(cd "$root/include" && find mixprec -name '*.h' | sort)
failures=0

# 1. The markers.
for h in "${headers[@]}" version.h; do
  if [[ $h == version.h ]]; then h=mixprec/version.h; file=$build/include/$h; else file=$root/include/$h; fi
  push=$(grep -n '^#pragma GCC visibility push(default)' "$file" | cut -d: -f1 || true)
  pop=$(grep -n '^#pragma GCC visibility pop' "$file" | cut -d: -f1 || true)
  last_include=$(grep -n '^[[:space:]]*#[[:space:]]*include' "$file" | tail -1 | cut -d: -f1 || true)
  last_code=$(grep -n '[^[:space:]]' "$file" | tail -1 | cut -d: -f1)
  if [[ -z $push || -z $pop || $(wc -w <<<"$push") -ne 1 || $(wc -w <<<"$pop") -ne 1 ]]; then
    echo "check-public-headers: $h: needs exactly one '#pragma GCC visibility push(default)' and one '#pragma GCC visibility pop'"
    failures=$((failures + 1))
  elif [[ -n $last_include && $last_include -gt $push ]]; then
    echo "check-public-headers: $h:$last_include: #include after the visibility push (line $push); put the push after the includes"
    failures=$((failures + 1))
  elif [[ $pop -ne $last_code ]]; then
    echo "check-public-headers: $h:$pop: the visibility pop must be the header's last line"
    failures=$((failures + 1))
  fi
done

# 2. Each header alone, -fsyntax-only, in parallel.
compile_one() {
  printf '#include <%s>\n' "$1" |
    "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I "$root/include" -I "$build/include" -x c++ - 2>&1 ||
    { echo "check-public-headers: $1 does not compile on its own"; return 1; }
}
export -f compile_one
export root build cxx
if ! printf '%s\n' "${headers[@]}" mixprec/version.h | xargs -P "$jobs" -I{} bash -c 'compile_one {}'; then
  failures=$((failures + 1))
fi

if [[ $failures -ne 0 ]]; then
  echo "check-public-headers: FAILED"
  exit 1
fi
echo "check-public-headers: ${#headers[@]} headers + version.h: markers present, each compiles on its own"
