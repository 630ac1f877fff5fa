#!/usr/bin/env bash
# Two builds of mixprec side by side on this CPU (A: a baseline, B: the change): the seed MLP and
# the CNN benchmarks (scripts/bench-cpu-mlp.sh, bench-cpu-cnn.sh, mixprec rows only) run in
# alternation, A then B, ROUNDS times, so that drift of the machine hits both alike; then one
# file with every median step time and, per workload and policy, the ratio B / A of the medians
# over the rounds.
#
#   scripts/bench-cpu-ab.sh BASE_BINARY NEW_BINARY [OUT]
#   ROUNDS=3 scripts/bench-cpu-ab.sh /tmp/base/build/tools/mixprec/mixprec build/tools/mixprec/mixprec
#
# Settings (environment): ROUNDS (3), and the settings of the two scripts (UNITS, BATCH, STEPS,
# MODELS, ...), which pass through unchanged.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ $# -lt 2 ]]; then
  echo "usage: scripts/bench-cpu-ab.sh BASE_BINARY NEW_BINARY [OUT]" >&2
  exit 2
fi
base=$(realpath "$1")
new=$(realpath "$2")
OUT=${3:-$root/bench/results/cpu-ab.json}
ROUNDS=${ROUNDS:-3}
for binary in "$base" "$new"; do
  if [[ ! -x "$binary" ]]; then
    echo "bench-cpu-ab: $binary is not an executable" >&2
    exit 1
  fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    binary=$base
    [[ $side == B ]] && binary=$new
    echo "bench-cpu-ab: round $round/$ROUNDS, $side ($binary)" >&2
    SKIP_TORCH=1 MIXPREC="$binary" OUT="$tmp/mlp-$side-$round.json" \
      "$root/scripts/bench-cpu-mlp.sh" >/dev/null
    SKIP_TORCH=1 MIXPREC="$binary" OUT="$tmp/cnn-$side-$round.json" \
      "$root/scripts/bench-cpu-cnn.sh" >/dev/null
  done
done

python3 - "$tmp" "$ROUNDS" "$base" "$new" "$OUT" <<'PY'
import json, statistics, sys, pathlib, datetime
tmp, rounds, base, new, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
rows, device = {}, None
for bench in ("mlp", "cnn"):
    for side in ("A", "B"):
        for r in range(1, rounds + 1):
            doc = json.loads(pathlib.Path(f"{tmp}/{bench}-{side}-{r}.json").read_text())
            device = device or doc.get("device")
            for row in doc["results"]:
                if row.get("system") != "mixprec" or "step_ms" not in row:
                    continue
                key = (bench, row.get("model", bench), row["policy"])
                rows.setdefault(key, {"A": [], "B": []})[side].append(row["step_ms"]["median"])
results = []
for (bench, model, policy), sides in sorted(rows.items()):
    a, b = statistics.median(sides["A"]), statistics.median(sides["B"])
    results.append({"benchmark": bench, "model": model, "policy": policy,
                    "base_median_step_ms": sides["A"], "new_median_step_ms": sides["B"],
                    "ratio_new_over_base": b / a})
doc = {"device": device, "date": datetime.date.today().isoformat(),
       "command": f"ROUNDS={rounds} scripts/bench-cpu-ab.sh {base} {new}",
       "base": base, "new": new, "results": results}
pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
pathlib.Path(out).write_text(json.dumps(doc, indent=1) + "\n")
for r in results:
    print(f'{r["benchmark"]:4} {r["model"]:16} {r["policy"]:15} new/base {r["ratio_new_over_base"]:.3f}')
PY
