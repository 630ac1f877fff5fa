#!/usr/bin/env bash
# The TensorFlow mixed-precision guide in Python (examples/python/mixed_precision_guide.py) against
# its C++ programs (examples/seed001_fit.cpp, examples/seed001_custom_loop.cpp), full length, on
# this machine: the test accuracy of fit and of the custom loop must agree within 0.5 points
# (they train the same way, so they agree exactly unless the thread count differs). Writes
# bench/results/cpu-python-guide.json (or OUT) naming the CPU, the date and the commit.
#
#   scripts/python-guide-compare.sh          # after building the examples and the Python module
#
# Environment: BUILD (default build), POLICY (mixed_float16), EPOCHS (5), BATCH (8192), PYTHON
# (the module's interpreter, default /usr/bin/python3), OUT, OMP_NUM_THREADS (default 1: the
# same summation order in both).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
build=$root/$BUILD
POLICY=${POLICY:-mixed_float16}
EPOCHS=${EPOCHS:-5}
BATCH=${BATCH:-8192}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-$root/bench/results/cpu-python-guide.json}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
for exe in "$build/examples/seed001_fit" "$build/examples/seed001_custom_loop"; do
  [[ -x $exe ]] || { echo "python-guide-compare: $exe is missing (build the examples)" >&2; exit 1; }
done
[[ -d $build/python/mixprec ]] || { echo "python-guide-compare: no Python module in $build/python" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/examples/seed001_fit" "$POLICY" "$EPOCHS" "$BATCH" >"$tmp/fit.log" 2>&1
"$build/examples/seed001_custom_loop" "$POLICY" "$EPOCHS" "$BATCH" >"$tmp/loop.log" 2>&1
PYTHONPATH=$build/python "$PYTHON" "$root/examples/python/mixed_precision_guide.py" \
  --policy "$POLICY" --epochs "$EPOCHS" --batch-size "$BATCH" --json "$tmp/py.json" >"$tmp/py.log" 2>&1

cpp_fit=$(sed -n 's/^Test accuracy: //p' "$tmp/fit.log")
cpp_loop=$(grep '^Epoch' "$tmp/loop.log" | tail -1 | sed 's/.*test accuracy=\([0-9.]*\).*/\1/')
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
commit=$(git -C "$root" rev-parse --short HEAD)
[[ -z $(git -C "$root" status --porcelain --untracked-files=no) ]] || commit="$commit-dirty"
"$PYTHON" - "$tmp/py.json" "$cpp_fit" "$cpp_loop" "$cpu" "$commit" "$OUT" "$OMP_NUM_THREADS" <<'EOF'
import datetime, json, sys
py = json.load(open(sys.argv[1]))
cpp_fit, cpp_loop = float(sys.argv[2]), float(sys.argv[3])
rows = [
    {"system": "mixprec-c++", "program": "examples/seed001_fit.cpp", "part": "fit",
     "test_accuracy": cpp_fit},
    {"system": "mixprec-python", "program": "examples/python/mixed_precision_guide.py",
     "part": "fit", "test_accuracy": py["fit_test_accuracy"]},
    {"system": "mixprec-c++", "program": "examples/seed001_custom_loop.cpp",
     "part": "custom loop (LossScaleOptimizer)", "test_accuracy": cpp_loop},
    {"system": "mixprec-python", "program": "examples/python/mixed_precision_guide.py",
     "part": "custom loop (LossScaleOptimizer)", "test_accuracy": py["custom_loop_test_accuracy"],
     "loss_scale": py["loss_scale"], "skipped_steps": py["skipped_steps"]},
]
fit_gap = abs(py["fit_test_accuracy"] - cpp_fit) * 100
loop_gap = abs(py["custom_loop_test_accuracy"] - cpp_loop) * 100
result = {"device": sys.argv[4], "commit": sys.argv[5], "date": datetime.date.today().isoformat(),
          "command": "scripts/python-guide-compare.sh",
          "workload": {"model": "guide Dense model (64 units on a CPU)", "dataset": "fashion_mnist",
                       "policy": py["policy"], "epochs": py["epochs"],
                       "batch_size": py["batch_size"], "optimizer": "rmsprop",
                       "threads": int(sys.argv[7])},
          "results": rows,
          "accuracy_gap_points": {"fit": round(fit_gap, 4), "custom_loop": round(loop_gap, 4)}}
with open(sys.argv[6], "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
print(f"fit: C++ {cpp_fit:.4f}, Python {py['fit_test_accuracy']:.4f}; custom loop: C++ "
      f"{cpp_loop:.4f}, Python {py['custom_loop_test_accuracy']:.4f}; wrote {sys.argv[6]}")
sys.exit(0 if fit_gap <= 0.5 and loop_gap <= 0.5 else 1)
EOF
