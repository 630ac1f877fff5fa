#!/usr/bin/env bash
# The seed 001 MLP benchmark on this CPU, side by side in one run (DESIGN §5): `mixprec bench`
# under float32, mixed_float16 and mixed_bfloat16, then the PyTorch peer (bench/peers/torch_mlp.py,
# Debian python3-torch) with the same model, batch and optimizer; every row goes into one file,
# bench/results/cpu-mlp.json, in the DESIGN §5 schema.
#
#   scripts/bench-cpu-mlp.sh                       # after `make build`
#   UNITS=4096 BATCH=256 STEPS=20 scripts/bench-cpu-mlp.sh
#
# Settings (environment): BUILD (build directory, default build), MIXPREC (the binary), PYTHON (an
# interpreter that imports torch; default /usr/bin/python3, where Debian installs python3-torch),
# UNITS (default 1024: Debian's torch 1.13 float32 path takes seconds per step at 4096), BATCH
# (256), STEPS (20), WARMUP (3), POLICIES, OUT (the result file), SKIP_TORCH=1 (mixprec rows only),
# OMP_WAIT_POLICY / GOMP_SPINCOUNT (libgomp's default unless set; recorded), BLAS_INSTALL=0 (check the
# peer's BLAS, never install it; scripts/bench-cpu-blas.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
MIXPREC=${MIXPREC:-$root/$BUILD/tools/mixprec/mixprec}
UNITS=${UNITS:-1024}
BATCH=${BATCH:-256}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
POLICIES=${POLICIES:-float32,mixed_float16,mixed_bfloat16}
OUT=${OUT:-$root/bench/results/cpu-mlp.json}
SKIP_TORCH=${SKIP_TORCH:-0}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x /usr/bin/python3 ]]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi

if [[ ! -x "$MIXPREC" ]]; then
  echo "bench-cpu-mlp: $MIXPREC not found; run 'make build' first (or set MIXPREC=path)" >&2
  exit 1
fi
if [[ "$SKIP_TORCH" != 1 ]] && ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "bench-cpu-mlp: $PYTHON cannot import torch; install it with" \
    "'sudo apt-get install python3-torch', set PYTHON, or set SKIP_TORCH=1" >&2
  exit 1
fi
# OpenMP's wait policy is left to libgomp's default (spin a while, then sleep) unless the caller
# sets OMP_WAIT_POLICY or GOMP_SPINCOUNT; it is recorded in the result file. On a quiet machine the
# default is the fast one (2026-11-26, this 2-core Xeon, EfficientNet-B0 64x64 b32 float32: 151 ms
# with active spinning against 200 ms passive, bench/results/cpu-cnn-active-wait.json against
# cpu-cnn.json); on a machine shared with other jobs a spinning worker holds a core that a thread
# with work needs, and OMP_WAIT_POLICY=passive is several times faster
# (bench/results/cpu-omp-mem-issue14.json, measured at load 6-12). The same setting applies to
# mixprec and to the PyTorch peer (both run on libgomp).
# The peer on the reference BLAS would be a straw man: install or check OpenBLAS.
if [[ "$SKIP_TORCH" != 1 ]]; then
  source "$root/scripts/bench-cpu-blas.sh"
  ensure_optimised_blas "$PYTHON" bench-cpu-mlp || exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

IFS=, read -r -a policies <<<"$POLICIES"
for policy in "${policies[@]}"; do
  "$MIXPREC" bench --model mlp --device cpu --policy "$policy" --units "$UNITS" \
    --batch-size "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --json "$tmp/mixprec-$policy.json"
done
if [[ "$SKIP_TORCH" != 1 ]]; then
  "$PYTHON" "$root/bench/peers/torch_mlp.py" --device cpu --units "$UNITS" --batch-size "$BATCH" \
    --steps "$STEPS" --warmup "$WARMUP" --policies "$POLICIES" --json "$tmp/torch.json"
fi

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown ]] && [[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit="$commit-dirty"
fi
mkdir -p "$(dirname "$OUT")"
command="UNITS=$UNITS BATCH=$BATCH STEPS=$STEPS WARMUP=$WARMUP POLICIES=$POLICIES scripts/bench-cpu-mlp.sh"

# Merge: the mixprec documents give device, date and workload; every row goes into "results".
MIXPREC_ROOT="$root" "$PYTHON" - "$tmp" "$OUT" "$commit" "$command" "$POLICIES" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["MIXPREC_ROOT"], "bench", "peers"))
from cpu_blas import cpu_model as cpu_model_and_flags  # the CPU's name and bf16/AMX flags


def cpu_model():
    name, flags = cpu_model_and_flags()
    return {"name": name, "flags": flags}
tmp, out, commit, command, policies = sys.argv[1:6]
docs = [json.load(open(os.path.join(tmp, "mixprec-%s.json" % p))) for p in policies.split(",")]
merged = {"device": docs[0]["device"], "commit": commit, "date": docs[0]["date"],
          "command": command, "workload": dict(docs[0]["workload"]), "results": []}
merged["workload"].pop("peak_memory", None)
merged["notes"] = {
    "tflops": "6 * batch * Dense kernel elements per step / median step time",
    "peak_memory_bytes": "mixprec: peak tensor bytes (mixprec::memory_stats); "
                         "torch on the CPU: process peak RSS (not comparable)"}
for d in docs:
    merged["results"].extend(d["results"])
peer = os.path.join(tmp, "torch.json")
if os.path.exists(peer):
    t = json.load(open(peer))
    merged["workload"]["torch_version"] = t["torch_version"]
    merged["workload"]["torch_threads"] = t["threads"]
    merged["workload"]["torch_blas"] = t.get("cpu_peer")
    merged["results"].extend(t["results"])
merged["cpu_model"] = cpu_model()
merged["openmp_environment"] = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS") if k in os.environ}
with open(out, "w") as f:
    json.dump(merged, f, indent=2)
    f.write("\n")
print("bench-cpu-mlp: wrote %d rows to %s" % (len(merged["results"]), out))
PY
