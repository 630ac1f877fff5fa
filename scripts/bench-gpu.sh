#!/usr/bin/env bash
# The GPU benchmarks side by side in one command on the GPU machine (DESIGN §5): `mixprec bench`
# and the PyTorch peers (bench/peers/torch_mlp.py, torch_cnn.py: eager AMP and torch.compile,
# channels_last) on the same model, batch, optimizer and synthetic data; every row is merged into
# bench/results/<machine>-mlp.json and bench/results/<machine>-cnn.json (machine: h100, h200 from
# the GPU's name), one row per (system, model, policy, TF32, batch size).
#
#   scripts/bench-gpu.sh efficientnet         # one stage: one device call each
#   scripts/bench-gpu.sh                      # mlp efficientnet resnet50 (over 10 minutes)
#   scripts/bench-gpu.sh maxbatch-resnet50    # the largest batch each policy trains
#
# Stages (each fits one 10-minute device call on an H100; the script stops starting commands
# when BUDGET seconds have passed and records the rest as skipped):
#   mlp            seed 001's MLP, 4096 units, batch 8192, RMSprop: mixprec float32 (TF32 off,
#                  then MIXPREC_ALLOW_TF32=1), mixed_float16, mixed_bfloat16; torch eager and
#                  compile for the same four
#   efficientnet   seed 002's EfficientNet-B0, 224x224, 1000 classes, Adam: float32 batch 128
#                  (TF32 off and on), mixed_float16 and mixed_bfloat16 batch 256
#   resnet50       ResNet-50 v1.5, 224x224, 1000 classes, Adam, batch 256, the same policies
#   maxbatch-efficientnet, maxbatch-resnet50
#                  the largest batch each policy trains (doubling, then bisection), mixprec and
#                  torch eager
#
# It builds nothing: it expects build-gpu/ from scripts/gpu/build.sh (set SKIP_MIXPREC=1 for the
# torch rows alone). Logs and the result files also go to $OUT when set (the device tool brings
# back what is there): bench-gpu.log, <machine>-mlp.json, <machine>-cnn.json, raw-<stages>.tar.gz.
# The merged files are also kept in $BUILD/bench-results, so consecutive calls on a warm machine
# accumulate their rows (the newest $OUT copy holds them all); copy them into bench/results here.
#
# Settings (environment): BUILD (default build-gpu), MIXPREC (the binary), PYTHON (default python3),
# COMMIT (recorded; default: git, else "unknown"), MACHINE (file prefix; default from the GPU name),
# STEPS_MLP/WARMUP_MLP (50/10), STEPS_CNN/WARMUP_CNN (30/5), COMPILE (1; 0 skips torch.compile),
# CMD_TIMEOUT (300 s per command), BUDGET (540 s for the whole invocation), MAXBATCH_SECONDS (75 per
# policy and system), SKIP_MIXPREC=1, SKIP_TORCH=1, RESULTS (default bench/results).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
BUILD=${BUILD:-build-gpu}
MIXPREC=${MIXPREC:-$root/$BUILD/tools/mixprec/mixprec}
PYTHON=${PYTHON:-python3}
STEPS_MLP=${STEPS_MLP:-50}
WARMUP_MLP=${WARMUP_MLP:-10}
STEPS_CNN=${STEPS_CNN:-30}
WARMUP_CNN=${WARMUP_CNN:-5}
COMPILE=${COMPILE:-1}
CMD_TIMEOUT=${CMD_TIMEOUT:-300}
BUDGET=${BUDGET:-540}
MAXBATCH_SECONDS=${MAXBATCH_SECONDS:-75}
SKIP_MIXPREC=${SKIP_MIXPREC:-0}
SKIP_TORCH=${SKIP_TORCH:-0}
RESULTS=${RESULTS:-$root/bench/results}
peers=$root/bench/peers

stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(mlp efficientnet resnet50)
for s in "${stages[@]}"; do
  case $s in
    mlp | efficientnet | resnet50 | maxbatch-efficientnet | maxbatch-resnet50) ;;
    *)
      echo "bench-gpu: unknown stage '$s'; stages: mlp efficientnet resnet50" \
        "maxbatch-efficientnet maxbatch-resnet50" >&2
      exit 2
      ;;
  esac
done

# Logs: $OUT when the device tool set it, else the build folder (git-ignored).
logdir=${OUT:-$root/$BUILD/bench-logs}
mkdir -p "$logdir"
exec > >(tee -a "$logdir/bench-gpu.log") 2>&1

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench-gpu: no NVIDIA GPU here (nvidia-smi -L failed); run it on the GPU machine" >&2
  exit 1
fi
if [[ "$SKIP_MIXPREC" != 1 && ! -x "$MIXPREC" ]]; then
  echo "bench-gpu: $MIXPREC not found; build it first with scripts/gpu/build.sh (same call," \
    "or a call while the machine is still warm), set MIXPREC, or set SKIP_MIXPREC=1" >&2
  exit 1
fi
if [[ "$SKIP_TORCH" != 1 ]] && ! "$PYTHON" -c "import torch; assert torch.cuda.is_available()"; then
  echo "bench-gpu: $PYTHON cannot import torch with CUDA; set PYTHON or SKIP_TORCH=1" >&2
  exit 1
fi
# The mixprec binary links oneDNN etc. from the private prefix scripts/gpu/build.sh unpacked; only
# its commands get that library path (PyTorch keeps the machine's own libraries).
# MIXPREC_LD (scripts/gpu/acceptance.sh sets it for the binaries it unpacked) overrides both.
mixprec_ld=${MIXPREC_LD:-${LD_LIBRARY_PATH:-}}
if [[ -z "${MIXPREC_LD:-}" && -f "$root/.gpu-deps/env.sh" ]]; then
  # shellcheck disable=SC1091
  mixprec_ld=$(source "$root/.gpu-deps/env.sh" && echo "${LD_LIBRARY_PATH:-}")
fi

device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
if [[ -z "${MACHINE:-}" ]]; then
  case $device in
    *H100*) MACHINE=h100 ;;
    *H200*) MACHINE=h200 ;;
    *) MACHINE=$(echo "$device" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-') ;;
  esac
fi
if [[ -z "${COMMIT:-}" ]]; then
  COMMIT=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ "$COMMIT" != unknown ]] && [[ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    COMMIT="$COMMIT-dirty"
  fi
fi
command_line="COMMIT=$COMMIT STEPS_MLP=$STEPS_MLP WARMUP_MLP=$WARMUP_MLP STEPS_CNN=$STEPS_CNN"
command_line+=" WARMUP_CNN=$WARMUP_CNN COMPILE=$COMPILE scripts/bench-gpu.sh ${stages[*]}"

raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
echo "bench-gpu: $device ($MACHINE), commit $COMMIT, stages: ${stages[*]}, $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv
[[ "$SKIP_TORCH" != 1 ]] && "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"

# ---- running one command: a time limit each, the whole invocation within BUDGET ----

# error_doc FILE SYSTEM MODEL POLICY BATCH TF32 MESSAGE: a result document with one error row, so a
# failed or skipped command still shows in the results.
error_doc() {
  "$PYTHON" - "$@" <<'PY'
import json, sys
path, system, model, policy, batch, tf32, message = sys.argv[1:8]
row = {"system": system, "model": model, "policy": policy, "batch_size": int(batch), "error": message}
if policy == "float32":
    row["tf32"] = tf32 == "1"
json.dump({"workload": {"model": model}, "results": [row]}, open(path, "w"), indent=2)
PY
}

# timed NAME COMMAND...: runs the command with CMD_TIMEOUT unless BUDGET is spent; 0 on success.
timed() {
  local name=$1
  shift
  if ((SECONDS >= BUDGET)); then
    echo "bench-gpu: $name skipped: ${SECONDS}s of the ${BUDGET}s budget used" >&2
    return 3
  fi
  local limit=$CMD_TIMEOUT left=$((BUDGET + 30 - SECONDS))
  ((left < limit)) && limit=$left
  local start=$SECONDS rc
  echo "---- $name (limit ${limit}s): $*"
  timeout --signal=TERM --kill-after=10 "$limit" "$@" 2>&1 | tee "$raw/$name.log"
  rc=${PIPESTATUS[0]}
  echo "---- $name: exit $rc after $((SECONDS - start))s"
  return "$rc"
}

failure() {  # failure RC: the message of an error row
  case $1 in
    3) echo "skipped: the invocation's ${BUDGET}s budget was used up" ;;
    124 | 137) echo "timed out after ${CMD_TIMEOUT}s" ;;
    *) echo "exit $1: $(tail -n 1 "$raw/$2.log" 2>/dev/null | cut -c1-300)" ;;
  esac
}

