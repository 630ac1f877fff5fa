#!/usr/bin/env bash
# The image-model benchmarks on this CPU, side by side in one run (DESIGN §5): `mixprec bench`
# under float32, mixed_float16 and mixed_bfloat16, then the PyTorch peer (bench/peers/torch_cnn.py,
# or torch_vit.py for vit, on Debian's python3-torch 1.13) with the same network, images, batch and
# optimizer (Adam), at sizes a 2-core CPU trains in seconds per step: the Fashion-MNIST cnn at
# 28x28 batch 256 and seed 002's EfficientNet-B0 at 64x64 batch 32 (resnet50 at 64x64 batch 16,
# and the Vision Transformer vit on 28x28x1 images at batch 128, when MODELS names them). Every
# row goes into one file, bench/results/cpu-cnn.json by default, in the DESIGN §5 schema.
#
#   scripts/bench-cpu-cnn.sh                           # after `make build`
#   MODELS="cnn" STEPS=20 scripts/bench-cpu-cnn.sh
#   MODELS=vit OUT=bench/results/cpu-vit.json scripts/bench-cpu-cnn.sh
#
# torch 1.13 has no torch.compile (no torch-compile rows; the file's notes say so) and no float16
# autocast on the CPU (its mixed_float16 rows say "unsupported"); its mixed_bfloat16 is
# torch.autocast("cpu", bfloat16).
#
# Settings (environment): BUILD (build directory, default build), MIXPREC (the binary), PYTHON (an
# interpreter that imports torch; default /usr/bin/python3), MODELS ("cnn efficientnet-b0"),
# CNN_SIZE/CNN_BATCH (28/256), EFF_SIZE/EFF_BATCH (64/32), RESNET_SIZE/RESNET_BATCH (64/16),
# VIT_BATCH (128; vit keeps its 28x28x1 input, patches of 4, 4 blocks 64 wide, 10 classes),
# STEPS (10), WARMUP (2), POLICIES, OUT (the result file), SKIP_TORCH=1 (mixprec rows only),
# OMP_WAIT_POLICY / GOMP_SPINCOUNT (libgomp's default unless set; recorded), BLAS_INSTALL=0 (check the
# peer's BLAS, never install it; scripts/bench-cpu-blas.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
MIXPREC=${MIXPREC:-$root/$BUILD/tools/mixprec/mixprec}
MODELS=${MODELS:-cnn efficientnet-b0}
CNN_SIZE=${CNN_SIZE:-28}
CNN_BATCH=${CNN_BATCH:-256}
EFF_SIZE=${EFF_SIZE:-64}
EFF_BATCH=${EFF_BATCH:-32}
RESNET_SIZE=${RESNET_SIZE:-64}
RESNET_BATCH=${RESNET_BATCH:-16}
VIT_BATCH=${VIT_BATCH:-128}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
POLICIES=${POLICIES:-float32,mixed_float16,mixed_bfloat16}
OUT=${OUT:-$root/bench/results/cpu-cnn.json}
SKIP_TORCH=${SKIP_TORCH:-0}
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x /usr/bin/python3 ]]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi

if [[ ! -x "$MIXPREC" ]]; then
  echo "bench-cpu-cnn: $MIXPREC not found; run 'make build' first (or set MIXPREC=path)" >&2
  exit 1
fi
if [[ "$SKIP_TORCH" != 1 ]] && ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "bench-cpu-cnn: $PYTHON cannot import torch; install it with" \
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
  ensure_optimised_blas "$PYTHON" bench-cpu-cnn || exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# size_and_batch MODEL -> "SIZE BATCH CLASSES"
size_and_batch() {
  case $1 in
    cnn) echo "$CNN_SIZE $CNN_BATCH 10" ;;
    efficientnet-b*) echo "$EFF_SIZE $EFF_BATCH 1000" ;;
    resnet50) echo "$RESNET_SIZE $RESNET_BATCH 1000" ;;
    vit) echo "28 $VIT_BATCH 10" ;;
    *)
      echo "bench-cpu-cnn: unknown model '$1' in MODELS (cnn, efficientnet-b0..b7, resnet50, vit)" >&2
      exit 2
      ;;
  esac
}

IFS=, read -r -a policies <<<"$POLICIES"
for model in $MODELS; do
  read -r size batch classes <<<"$(size_and_batch "$model")"
  for policy in "${policies[@]}"; do
    "$MIXPREC" bench --model "$model" --device cpu --policy "$policy" --input-size "$size" \
      --classes "$classes" --batch-size "$batch" --optimizer adam --steps "$STEPS" \
      --warmup "$WARMUP" --json "$tmp/mixprec_${model}_$policy.json"
  done
  if [[ "$SKIP_TORCH" != 1 && "$model" == vit ]]; then
    "$PYTHON" "$root/bench/peers/torch_vit.py" --device cpu --image-size "$size" \
      --classes "$classes" --batch-size "$batch" --steps "$STEPS" --warmup "$WARMUP" \
      --policies "$POLICIES" --json "$tmp/torch_$model.json"
  elif [[ "$SKIP_TORCH" != 1 ]]; then
    "$PYTHON" "$root/bench/peers/torch_cnn.py" --device cpu --model "$model" --input-size "$size" \
      --classes "$classes" --batch-size "$batch" --steps "$STEPS" --warmup "$WARMUP" \
      --policies "$POLICIES" --json "$tmp/torch_$model.json"
  fi
