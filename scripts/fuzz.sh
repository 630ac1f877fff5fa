#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz/ for SECONDS each, one after the other on one core
# (JOBS targets at a time when set), starting from the committed corpus tests/fuzz/corpus/<target>/ (read only: new inputs go to
# $WORK/corpus/<target>/, findings to $WORK/findings/<target>/).
#
# Usage: scripts/fuzz.sh SECONDS [TARGET...]
#   BUILD  the fuzz build (default: build-fuzz; see tests/fuzz/README.md for how to configure it)
#   WORK   where new corpus entries, findings and logs go (default: fuzz-work)
#   NICE   niceness of the runs (default: 19)
#   JOBS   how many targets run at a time (default: 1)
# Prints one line per target (runs executed, corpus size, findings) and exits 1 when any target
# found a crash, a leak, a timeout or an out-of-memory input, 2 when a target is missing.
# Minimising a target's corpus for committing: scripts/fuzz.sh --merge TARGET (MAX_KB: its size
# budget, default 32 KB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-fuzz}
work=${WORK:-$root/fuzz-work}
nice_level=${NICE:-19}
# Every target there is: one per tests/fuzz/<target>_fuzz.cpp, so a new reader's target is run
# without editing this list.
all_targets=()
for source in "$root"/tests/fuzz/*_fuzz.cpp; do
  name=${source##*/}
  all_targets+=("${name%_fuzz.cpp}")
done
[[ ${#all_targets[@]} -gt 0 ]] || { echo "fuzz.sh: no tests/fuzz/*_fuzz.cpp in $root" >&2; exit 2; }

if [[ ${1:-} == --merge ]]; then
  target=${2:?usage: scripts/fuzz.sh --merge TARGET}
  committed=$root/tests/fuzz/corpus/$target
  mkdir -p "$committed" "$work/corpus/$target"
  scratch=$(mktemp -d)
  # libFuzzer's merge pass over the committed corpus and the runs' new inputs, smallest first, on
  # edge coverage only (hit counts would keep an input per loop count): its control file names,
  # per input, the edges it was the first to reach.
  "$build/tests/fuzz/${target}_fuzz" -merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 \
    -merge_control_file="$scratch/control" "$scratch" "$committed" "$work/corpus/$target" \
    >"$scratch/merge.log" 2>&1 || { cat "$scratch/merge.log" >&2; exit 1; }
  # The inputs that reach new edges, the most edges per byte first, within MAX_KB (default 32) per
  # target, so that the committed corpora stay small; named by their SHA-1 as libFuzzer names them.
  mkdir -p "$scratch/kept"
  python3 - "$scratch/control" "$scratch/kept" "${MAX_KB:-32}" <<'PY'
import hashlib, os, shutil, sys
control, out, max_kb = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(control, errors="replace").read().splitlines()
count = int(lines[0])
paths = lines[2 : 2 + count]
edges = {}
for line in lines[2 + count :]:
    if line.startswith("COV "):
        fields = line.split()
        if len(fields) > 2:
            edges[int(fields[1])] = len(fields) - 2
size = {i: os.path.getsize(paths[i]) for i in edges}
budget, used = max_kb * 1024, 0
for i in sorted(edges, key=lambda i: (-edges[i] / max(size[i], 1), size[i])):
    if used + size[i] > budget:
        continue
    data = open(paths[i], "rb").read()
    with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
    used += size[i]
PY
  if [[ -z $(ls -A "$scratch/kept") ]]; then
    echo "$target: the merge kept nothing; $committed left as it was" >&2
    rm -rf "$scratch"
    exit 1
  fi
  rm -rf "$committed" && mkdir -p "$committed" && cp "$scratch/kept"/* "$committed"/
  rm -rf "$scratch"
  echo "$target: $(ls "$committed" | wc -l) inputs ($(du -cb "$committed"/* | tail -1 | cut -f1)" \
    "bytes) in $committed"
  exit 0
fi

seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")

mkdir -p "$work/logs"
# One target: its run, then its one-line summary in $work/logs/<target>.summary; returns 1 on a
# finding or a failed run, 2 when the binary is missing.
run_target() {
  local target=$1 binary=$build/tests/fuzz/${1}_fuzz
  local summary=$work/logs/$target.summary
  if [[ ! -x $binary ]]; then
    echo "$target: $binary is missing (build it: cmake --build $build --target ${target}_fuzz)" \
      | tee "$summary"
    return 2
  fi
  mkdir -p "$work/corpus/$target" "$work/findings/$target"
  local log=$work/logs/$target.log
  # The committed corpus when there is one (libFuzzer refuses a directory that does not exist).
  local seeds=()
  [[ -d $root/tests/fuzz/corpus/$target ]] && seeds=("$root/tests/fuzz/corpus/$target")
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one that needs 2 GB a finding.
  local rc=0 start=$SECONDS
  nice -n "$nice_level" "$binary" "$work/corpus/$target" "${seeds[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/findings/$target/" >"$log" 2>&1 || rc=$?
  local elapsed=$((SECONDS - start))
  local runs
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  local findings
  findings=$(find "$work/findings/$target" -type f | wc -l)
  echo "$target: ${runs:-?} runs in ${elapsed} s, corpus $(ls "$work/corpus/$target" | wc -l)" \
    "new inputs, $findings findings (exit $rc; log $log)" | tee "$summary"
  if [[ $rc -ne 0 || $findings -ne 0 ]]; then return 1; fi
  return 0
}

# JOBS targets at a time (default 1: one core); the exit status is the worst of them.
jobs_max=${JOBS:-1}
status=0
note_status() {
  local rc=$1
  if [[ $rc -eq 2 || ($rc -eq 1 && $status -ne 2) ]]; then status=$rc; fi
}
running=0
for target in "${targets[@]}"; do
  if [[ $running -ge $jobs_max ]]; then
    rc=0
    wait -n || rc=$?
    note_status "$rc"
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
while [[ $running -gt 0 ]]; do
  rc=0
  wait -n || rc=$?
  note_status "$rc"
  running=$((running - 1))
done
exit $status