# mixprec_row MODEL POLICY BATCH TF32 ARGS...: one `mixprec bench` row; TF32 (0/1) sets
# MIXPREC_ALLOW_TF32 (float32 only: it means true FP32 without it).
mixprec_row() {
  local model=$1 policy=$2 batch=$3 tf32=$4
  shift 4
  [[ "$SKIP_MIXPREC" == 1 ]] && return
  local name="mixprec_${model}_${policy}_b${batch}_tf32-${tf32}"
  MIXPREC_ALLOW_TF32=$tf32 timed "$name" env LD_LIBRARY_PATH="$mixprec_ld" "$MIXPREC" bench --device cuda --model "$model" \
    --policy "$policy" --batch-size "$batch" --json "$raw/$name.json" "$@"
  local rc=$?
  if ((rc != 0)) || [[ ! -s "$raw/$name.json" ]]; then
    error_doc "$raw/$name.json" mixprec "$model" "$policy" "$batch" "$tf32" "$(failure "$rc" "$name")"
  fi
}

# torch_rows NAME SCRIPT MODEL POLICIES BATCH SYSTEM ARGS...: a peer invocation; on failure one
# error row per policy.
torch_rows() {
  local name=$1 script=$2 model=$3 policies=$4 batch=$5 system=$6
  shift 6
  [[ "$SKIP_TORCH" == 1 ]] && return
  [[ "$system" == torch-compile && "$COMPILE" != 1 ]] && return
  local flags=()
  [[ "$system" == torch-compile ]] && flags=(--no-eager --compile)
  PYTHONUNBUFFERED=1 timed "$name" "$PYTHON" "$peers/$script" --device cuda --policies "$policies" \
    --batch-size "$batch" --json "$raw/torch_$name.json" "${flags[@]}" "$@"
  local rc=$?
  if ((rc != 0)) || [[ ! -s "$raw/torch_$name.json" ]]; then
    local p i=0
    for p in ${policies//,/ }; do
      error_doc "$raw/torch_${name}_error$((i++)).json" "$system" "$model" "$p" "$batch" 0 \
        "$(failure "$rc" "$name")"
    done
    rm -f "$raw/torch_$name.json"
  fi
}

# ---- stages ----

stage_mlp() {
  local common=(--units 4096 --optimizer rmsprop --steps "$STEPS_MLP" --warmup "$WARMUP_MLP")
  mixprec_row mlp float32 8192 0 "${common[@]}"
  mixprec_row mlp float32 8192 1 "${common[@]}"
  mixprec_row mlp mixed_float16 8192 0 "${common[@]}"
  mixprec_row mlp mixed_bfloat16 8192 0 "${common[@]}"
  local peer=(--units 4096 --steps "$STEPS_MLP" --warmup "$WARMUP_MLP")
  torch_rows mlp_eager torch_mlp.py mlp float32,mixed_float16,mixed_bfloat16 8192 torch-eager \
    --tf32 both "${peer[@]}"
  torch_rows mlp_compile torch_mlp.py mlp float32,mixed_float16,mixed_bfloat16 8192 torch-compile \
    --tf32 both "${peer[@]}"
}

# stage_cnn MODEL FLOAT32_BATCH MIXED_BATCH
stage_cnn() {
  local model=$1 fp32_batch=$2 mixed_batch=$3
  local common=(--input-size 224 --classes 1000 --optimizer adam --steps "$STEPS_CNN" --warmup "$WARMUP_CNN")
  mixprec_row "$model" float32 "$fp32_batch" 0 "${common[@]}"
  mixprec_row "$model" mixed_float16 "$mixed_batch" 0 "${common[@]}"
  mixprec_row "$model" mixed_bfloat16 "$mixed_batch" 0 "${common[@]}"
  mixprec_row "$model" float32 "$fp32_batch" 1 "${common[@]}"
  local peer=(--model "$model" --input-size 224 --classes 1000 --steps "$STEPS_CNN" --warmup "$WARMUP_CNN")
  torch_rows "${model}_mixed_eager" torch_cnn.py "$model" mixed_float16,mixed_bfloat16 "$mixed_batch" \
    torch-eager "${peer[@]}"
  torch_rows "${model}_float32_eager" torch_cnn.py "$model" float32 "$fp32_batch" torch-eager \
    --tf32 both "${peer[@]}"
  # One process per compiled policy: a slow compilation costs one row, not three.
  torch_rows "${model}_fp16_compile" torch_cnn.py "$model" mixed_float16 "$mixed_batch" torch-compile "${peer[@]}"
  torch_rows "${model}_bf16_compile" torch_cnn.py "$model" mixed_bfloat16 "$mixed_batch" torch-compile "${peer[@]}"
  torch_rows "${model}_float32_compile" torch_cnn.py "$model" float32 "$fp32_batch" torch-compile "${peer[@]}"
}

# mixprec_max_batch MODEL POLICY START: doubling from START until a batch fails, then bisection to
# within max(8, 1/16); each probe is `mixprec bench --steps 1 --warmup 1`.
mixprec_max_batch() {
  local model=$1 policy=$2 b=$3
  [[ "$SKIP_MIXPREC" == 1 ]] && return
  local lo=0 hi="" why="" rc deadline=$((SECONDS + MAXBATCH_SECONDS)) limit=16384 name
  probe() {
    name="probe_${model}_${policy}_b$1"
    MIXPREC_ALLOW_TF32=0 timed "$name" env LD_LIBRARY_PATH="$mixprec_ld" "$MIXPREC" bench --device cuda --model "$model" --policy "$policy" \
      --batch-size "$1" --input-size 224 --classes 1000 --steps 1 --warmup 1 >/dev/null
  }
  while [[ -z "$hi" ]] && ((b <= limit && SECONDS < deadline)); do
    if probe "$b"; then
      lo=$b b=$((2 * b))
    else
      rc=$? hi=$b
      why=$(failure "$rc" "$name")
    fi
  done
  while [[ -n "$hi" ]] && ((hi - lo > (lo / 16 > 8 ? lo / 16 : 8) && SECONDS < deadline)); do
    local mid=$(((lo + hi) / 2 / 8 * 8))
    ((mid <= lo)) && mid=$(((lo + hi) / 2))
    if probe "$mid"; then
      lo=$mid
    else
      rc=$? hi=$mid
      why=$(failure "$rc" "$name")
    fi
  done
  "$PYTHON" - "$raw/maxbatch_mixprec_${model}_${policy}.json" "$model" "$policy" "$lo" "$hi" "$why" \
    "doubling from $3, then bisection; each probe: mixprec bench --steps 1 --warmup 1; ${MAXBATCH_SECONDS}s budget" <<'PY'
import json, sys
path, model, policy, lo, hi, why, how = sys.argv[1:8]
row = {"system": "mixprec", "model": model, "policy": policy, "max_batch_size": int(lo),
       "first_failing_batch_size": int(hi) if hi else None, "first_failure": why or None,
       "max_batch_search": how}
if not hi:
    row["search_stopped"] = "time budget or batch limit reached before any batch failed"
if policy == "float32":
    row["tf32"] = False
json.dump({"workload": {"model": model}, "results": [row]}, open(path, "w"), indent=2)
PY
}

stage_maxbatch() {
  local model=$1
  for policy in float32 mixed_float16 mixed_bfloat16; do
    mixprec_max_batch "$model" "$policy" 128
  done
  [[ "$SKIP_TORCH" == 1 ]] && return
  local name="maxbatch_torch_$model"
  PYTHONUNBUFFERED=1 timed "$name" "$PYTHON" "$peers/torch_cnn.py" --device cuda \
    --model "$model" --input-size 224 --classes 1000 --batch-size 128 --find-max-batch \
    --max-batch-seconds "$MAXBATCH_SECONDS" --json "$raw/torch_maxbatch_$model.json"
  local rc=$?
  if ((rc != 0)) || [[ ! -s "$raw/torch_maxbatch_$model.json" ]]; then
    rm -f "$raw/torch_maxbatch_$model.json"
    error_doc "$raw/torch_maxbatch_${model}_error.json" torch-eager "$model" all 0 0 \
      "largest-batch search: $(failure "$rc" "$name")"
  fi
}

for s in "${stages[@]}"; do
  echo "==== stage $s (${SECONDS}s elapsed)"
  case $s in
    mlp) stage_mlp ;;
    efficientnet) stage_cnn efficientnet-b0 128 256 ;;
    resnet50) stage_cnn resnet50 256 256 ;;
    maxbatch-efficientnet) stage_maxbatch efficientnet-b0 ;;
    maxbatch-resnet50) stage_maxbatch resnet50 ;;
  esac
