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
#   scripts/gpu/acceptance.sh mp:resnet50:mixed_float16:256:find torch:resnet50:mixed_float16:256
#
# Stages: full (every stage below that the GPU measurement needs, in order of importance), probe,
# tests, tests:find (the same with MIXPREC_CUDNN_BENCHMARK=1), memcheck, racecheck, smoke (one short training run and one bench row),
# train (mlp 4096 units batch 8192 and cnn, three policies each; EPOCHS_MLP/EPOCHS_CNN),
# train512 (the CPU's seed MLP: 512 units, batch 256, 5 epochs, three policies), interop
# (scripts/gpu/python_interop.py: TensorBoard's EventAccumulator, Hugging Face safetensors), tbpack
# (TensorBoard's installed files as files/tensorboard-site.tar.xz, for
# scripts/tensorboard-screenshot.sh on a machine with a browser),
# bench:STAGES (scripts/bench-gpu.sh with those comma-separated stages, merged into
# bench/results/<machine>-*.json), mp:MODEL:POLICY:BATCH[:find] (one `mixprec bench` row; find =
# MIXPREC_CUDNN_BENCHMARK=1; MODEL a GPT preset such as gpt2 runs SEQ_GPT = 1024 tokens with
# AdamW), torch:MODEL:POLICIES:BATCH (the PyTorch eager peer, no compile; for a GPT preset
# bench/peers/torch_gpt.py, eager with scaled_dot_product_attention and torch.compile),
# ncu:MODEL:POLICY:BATCH (Nsight Compute's per-kernel time summary of one warm-up and two steps),
# attention (bench/attention_bench --device cuda, the fused CUDA kernels against the composition,
# and bench/peers/torch_attention.py, PyTorch's scaled_dot_product_attention, at one GPT-2 layer:
# batch 8, T = ATTN_T (1024; attention:T for another T), 12 heads of 64, causal;
# attention_bench must be in the pack),
# graphs (issue 28: bench/graph_step_bench, each row eager against CUDA graphs in one call: the
# seed MLP at batch 256 and 1024, EfficientNet-B0 at 32, gpt-nano at 8; graph_step_bench must be
# in the pack), graph:MODEL:BATCH[:OPTIMIZER] (one such row).
# Settings: DEADLINE (540), TESTS_TIMEOUT (150), SANITIZER_TIMEOUT (90), SANITIZER_FILTER (gtest
# filter; default every test but the allocator's intended out-of-memory one, with the NCCL tests
# in a second run that does not report CUDA API return codes: see the memcheck stage), GTEST_FILTER,
# STEPS_CNN/WARMUP_CNN (20/5), SEQ_GPT/STEPS_GPT/WARMUP_GPT (1024/20/5), ROW_TIMEOUT (90), TAR (the packed binaries in .gpu-carry, default
# prebuilt.tar.xz) and TAG (names this run's log and tarball, for an A/B of two TARs in one call).
# Row, training and profile outputs are packed into $OUT/results.tar.gz at the end (the device
# tool brings back at most 8 files).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
carry=${CARRY:-$root/.gpu-carry}
out=${OUT:-$root/gpu-out}
mp=${MP_DIR:-/tmp/mixprec-prebuilt}
DEADLINE=${DEADLINE:-540}
mkdir -p "$out/files"
files=$out/files
exec > >(tee -a "$out/acceptance${TAG:+-$TAG}.log") 2>&1

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
rm -rf "$mp" && mkdir -p "$mp" && tar -C "$mp" -xJf "$carry/${TAR:-prebuilt.tar.xz}" || exit 1
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
export COMMIT=${COMMIT:-$(cat "$mp/commit")}
echo "acceptance: commit $(cat "$mp/commit"), binaries from .gpu-carry; CUDA libraries from ${cuda_dirs[*]}"
tests=$mp/bin/mixprec_gpu_tests
cli=$mp/bin/mixprec
# The CLI with its library path, for programs that run it (python_interop.py) without that path
# in their own environment.
wrapped=$mp/bin/mixprec-wrapped
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$MIXPREC_LD" "$cli" >"$wrapped"
chmod +x "$wrapped"
filter=${GTEST_FILTER:-*}

