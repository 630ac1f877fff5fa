#!/usr/bin/env bash
# The GPT benchmark on this CPU, side by side in one run (DESIGN §5): `mixprec bench --model gpt`
# under float32 and mixed_bfloat16, then the PyTorch peer (bench/peers/torch_gpt.py, Debian
# python3-torch) with the same model, batch, sequence length and optimizer; every row goes into
# one file, bench/results/cpu-gpt.json, in the DESIGN §5 schema, with the CPU named.
#
#   scripts/bench-cpu-gpt.sh                  # after `make build`: 6 layers, 384 wide, 6 heads,
#                                             # T = 256, batch 8, AdamW
#   LAYERS=4 WIDTH=256 HEADS=4 SEQ=128 BATCH=8 STEPS=5 scripts/bench-cpu-gpt.sh
#
# Settings (environment): BUILD, MIXPREC (the binary), PYTHON (an interpreter that imports torch;
# default /usr/bin/python3), LAYERS (6), WIDTH (384), HEADS (6), SEQ (256), VOCAB (50257), BATCH
# (8), STEPS (10), WARMUP (2), POLICIES (float32,mixed_bfloat16), ROUNDS (1: mixprec and torch
# alternate ROUNDS times, each round's rows kept), OUT, SKIP_TORCH=1 (mixprec rows only).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
MIXPREC=${MIXPREC:-$root/$BUILD/tools/mixprec/mixprec}
LAYERS=${LAYERS:-6}
WIDTH=${WIDTH:-384}
HEADS=${HEADS:-6}
SEQ=${SEQ:-256}
VOCAB=${VOCAB:-50257}
BATCH=${BATCH:-8}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
POLICIES=${POLICIES:-float32,mixed_bfloat16}
ROUNDS=${ROUNDS:-1}
OUT=${OUT:-$root/bench/results/cpu-gpt.json}
SKIP_TORCH=${SKIP_TORCH:-0}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x /usr/bin/python3 ]]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
[[ -x "$MIXPREC" ]] || { echo "bench-cpu-gpt: $MIXPREC not found; run 'make build' first" >&2; exit 1; }
if [[ "$SKIP_TORCH" != 1 ]]; then
  "$PYTHON" -c "import torch" 2>/dev/null || {
    echo "bench-cpu-gpt: $PYTHON cannot import torch (sudo apt-get install python3-torch), or SKIP_TORCH=1" >&2
    exit 1
  }
  source "$root/scripts/bench-cpu-blas.sh"
  ensure_optimised_blas "$PYTHON" bench-cpu-gpt || exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shape=(--layers "$LAYERS" --width "$WIDTH" --heads "$HEADS" --seq-len "$SEQ" --vocab "$VOCAB")
IFS=, read -r -a policies <<<"$POLICIES"
for round in $(seq 1 "$ROUNDS"); do
  for policy in "${policies[@]}"; do
    "$MIXPREC" bench --model gpt --device cpu --policy "$policy" "${shape[@]}" \
      --batch-size "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --json "$tmp/mixprec-$round-$policy.json"
  done
  if [[ "$SKIP_TORCH" != 1 ]]; then
    "$PYTHON" "$root/bench/peers/torch_gpt.py" --device cpu "${shape[@]}" --batch-size "$BATCH" \
      --steps "$STEPS" --warmup "$WARMUP" --policies "$POLICIES" --json "$tmp/torch-$round.json"
  fi
done

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown ]] && [[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit="$commit-dirty"
fi
mkdir -p "$(dirname "$OUT")"
command="LAYERS=$LAYERS WIDTH=$WIDTH HEADS=$HEADS SEQ=$SEQ VOCAB=$VOCAB BATCH=$BATCH STEPS=$STEPS WARMUP=$WARMUP POLICIES=$POLICIES ROUNDS=$ROUNDS scripts/bench-cpu-gpt.sh"
MIXPREC_ROOT="$root" "$PYTHON" - "$tmp" "$OUT" "$commit" "$command" "$POLICIES" "$ROUNDS" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["MIXPREC_ROOT"], "bench", "peers"))
from cpu_blas import cpu_model as cpu_model_and_flags
tmp, out, commit, command, policies, rounds = sys.argv[1:7]
merged = None
for r in range(1, int(rounds) + 1):
    for p in policies.split(","):
        d = json.load(open(os.path.join(tmp, "mixprec-%d-%s.json" % (r, p))))
        if merged is None:
            merged = {"device": d["device"], "commit": commit, "date": d["date"], "command": command,
                      "workload": dict(d["workload"]), "results": []}
        for row in d["results"]:
            row["round"] = r
            merged["results"].append(row)
    peer = os.path.join(tmp, "torch-%d.json" % r)
    if os.path.exists(peer):
        t = json.load(open(peer))
        merged["workload"]["torch_version"] = t["torch_version"]
        merged["workload"]["torch_threads"] = t["threads"]
        merged["workload"]["torch_blas"] = t.get("cpu_peer")
        for row in t["results"]:
            row["round"] = r
            merged["results"].append(row)
name, flags = cpu_model_and_flags()
merged["cpu_model"] = {"name": name, "flags": flags}
merged["notes"] = {
    "tflops": "(6 * tokens * N + 12 * tokens * layers * T * width) / median step, "
              "N = 12 * layers * width^2 + vocab * width (applications::gpt_step_flops)",
    "peak_memory_bytes": "mixprec: peak tensor bytes (mixprec::memory_stats); torch on the CPU: "
                         "process peak RSS (not comparable)"}
with open(out, "w") as f:
    json.dump(merged, f, indent=2)
    f.write("\n")
print("bench-cpu-gpt: wrote %d rows to %s" % (len(merged["results"]), out))
for row in merged["results"]:
    if "step_ms" in row:
        print("  round %d  %-12s %-15s step %9.1f ms" % (row["round"], row["system"], row["policy"],
                                                         row["step_ms"]["median"]))
PY