done

# ---- merge into bench/results/<machine>-{mlp,cnn}.json ----
# The base is the newest copy: $BUILD/bench-results (kept on a warm machine between device calls)
# else bench/results; rows with the same key are replaced, others kept.
persist=$root/$BUILD/bench-results
mkdir -p "$RESULTS" "$persist"
"$PYTHON" - "$raw" "$RESULTS" "$persist" "$MACHINE" "$device" "$COMMIT" "$command_line" <<'PY'
import glob, json, os, re, sys, time
raw, results, persist, machine, device, commit, command = sys.argv[1:8]
date = time.strftime("%Y-%m-%d", time.gmtime())
# Dense peaks of the H100 SXM / H200 (DESIGN §5), TFLOP/s, by how a row computes.
peaks = {"16-bit": 989.0, "tf32": 495.0, "float32": 67.0} if re.search(r"H100|H200", device) else None

docs = []
for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
    with open(path) as f:
        d = json.load(f)
    name = os.path.basename(path)
    work = d.get("workload", {})
    for row in d.get("results", []):
        row.setdefault("model", work.get("model"))
        if "input_size" in work:
            row.setdefault("input_size", work["input_size"])
        m = re.match(r"mixprec_.*_tf32-([01])\.json$", name)
        if row.get("system") == "mixprec" and row.get("policy") == "float32" and m:
            row.setdefault("tf32", m.group(1) == "1")
    docs.append((name, d))