train_all() {  # the seed models on Fashion-MNIST, same seed as the CPU runs
  for policy in float32 mixed_float16 mixed_bfloat16; do
    stage "train mlp $policy" 60 "${run_mp[@]}" "$cli" train --model mlp --dataset fashion_mnist --device cuda \
      --policy "$policy" --units 4096 --batch-size 8192 --epochs "${EPOCHS_MLP:-5}" --seed 42 \
      --metrics-json "$files/train-mlp-$policy.json"
  done
  for policy in float32 mixed_float16 mixed_bfloat16; do
    stage "train cnn $policy" 90 "${run_mp[@]}" "$cli" train --model cnn --dataset fashion_mnist --device cuda \
      --policy "$policy" --epochs "${EPOCHS_CNN:-2}" --seed 42 --metrics-json "$files/train-cnn-$policy.json"
  done
}

train512() {  # the seed MLP as the CPU trains it by default
  for policy in float32 mixed_float16 mixed_bfloat16; do
    stage "train mlp512 $policy" 60 "${run_mp[@]}" "$cli" train --model mlp --dataset fashion_mnist \
      --device cuda --policy "$policy" --units 512 --batch-size 256 --epochs 5 --seed 42 \
      --metrics-json "$files/train-mlp512-$policy.json"
  done
}

# mp_row MODEL POLICY BATCH [find]: one `mixprec bench` row into $files/mp-....json.
mp_row() {
  local model=$1 policy=$2 batch=$3 find=${4:-} args
  if [[ "$model" == mlp ]]; then
    args=(--units 4096 --optimizer rmsprop --steps 50 --warmup 10)
  elif [[ "$model" == gpt* ]]; then  # a preset (gpt2, gpt-mini, ...) at SEQ_GPT tokens, AdamW
    args=(--seq-len "${SEQ_GPT:-1024}" --optimizer adamw --steps "${STEPS_GPT:-20}" --warmup "${WARMUP_GPT:-5}")
  else
    args=(--input-size 224 --classes 1000 --optimizer adam --steps "${STEPS_CNN:-20}" --warmup "${WARMUP_CNN:-5}")
  fi
  local tag="$model-$policy-b$batch${find:+-find}"
  stage "mixprec bench $tag" "${ROW_TIMEOUT:-90}" "${run_mp[@]}" MIXPREC_CUDNN_BENCHMARK=$([[ -n "$find" ]] && echo 1 || echo 0) \
    "$cli" bench --device cuda --model "$model" --policy "$policy" --batch-size "$batch" "${args[@]}" \
    --json "$files/mp-$tag.json"
}

# full: the whole GPU measurement (DESIGN §5's rows, the GPU suite and its sanitizers), most
# important first, so that DEADLINE cuts the least important; one device call may not reach the
# end, the next call starts where the log says it stopped.
full_stages=(probe tests memcheck racecheck bench:mlp
  mp:efficientnet-b0:mixed_float16:256 torch:efficientnet-b0:mixed_float16:256
  mp:efficientnet-b0:float32:128 mp:resnet50:mixed_float16:256 torch:resnet50:mixed_float16:256
  mp:resnet50:float32:256 torch:resnet50:float32:256 mp:gpt2:mixed_bfloat16:8
  torch:gpt2:mixed_bfloat16:8 attention:1024 attention:4096 graphs ncu:resnet50:mixed_float16:64
  ncu:mlp:mixed_float16:8192)
stages=()
for s in "$@"; do
  if [[ "$s" == full ]]; then stages+=("${full_stages[@]}"); else stages+=("$s"); fi
