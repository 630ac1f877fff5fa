#!/usr/bin/env bash
# Run THERE (the GPU machine): issue 13's checks from the binaries scripts/gpu/pack-prebuilt.sh
# packed (.gpu-carry/), in one device call: what the machine has, `mixprec info`, the GPU test suite
# (the tests `ctest -L gpu` runs: the one binary mixprec_gpu_tests, MIXPREC_REQUIRE_GPU=1 so a test
# that finds no GPU fails), compute-sanitizer memcheck and racecheck over it, the seed MLP and cnn
# trained on Fashion-MNIST on the GPU, and scripts/bench-gpu.sh. Each stage has its own time
# limit and the whole run stops starting stages after DEADLINE seconds; logs, JSON and the test
# XML go to $OUT (or ./gpu-out).
#
#   scripts/gpu/acceptance.sh probe tests smoke
#   DEADLINE=420 scripts/gpu/acceptance.sh tests memcheck racecheck train bench:mlp
#
# Stages: probe, tests, memcheck, racecheck, smoke (one short training run and one bench row),
# train (mlp x 3 policies, cnn x 3 policies; EPOCHS_MLP/EPOCHS_CNN), bench:STAGES (bench-gpu.sh
# with those comma-separated stages). Settings: DEADLINE (540), TESTS_TIMEOUT (150),
# SANITIZER_TIMEOUT (90), SANITIZER_FILTER (gtest filter, default all), GTEST_FILTER.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
carry=${CARRY:-$root/.gpu-carry}
out=${OUT:-$root/gpu-out}
mp=${MP_DIR:-/tmp/mixprec-prebuilt}
DEADLINE=${DEADLINE:-540}
mkdir -p "$out"
exec > >(tee -a "$out/acceptance.log") 2>&1

# CUDA libraries: the toolkit's, then any other copy on the machine (PyTorch's wheels carry cuDNN
# and NCCL), first match of each.
cuda_dirs=()
for lib in libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
  path=$(ls /usr/local/cuda/lib64/$lib /usr/local/cuda/targets/x86_64-linux/lib/$lib 2>/dev/null | head -n1)
  [[ -z "$path" ]] && path=$(find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -n1)
  if [[ -n "$path" ]]; then
    d=$(dirname "$path")
    [[ " ${cuda_dirs[*]} " == *" $d "* ]] || cuda_dirs+=("$d")
  else
    echo "acceptance: $lib not found on this machine"
  fi
done
rm -rf "$mp" && mkdir -p "$mp" && tar -C "$mp" -xJf "$carry/prebuilt.tar.xz" || exit 1
MIXPREC_LD=$mp/lib$(printf ':%s' "${cuda_dirs[@]}")
export MIXPREC_LD
data=$carry/fashion-mnist
run_mp=(env LD_LIBRARY_PATH="$MIXPREC_LD" MIXPREC_REQUIRE_GPU=1 MIXPREC_FASHION_MNIST_DIR="$data")
# stage NAME LIMIT COMMAND...: runs it unless the deadline passed; prints the exit code and time.
stage() {
  local name=$1 limit=$2
  shift 2
  if ((SECONDS >= DEADLINE)); then echo "==== $name: SKIPPED (deadline ${DEADLINE}s reached)"; return; fi
  ((SECONDS + limit > DEADLINE + 20)) && limit=$((DEADLINE + 20 - SECONDS))
  echo "==== $name (limit ${limit}s, at ${SECONDS}s): $*"
  local start=$SECONDS
  timeout --signal=TERM --kill-after=5 "$limit" "$@"
  echo "==== $name: exit $? after $((SECONDS - start))s"
}
echo "acceptance: commit $(cat "$mp/commit"), binaries from .gpu-carry; CUDA libraries from ${cuda_dirs[*]}"
tests=$mp/bin/mixprec_gpu_tests
cli=$mp/bin/mixprec
filter=${GTEST_FILTER:-*}

train_all() {  # the seed models on Fashion-MNIST, same seed as the CPU runs
  for policy in float32 mixed_float16 mixed_bfloat16; do
    stage "train mlp $policy" 60 "${run_mp[@]}" "$cli" train --model mlp --dataset fashion_mnist --device cuda \
      --policy "$policy" --units 4096 --batch-size 8192 --epochs "${EPOCHS_MLP:-5}" --seed 42 \
      --metrics-json "$out/train-mlp-$policy.json"
  done
  for policy in float32 mixed_float16 mixed_bfloat16; do
    stage "train cnn $policy" 90 "${run_mp[@]}" "$cli" train --model cnn --dataset fashion_mnist --device cuda \
      --policy "$policy" --epochs "${EPOCHS_CNN:-2}" --seed 42 --metrics-json "$out/train-cnn-$policy.json"
  done
}

for s in "$@"; do
  case $s in
    probe)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      command -v nvcc compute-sanitizer ncu python3
      python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
      env LD_LIBRARY_PATH="$MIXPREC_LD" ldd "$tests" | grep -E "not found|cud|nccl|dnnl"
      stage info 30 "${run_mp[@]}" "$cli" info
      ;;
    tests)
      stage "gpu tests" "${TESTS_TIMEOUT:-150}" "${run_mp[@]}" "$tests" --gtest_filter="$filter" \
        --gtest_output="xml:$out/gpu-tests.xml"
      ;;
    memcheck | racecheck)
      stage "compute-sanitizer $s" "${SANITIZER_TIMEOUT:-90}" "${run_mp[@]}" compute-sanitizer --tool "$s" \
        --error-exitcode 86 --print-limit 20 "$tests" --gtest_filter="${SANITIZER_FILTER:-*}" \
        --gtest_output="xml:$out/$s-tests.xml"
      ;;
    smoke)
      stage "smoke train" 60 "${run_mp[@]}" "$cli" train --model mlp --dataset fashion_mnist --device cuda \
        --policy mixed_float16 --epochs 1 --metrics-json "$out/smoke-train.json"
      stage "smoke bench" 60 "${run_mp[@]}" "$cli" bench --model mlp --device cuda --policy mixed_float16 \
        --units 4096 --batch-size 8192 --optimizer rmsprop --steps 20 --warmup 5 --json "$out/smoke-bench.json"
      ;;
    train) train_all ;;
    bench:*)
      left=$((DEADLINE - SECONDS))
      ((left < 30)) && { echo "==== bench: SKIPPED (deadline)"; continue; }
      IFS=, read -r -a bs <<<"${s#bench:}"
      MIXPREC="$cli" BUDGET=$((left - 20)) BUILD=${BUILD:-build-gpu} "$root/scripts/bench-gpu.sh" "${bs[@]}"
      ;;
    *) echo "acceptance: unknown stage $s" ;;
  esac
done
echo "acceptance: done at ${SECONDS}s"