def key(row):
    kind = "max_batch" if "max_batch_size" in row else "steps"
    return (kind, row.get("system"), row.get("model"), row.get("policy"), bool(row.get("tf32")),
            row.get("batch_size"), row.get("input_size"))

order = {"mixprec": 0, "torch-eager": 1, "torch-compile": 2}
policy_order = {"float32": 0, "mixed_float16": 1, "mixed_bfloat16": 2}

def sort_key(row):
    return ("max_batch_size" in row, row.get("model") or "", policy_order.get(row.get("policy"), 9),
            bool(row.get("tf32")), order.get(row.get("system"), 9), row.get("batch_size") or 0)

for bench, is_mine in (("mlp", lambda m: m == "mlp"), ("cnn", lambda m: m != "mlp")):
    mine = [(n, d) for n, d in docs if is_mine(d.get("workload", {}).get("model"))]
    if not mine:
        continue
    fname = "%s-%s.json" % (machine, bench)
    base = None
    for folder in (persist, results):
        p = os.path.join(folder, fname)
        if os.path.exists(p):
            with open(p) as f:
                base = json.load(f)
            break
    if base is None:
        base = {"device": device, "commit": commit, "date": date, "command": command, "workload": {},
                "results": []}
    # Workloads: one per model; the mixprec document's, the peer's parameter and FLOP counts added.
    models = base["workload"].setdefault("models", {}) if bench == "cnn" else None
    for n, d in mine:
        w = dict(d.get("workload", {}))
        model = w.get("model")
        if bench == "mlp":
            if n.startswith("mixprec"):
                for k in ("model", "units", "hidden_layers", "params", "optimizer", "steps", "warmup", "data"):
                    if k in w:
                        base["workload"][k] = w[k]
                if "batch_size" in w:
                    base["workload"]["batch_size"] = w["batch_size"]
            elif "torch_version" in d:
                base["workload"]["torch_version"] = d["torch_version"]
            continue
        if "params" not in w:
            continue  # an error row's or a largest-batch search's document
        entry = models.setdefault(model, {})
        if n.startswith("mixprec"):
            for k in ("input_size", "channels", "classes", "optimizer", "steps", "warmup", "data", "pipeline"):
                if k in w:
                    entry[k] = w[k]
            entry["mixprec_params"] = w["params"]
        elif n.startswith("torch"):
            entry["torch_version"] = d.get("torch_version")
            entry["torch_params"] = w["params"]
            entry["torch_params_with_bn_moving_stats"] = w["params_with_bn_moving_stats"]
            entry["forward_flops_per_sample"] = w["forward_flops_per_sample"]
            entry["torch_cudnn_benchmark"] = w.get("cudnn_benchmark")
            if "efficientnet_scaling" in w:
                entry["torch_efficientnet_scaling"] = w["efficientnet_scaling"]
    new_rows = [r for _, d in mine for r in d.get("results", [])]
    # mixprec's CNN rows carry no TFLOP/s: use the peer's FLOP count when the two networks have the
    # same parameter count (Keras count_params, BatchNorm moving statistics included).
    if bench == "cnn":
        for r in new_rows:
            e = models.get(r.get("model"), {})
            if (r.get("system") == "mixprec" and "tflops" not in r and "step_ms" in r
                    and e.get("forward_flops_per_sample")
                    and e.get("mixprec_params") == e.get("torch_params_with_bn_moving_stats")):
                r["tflops"] = 3.0 * e["forward_flops_per_sample"] * r["batch_size"] / (r["step_ms"]["median"] / 1e3) / 1e12
                r["tflops_source"] = "3 x forward FLOPs counted on the PyTorch peer's network (same parameter count)"
    if peaks:
        for r in new_rows:
            if "tflops" in r:
                mode = "16-bit" if r["policy"] != "float32" else ("tf32" if r.get("tf32") else "float32")
                r["fraction_of_peak"] = r["tflops"] / peaks[mode]
    keys = {key(r) for r in new_rows}
    rows = [r for r in base.get("results", []) if key(r) not in keys] + new_rows
    base["results"] = sorted(rows, key=sort_key)
    base.update({"device": device, "commit": commit, "date": date, "command": command})
    base.setdefault("runs", []).append({"commit": commit, "date": date, "command": command,
                                        "rows": len(new_rows)})
    base["notes"] = {
        "step_ms": "wall time of one training step (forward, loss, backward, loss scaling, optimizer "
                   "update), synchronised; median over the timed steps after warmup",
        "tf32": "float32 rows: false = true FP32 (torch allow_tf32 off; mixprec default), true = TF32 "
                "allowed (torch allow_tf32 on; MIXPREC_ALLOW_TF32=1)",
        "tflops": "mlp: 6 * batch * Dense kernel elements / step; CNNs: 3 * forward convolution and "
                  "dense FLOPs (2 per multiply-add) * batch / step",
        "fraction_of_peak": "tflops over the dense peak of the compute mode: %s TFLOP/s (16-bit, TF32, FP32)"
                            % ("989, 495, 67" if peaks else "unknown for this device"),
        "peak_memory_bytes": "mixprec: mixprec::memory_stats peak tensor bytes; torch: "
                             "torch.cuda.max_memory_allocated (peak_reserved_bytes: the caching "
                             "allocator's reservation)",
        "compile_s": "torch-compile rows: the first step, which compiles forward and backward; "
                     "excluded from step_ms",
        "torch": "eager: torch.autocast (+ GradScaler for float16), parameters float32; compile: "
                 "torch.compile(forward + loss, dynamic=False), backward and the optimizer eager; "
                 "CNNs channels_last with cudnn.benchmark and fused Adam",
        "host_syncs_per_step": "mixprec GPU rows: mixprec::cuda::host_synchronizations() (the "
                               "host's waits for the GPU: stream or event synchronisations, "
                               "blocking copies) over the timed steps / steps; the step is "
                               "train_on_batch, which returns the loss as a host number, so one "
                               "device-to-host readback per step is part of it",
        "max_batch_size": "largest batch that trained 2 steps (torch eager) or 1 warmup + 1 step "
                          "(mixprec); the search doubles, then bisects to within max(8, 1/16)",
    }
    text = json.dumps(base, indent=2) + "\n"
    for folder in (results, persist) + ((os.environ["OUT"],) if os.environ.get("OUT") else ()):
        with open(os.path.join(folder, fname), "w") as f:
            f.write(text)
    print("bench-gpu: %d new rows merged into %s (%d rows)" % (len(new_rows), os.path.join(results, fname), len(rows)))