done

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown ]] && [[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  commit="$commit-dirty"
fi
mkdir -p "$(dirname "$OUT")"
command="MODELS=\"$MODELS\" CNN_SIZE=$CNN_SIZE CNN_BATCH=$CNN_BATCH EFF_SIZE=$EFF_SIZE EFF_BATCH=$EFF_BATCH"
[[ " $MODELS " == *" resnet50 "* ]] && command+=" RESNET_SIZE=$RESNET_SIZE RESNET_BATCH=$RESNET_BATCH"
[[ " $MODELS " == *" vit "* ]] && command+=" VIT_BATCH=$VIT_BATCH"
[[ "$OUT" != "$root/bench/results/cpu-cnn.json" ]] && command+=" OUT=${OUT#"$root"/}"
command+=" STEPS=$STEPS WARMUP=$WARMUP POLICIES=$POLICIES scripts/bench-cpu-cnn.sh"

# Merge: the mixprec documents give device, date and each model's workload; every row goes into
# "results" with its model.
MIXPREC_ROOT="$root" "$PYTHON" - "$tmp" "$OUT" "$commit" "$command" <<'PY'
import glob, json, os, sys
sys.path.insert(0, os.path.join(os.environ["MIXPREC_ROOT"], "bench", "peers"))
from cpu_blas import cpu_model as cpu_model_and_flags  # the CPU's name and bf16/AMX flags


def cpu_model():
    name, flags = cpu_model_and_flags()
    return {"name": name, "flags": flags}
tmp, out, commit, command = sys.argv[1:5]
merged = {"device": None, "commit": commit, "date": None, "command": command,
          "workload": {"optimizer": "adam", "data": "synthetic, one batch", "models": {}}, "results": []}
for path in sorted(glob.glob(os.path.join(tmp, "mixprec_*.json"))):
    d = json.load(open(path))
    merged["device"] = merged["device"] or d["device"]
    merged["date"] = merged["date"] or d["date"]
    w = d["workload"]
    entry = merged["workload"]["models"].setdefault(w["model"], {})
    for k in ("input_size", "channels", "classes", "batch_size", "steps", "warmup", "threads", "pipeline"):
        if k in w:
            entry[k] = w[k]
    entry["mixprec_params"] = w.get("params")
    for r in d["results"]:
        r["model"] = w["model"]
        r["input_size"] = w.get("input_size")
        merged["results"].append(r)
for path in sorted(glob.glob(os.path.join(tmp, "torch_*.json"))):
    t = json.load(open(path))
    w = t["workload"]
    entry = merged["workload"]["models"].setdefault(w["model"], {})
    # torch_cnn counts BatchNormalization's moving statistics as mixprec does; a ViT has none.
    entry["torch_params_with_bn_moving_stats"] = w.get("params_with_bn_moving_stats", w.get("params"))
    entry["forward_flops_per_sample"] = w["forward_flops_per_sample"]
    merged["workload"]["torch_version"] = t["torch_version"]
    merged["workload"]["torch_threads"] = t["threads"]
    merged["workload"]["torch_blas"] = t.get("cpu_peer")
    merged["results"].extend(t["results"])
merged["cpu_model"] = cpu_model()
merged["openmp_environment"] = {k: os.environ[k] for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS") if k in os.environ}
# mixprec's CNN rows carry no TFLOP/s; the peer counts the FLOPs of the same network (checked by
# the parameter count).
for r in merged["results"]:
    e = merged["workload"]["models"].get(r["model"], {})
    if (r["system"] == "mixprec" and "tflops" not in r and "step_ms" in r
            and e.get("forward_flops_per_sample") and e.get("mixprec_params") == e.get("torch_params_with_bn_moving_stats")):
        r["tflops"] = 3.0 * e["forward_flops_per_sample"] * r["batch_size"] / (r["step_ms"]["median"] / 1e3) / 1e12
        r["tflops_source"] = "3 x forward FLOPs counted on the PyTorch peer's network (same parameter count)"
systems = {"mixprec": 0, "torch-eager": 1, "torch-compile": 2}
policies = {"float32": 0, "mixed_float16": 1, "mixed_bfloat16": 2}
merged["results"].sort(key=lambda r: (r["model"], policies.get(r["policy"], 9), systems.get(r["system"], 9)))
# Other work on a shared machine slows every row: the load when the rows were merged says how much.
merged["load_average_1_5_15_min"] = [round(v, 2) for v in os.getloadavg()]
merged["cpu_count"] = os.cpu_count()
merged["notes"] = {
    "tflops": "3 * forward convolution and dense FLOPs (2 per multiply-add) * batch / median step",
    "peak_memory_bytes": "mixprec: peak tensor bytes (mixprec::memory_stats); "
                         "torch on the CPU: process peak RSS (not comparable)",
    "torch-compile": ("not run: no PyTorch peer in this run (SKIP_TORCH=1)"
                      if "torch_version" not in merged["workload"]
                      else "not run: torch %s has no torch.compile" % merged["workload"]["torch_version"]
                      if merged["workload"]["torch_version"].startswith("1.")
                      else "not run on the CPU (the GPU benchmark times it)"),
}
with open(out, "w") as f:
    json.dump(merged, f, indent=2)
    f.write("\n")
print("bench-cpu-cnn: wrote %d rows to %s" % (len(merged["results"]), out))
for r in merged["results"]:
    name = "%-15s %-12s %-15s" % (r["model"], r["system"], r["policy"])
    if "unsupported" in r:
        print(name, "unsupported:", r["unsupported"])
    else:
        print(name, "batch %4d  median %9.1f ms  %8.1f images/s  %s" % (
            r["batch_size"], r["step_ms"]["median"], r["samples_per_s"],
            "%.4f TFLOP/s" % r["tflops"] if "tflops" in r else ""))
PY
