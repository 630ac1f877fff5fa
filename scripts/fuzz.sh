#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz/ for SECONDS each, one after the other on one core,
# starting from the committed corpus tests/fuzz/corpus/<target>/ (read only: new inputs go to
# $WORK/corpus/<target>/, findings to $WORK/findings/<target>/).
#
# Usage: scripts/fuzz.sh SECONDS [TARGET...]
#   BUILD  the fuzz build (default: build-fuzz; see tests/fuzz/README.md for how to configure it)
#   WORK   where new corpus entries, findings and logs go (default: fuzz-work)
#   NICE   niceness of the runs (default: 19)
# Prints one line per target (runs executed, corpus size, findings) and exits 1 when any target
# found a crash, a leak, a timeout or an out-of-memory input, 2 when a target is missing.
# Minimising a target's corpus for committing: scripts/fuzz.sh --merge TARGET.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-fuzz}
work=${WORK:-$root/fuzz-work}
nice_level=${NICE:-19}
all_targets=(safetensors checkpoint checkpoint_load saved_model model_config idx cifar)
# The text-data readers, when this tree has them.
for extra in tokens vocab; do
  [[ -f $root/tests/fuzz/${extra}_fuzz.cpp ]] && all_targets+=("$extra")
done

if [[ ${1:-} == --merge ]]; then
  target=${2:?usage: scripts/fuzz.sh --merge TARGET}
  committed=$root/tests/fuzz/corpus/$target
  merged=$(mktemp -d)
  "$build/tests/fuzz/${target}_fuzz" -merge=1 "$merged" "$committed" "$work/corpus/$target"
  rm -rf "$committed" && mkdir -p "$committed" && cp "$merged"/* "$committed"/ && rm -rf "$merged"
  echo "$target: $(ls "$committed" | wc -l) inputs in $committed"
  exit 0
fi

seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")

status=0
for target in "${targets[@]}"; do
  binary=$build/tests/fuzz/${target}_fuzz
  if [[ ! -x $binary ]]; then
    echo "$target: $binary is missing (build it: cmake --build $build --target ${target}_fuzz)"
    status=2
    continue
  fi
  mkdir -p "$work/corpus/$target" "$work/findings/$target" "$work/logs"
  log=$work/logs/$target.log
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one that needs 2 GB a finding.
  rc=0
  nice -n "$nice_level" "$binary" "$work/corpus/$target" "$root/tests/fuzz/corpus/$target" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/findings/$target/" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  findings=$(find "$work/findings/$target" -type f | wc -l)
  echo "$target: ${runs:-?} runs in ${seconds} s, corpus $(ls "$work/corpus/$target" | wc -l)" \
    "new inputs, $findings findings (exit $rc; log $log)"
  if [[ $rc -ne 0 || $findings -ne 0 ]]; then status=1; fi
done
exit $status
