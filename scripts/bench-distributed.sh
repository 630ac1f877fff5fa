#!/usr/bin/env bash
# Data-parallel scaling of the seed MLP on this CPU (issue 15): bench/distributed_scaling_bench run
# alone and under `mpirun -np 2` at the same per-rank batch, alternating, ROUNDS times; then
# bench/results/distributed-scaling.json with the median steps/s of each, the scaling efficiency
# throughput(2) / (2 * throughput(1)) (throughput = samples/s of the global batch) and the CPU.
#
#   scripts/bench-distributed.sh [BUILD_DIR] [OUT]
#
# Each process runs ONE OpenMP thread (OMP_NUM_THREADS=1): two processes on a 2-core machine
# each get a core, and the single-process baseline gets one core too, so the efficiency measures
# the data-parallel overhead (the gradient all-reduce, over shared memory here) and not a change
# of threads. For reference the script also runs one process with THREADS threads (default 2:
# what the whole machine gives without MPI).
# Settings (environment): ROUNDS (3), UNITS (4096), BATCH (per rank, 128), STEPS (20),
# WARMUP (3), POLICY (float32), THREADS (2).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
OUT=${2:-$root/bench/results/distributed-scaling.json}
ROUNDS=${ROUNDS:-3}
UNITS=${UNITS:-4096}
BATCH=${BATCH:-128}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
POLICY=${POLICY:-float32}
THREADS=${THREADS:-2}
bench=$build/bench/distributed_scaling_bench
if [[ ! -x $bench ]]; then
  echo "bench-distributed: $bench is missing; build it: cmake --build $build --target distributed_scaling_bench" >&2
  exit 1
fi
if ! command -v mpirun >/dev/null; then
  echo "bench-distributed: mpirun (Open MPI) not found; install openmpi-bin (scripts/install-deps.sh)" >&2
  exit 1
fi
args=(--units "$UNITS" --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --policy "$POLICY")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in $(seq 1 "$ROUNDS"); do
  echo "bench-distributed: round $round/$ROUNDS" >&2
  OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive "$bench" "${args[@]}" --json "$tmp/one-$round.json" >/dev/null
  mpirun --allow-run-as-root --oversubscribe --bind-to core -np 2 -x OMP_NUM_THREADS=1 \
    -x OMP_WAIT_POLICY=passive "$bench" "${args[@]}" --json "$tmp/two-$round.json" >/dev/null
  OMP_NUM_THREADS=$THREADS "$bench" "${args[@]}" --json "$tmp/threads-$round.json" >/dev/null
done

python3 - "$tmp" "$ROUNDS" "$OUT" "$THREADS" <<'PY'
import json, statistics, sys, datetime
tmp, rounds, out, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def load(kind):
    return [json.load(open(f"{tmp}/{kind}-{r}.json")) for r in range(1, rounds + 1)]
one, two, thr = load("one"), load("two"), load("threads")
med = lambda rows, key: statistics.median(r[key] for r in rows)
s1, s2, st = med(one, "samples_per_second"), med(two, "samples_per_second"), med(thr, "samples_per_second")
result = {
    "benchmark": "bench/distributed_scaling_bench via scripts/bench-distributed.sh",
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "cpu": one[0]["cpu"],
    "note": "2 processes on a 2-core CPU, 1 OpenMP thread each (OMP_NUM_THREADS=1); the 1-process "
            "baseline also runs 1 thread; all-reduce over Open MPI shared memory (loopback)",
    "model": f"seed MLP 784-{one[0]['units']}-{one[0]['units']}-10 ({one[0]['params']} parameters, "
             f"{one[0]['gradient_bytes']} gradient bytes per step)",
    "policy": one[0]["policy"],
    "per_rank_batch": one[0]["per_rank_batch"],
    "rounds": rounds,
    "one_process": {"steps_per_second": med(one, "steps_per_second"), "samples_per_second": s1},
    "two_processes": {"steps_per_second": med(two, "steps_per_second"), "samples_per_second": s2,
                      "allreduce_ms_per_step": med(two, "allreduce_ms_per_step")},
    "scaling_efficiency": s2 / (2 * s1),
    f"reference_one_process_{threads}_threads": {
        "steps_per_second": med(thr, "steps_per_second"), "samples_per_second": st},
    "runs": {"one": one, "two": two, "threads": thr},
}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps({k: result[k] for k in ("cpu", "one_process", "two_processes", "scaling_efficiency")}, indent=2))
PY
echo "bench-distributed: wrote $OUT" >&2