done
for s in "${stages[@]}"; do
  case $s in
    probe)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      command -v nvcc compute-sanitizer ncu python3
      python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
      env LD_LIBRARY_PATH="$MIXPREC_LD" ldd "$tests" | grep -E "not found|cud|nccl|dnnl"
      stage info 30 "${run_mp[@]}" "$cli" info
      ;;
    tests | tests:find)  # tests:find: with cuDNN's timed algorithm search (MIXPREC_CUDNN_BENCHMARK=1)
      find=0
      [[ "$s" == tests:find ]] && find=1
      stage "gpu $s" "${TESTS_TIMEOUT:-150}" "${run_mp[@]}" MIXPREC_CUDNN_BENCHMARK=$find "$tests" \
        --gtest_filter="$filter" --gtest_output="xml:$files/gpu-${s/:/-}.xml"
      ;;
    memcheck | racecheck)
      # The NCCL tests run apart: inside ncclCommInitRank the system NCCL probes its own kernels with
      # cudaFuncGetAttributes, gets "no kernel image" for some and handles it (the tests pass), but
      # compute-sanitizer counts each such return code as an error (H100, session 25: 4). Their
      # run keeps every memory check and stops only the report of CUDA API return codes
      # (--report-api-errors no); every other test runs with the default reporting.
      stage "compute-sanitizer $s" "${SANITIZER_TIMEOUT:-90}" "${run_mp[@]}" compute-sanitizer --tool "$s" \
        --error-exitcode 86 --print-limit 20 "$tests" \
        --gtest_filter="${SANITIZER_FILTER:-*:-GpuAllocatorTest.OutOfMemoryIsADeviceErrorWithAdvice:NcclCollectives.*}" \
        --gtest_output="xml:$files/$s-tests.xml"
      [[ -z "${SANITIZER_FILTER:-}" ]] &&
        stage "compute-sanitizer $s (NCCL, API return codes not reported)" "${SANITIZER_TIMEOUT:-90}" \
          "${run_mp[@]}" compute-sanitizer --tool "$s" --report-api-errors no --error-exitcode 86 \
          --print-limit 20 "$tests" --gtest_filter='NcclCollectives.*' --gtest_output="xml:$files/$s-nccl.xml"
      ;;
    smoke)
      stage "smoke train" 60 "${run_mp[@]}" "$cli" train --model mlp --dataset fashion_mnist --device cuda \
        --policy mixed_float16 --epochs 1 --metrics-json "$files/smoke-train.json"
      stage "smoke bench" 60 "${run_mp[@]}" "$cli" bench --model mlp --device cuda --policy mixed_float16 \
        --units 4096 --batch-size 8192 --optimizer rmsprop --steps 20 --warmup 5 --json "$files/smoke-bench.json"
      ;;
    train) train_all ;;
    interop)  # issue 11: TensorBoard's EventAccumulator and Hugging Face safetensors
      stage "python interop" 120 env MIXPREC_FASHION_MNIST_DIR="$data" python3 \
        "$root/scripts/gpu/python_interop.py" "$wrapped" "$files/interop"
      ;;
    train512) train512 ;;
    tbpack)  # issue 11: TensorBoard and the protobuf it was generated for (newer than Debian's;
      # abi3 wheels), for scripts/tensorboard-screenshot.sh on the CPU machine
      stage "pack tensorboard" 60 bash -c 'site=$(python3 -c "import os, tensorboard; print(os.path.dirname(os.path.dirname(tensorboard.__file__)))") &&
        cd "$site" && python3 -c "import tensorboard; print(\"tensorboard\", tensorboard.__version__)" &&
        tar -cJf "$1/tensorboard-site.tar.xz" tensorboard tensorboard-*.dist-info google/protobuf \
          $(ls -d protobuf-*.dist-info tensorboard_data_server tensorboard_data_server-*.dist-info 2>/dev/null) &&
        ls -la "$1/tensorboard-site.tar.xz"' _ "$files"
      ;;
    mp:*)
      IFS=: read -r _ m p b f <<<"$s"
      mp_row "$m" "$p" "$b" "$f"
      ;;
    torch:gpt*)  # the GPT peer: eager with scaled_dot_product_attention, and torch.compile
      IFS=: read -r _ m p b <<<"$s"
      stage "torch gpt $m $p b$b" "${ROW_TIMEOUT:-180}" env PYTHONUNBUFFERED=1 python3 "$root/bench/peers/torch_gpt.py" \
        --device cuda --preset "$m" --seq-len "${SEQ_GPT:-1024}" --policies "$p" --batch-size "$b" --compile \
        --steps "${STEPS_GPT:-20}" --warmup "${WARMUP_GPT:-5}" --json "$files/torch-$m-${p//,/+}-b$b.json"
      ;;
    torch:*)
      IFS=: read -r _ m p b <<<"$s"
      stage "torch eager $m $p b$b" "${ROW_TIMEOUT:-90}" env PYTHONUNBUFFERED=1 python3 "$root/bench/peers/torch_cnn.py" \
        --device cuda --model "$m" --policies "$p" --batch-size "$b" --input-size 224 --classes 1000 \
        --steps "${STEPS_CNN:-20}" --warmup "${WARMUP_CNN:-5}" --json "$files/torch-$m-${p//,/+}-b$b.json"
      ;;
    ncu:*)
      IFS=: read -r _ m p b <<<"$s"
      margs=(--input-size 224 --classes 1000 --optimizer adam)
      [[ "$m" == mlp ]] && margs=(--units 4096 --optimizer rmsprop)
      stage "ncu $m $p b$b" "${ROW_TIMEOUT:-90}" "${run_mp[@]}" ncu --metrics gpu__time_duration.sum \
        --print-summary per-kernel --csv --log-file "$files/ncu-$m-$p-b$b.csv" "$cli" bench --device cuda \
        --model "$m" --policy "$p" --batch-size "$b" "${margs[@]}" --steps 2 --warmup 1
      ;;
    attention | attention:*)  # the fused CUDA attention kernels and PyTorch's SDPA on one GPT-2
      # layer; attention:T at sequence length T instead of ATTN_T
      t=${ATTN_T:-1024}
      [[ "$s" == attention:* ]] && t=${s#attention:}
      shape=(--batch 8 --length "$t" --heads 12 --dim 64 --repeats 10)
      if [[ -x "$mp/bin/attention_bench" ]]; then
        stage "attention bench T=$t" "${ROW_TIMEOUT:-90}" bash -c '"${@:2}" >"$1"' _ "$files/attention-mixprec-t$t.jsonl" \
          "${run_mp[@]}" "$mp/bin/attention_bench" --device cuda "${shape[@]}"
      else
        echo "==== attention bench: SKIPPED (no attention_bench in the pack: build it, then pack-prebuilt.sh)"
      fi
      stage "attention torch T=$t" "${ROW_TIMEOUT:-90}" bash -c '"${@:2}" >"$1"' _ "$files/attention-torch-t$t.jsonl" \
        python3 "$root/bench/peers/torch_attention.py" --device cuda "${shape[@]}"
      cat "$files"/attention-*-t"$t".jsonl 2>/dev/null
      ;;
    graphs | graph:*)  # issue 28: eager vs CUDA graph replay of the training step, one call a row
      if [[ ! -x "$mp/bin/graph_step_bench" ]]; then
        echo "==== graphs: SKIPPED (no graph_step_bench in the pack: build it, then pack-prebuilt.sh)"
        continue
      fi
      if [[ "$s" == graphs ]]; then
        rows=(mlp:256 mlp:1024 efficientnet-b0:32 gpt:8)
      else
        rows=("${s#graph:}")
      fi
      for row in "${rows[@]}"; do
        IFS=: read -r m b o <<<"$row"
        stage "graphs $m b$b${o:+ $o}" "${ROW_TIMEOUT:-90}" "${run_mp[@]}" "$mp/bin/graph_step_bench" \
          --model "$m" --batch-size "$b" --graphs both --policy mixed_float16 ${o:+--optimizer "$o"} \
          --steps "${STEPS_GRAPHS:-200}" --warmup "${WARMUP_GRAPHS:-20}" --steps-per-execution 16 \
          --json "$files/graphs-$m-b$b${o:+-$o}.json"
      done
      ;;
    bench:*)
      left=$((DEADLINE - SECONDS))
      ((left < 30)) && { echo "==== bench: SKIPPED (deadline)"; continue; }
      IFS=, read -r -a bs <<<"${s#bench:}"
      MIXPREC="$cli" BUDGET=$((left - 20)) BUILD=${BUILD:-build-gpu} "$root/scripts/bench-gpu.sh" "${bs[@]}"
      ;;
    *) echo "acceptance: unknown stage $s" ;;
  esac
done
tar -C "$out" -czf "$out/results${TAG:+-$TAG}.tar.gz" files && rm -rf "$files"
echo "acceptance: done at ${SECONDS}s"