PY
merge_rc=$?

# The summary table, last in the log (the device tool's reply shows the end of the output).
"$PYTHON" - "$RESULTS" "$MACHINE" <<'PY'
import json, os, sys
results, machine = sys.argv[1:3]
for bench in ("mlp", "cnn"):
    p = os.path.join(results, "%s-%s.json" % (machine, bench))
    if not os.path.exists(p):
        continue
    print("== %s" % p)
    for r in json.load(open(p))["results"]:
        name = r["policy"] + ("+tf32" if r.get("tf32") else "")
        head = "%-15s %-14s %-19s" % (r.get("model"), r["system"], name)
        if "error" in r:
            print(head, "ERROR", r["error"][:100])
        elif "unsupported" in r:
            print(head, "unsupported")
        elif "max_batch_size" in r:
            print(head, "largest batch %s (first failing %s)" % (r["max_batch_size"], r.get("first_failing_batch_size")))
        else:
            print(head, "b%-5d %9.2f ms %10.1f /s %7s TFLOP/s %6.2f GiB%s" % (
                r["batch_size"], r["step_ms"]["median"], r["samples_per_s"],
                "%.1f" % r["tflops"] if "tflops" in r else "-", r["peak_memory_bytes"] / 2**30,
                "  compile %.0fs" % r["compile_s"] if "compile_s" in r else ""))
PY
if [[ -n "${OUT:-}" ]]; then
  tar -czf "$OUT/raw-$(IFS=-; echo "${stages[*]}").tar.gz" -C "$raw" .
fi
echo "bench-gpu: done in ${SECONDS}s"
exit "$merge_rc"
