#!/usr/bin/env python3
"""What the Python module costs over the C++ library, measured side by side in one run on one
machine, written to bench/results/cpu-python-overhead.json (DESIGN §5's schema):

1. Model.fit of the seed MLP (784-512-512-10, RMSprop, batch 256) on Fashion-MNIST, from Python
   and from C++ (build/mixprec_python_fit_timing), each in a fresh process, alternating
   C++/Python REPEATS times; the same seed gives both the same training (their final losses
   must be equal, which the script checks). Compared: the median wall time of fit().
2. One small op from Python: mp.ops.add and `a + b` on two 16-element float32 tensors, the best
   per-call time of several timeit runs, beside the same add called in a C++ loop.
3. In one process, which takes the machine's drift out: one model trained an epoch at a time,
   alternately by Model.fit from Python and by the same fit called from C++ inside the extension
   (what the binding adds: argument conversion, the Ctrl-C check, the History's conversion).

    scripts/python-overhead.py [--build build] [--epochs 2] [--repeats 5] [--samples 60000]
        [--policy float32] [--out bench/results/cpu-python-overhead.json]

Needs a build with the Python module and the benchmarks (cmake/python.cmake: the targets
mixprec_python and mixprec_python_fit_timing) and Fashion-MNIST (dataset-fashion-mnist).
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_fit(policy, epochs, batch_size, samples):
    """The Python side of 1., run in a worker process: the same program as fit_timing.cpp."""
    import time

    import mixprec as mp

    mp.mixed_precision.set_global_policy(policy)
    mp.set_seed(0)
    (x, y), _ = mp.datasets.fashion_mnist.load_data()
    x = x.reshape(60000, 784).astype("float32")[:samples] / 255
    y = y.astype("int64")[:samples]
    model = mp.applications.MLP()
    model.compile(optimizer=mp.optimizers.RMSprop(), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0, seed=1)
    total = time.perf_counter() - start
    steps = sorted(ms for e in history.epochs for ms in e.step_ms)
    print(json.dumps({"system": "python", "fit_seconds": total,
                      "epoch_seconds": [e.seconds for e in history.epochs],
                      "step_ms_median": steps[len(steps) // 2] if steps else 0.0,
                      "loss": history.history["loss"][-1]}))


def python_fit_in_process(policy, batch_size, samples, pairs):
    """3., in one worker process: one model trained one epoch at a time, alternately by
    Model.fit from Python and by the same fit called from C++ (mixprec._mixprec._fit_as_cpp),
    both timed from Python around the call; the order alternates with each pair."""
    import time

    import mixprec as mp

    mp.mixed_precision.set_global_policy(policy)
    mp.set_seed(0)
    (x, y), _ = mp.datasets.fashion_mnist.load_data()
    x = x.reshape(60000, 784).astype("float32")[:samples] / 255
    y = y.astype("int64")[:samples]
    model = mp.applications.MLP()
    model.compile(optimizer=mp.optimizers.RMSprop(), loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, seed=0)  # warm-up
    py_s, cpp_s = [], []
    for i in range(pairs):
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            start = time.perf_counter()
            if which == 0:
                model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0, seed=i)
                py_s.append(time.perf_counter() - start)
            else:
                mp._mixprec._fit_as_cpp(model, x, y, batch_size, 1, i)
                cpp_s.append(time.perf_counter() - start)
    print(json.dumps({"system": "python", "in_process_python_s": py_s, "in_process_cpp_s": cpp_s}))


def python_add(iterations):
    import mixprec as mp

    a, b = mp.ones((16,)), mp.ones((16,))
    add = mp.ops.add
    per_call = {}
    for name, fn in (("mp.ops.add(a, b)", lambda: add(a, b)), ("a + b", lambda: a + b)):
        runs = timeit.repeat(fn, number=iterations, repeat=7)
        per_call[name] = min(runs) / iterations * 1e6
    print(json.dumps({"system": "python", "add_us": per_call}))


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def git_commit():
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--policy", default="float32")
    parser.add_argument("--add-iterations", type=int, default=20000)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/cpu-python-overhead.json"))
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker[0] == "fit":
            python_fit(args.worker[1], int(args.worker[2]), int(args.worker[3]), int(args.worker[4]))
        elif args.worker[0] == "in-process":
            python_fit_in_process(args.worker[1], int(args.worker[2]), int(args.worker[3]),
                                  int(args.worker[4]))
        else:
            python_add(int(args.worker[1]))
        return 0

    driver = os.path.join(args.build, "mixprec_python_fit_timing")
    package = os.path.join(args.build, "python")
    if not os.path.isfile(driver) or not os.path.isdir(os.path.join(package, "mixprec")):
        print(f"python-overhead: build the targets mixprec_python and mixprec_python_fit_timing "
              f"in {args.build} first", file=sys.stderr)
        return 1
    env = dict(os.environ, PYTHONPATH=package)
    fit_args = [args.policy, str(args.epochs), str(args.batch_size), str(args.samples)]
    load_start = os.getloadavg()[0]
    cpp_runs, py_runs = [], []
    for r in range(args.repeats):
        cpp_runs.append(run_json([driver, "fit", *fit_args], env))
        py_runs.append(run_json([sys.executable, __file__, "--worker", "fit", *fit_args], env))
        print(f"run {r + 1}/{args.repeats}: C++ fit {cpp_runs[-1]['fit_seconds']:.3f} s, "
              f"Python fit {py_runs[-1]['fit_seconds']:.3f} s", flush=True)
    if any(c["loss"] != p["loss"] for c, p in zip(cpp_runs, py_runs)):
        print("python-overhead: the C++ and Python fits ended at different losses: they did not "
              "train the same way", file=sys.stderr)
        return 1
    in_process = run_json([sys.executable, __file__, "--worker", "in-process", args.policy,
                           str(args.batch_size), str(args.samples), str(args.repeats)], env)
    cpp_add = run_json([driver, "add", str(args.add_iterations * 10)], env)
    py_add = run_json([sys.executable, __file__, "--worker", "add", str(args.add_iterations)], env)

    cpp_median = statistics.median(r["fit_seconds"] for r in cpp_runs)
    py_median = statistics.median(r["fit_seconds"] for r in py_runs)
    overhead = py_median / cpp_median - 1
    # On a shared machine single runs vary far more than the overhead: the fastest run of each
    # (the least disturbed) and the per-step medians are reported beside the medians.
    overhead_min = (min(r["fit_seconds"] for r in py_runs)
                    / min(r["fit_seconds"] for r in cpp_runs) - 1)
    ip_py = statistics.median(in_process["in_process_python_s"])
    ip_cpp = statistics.median(in_process["in_process_cpp_s"])
    cpp_step = statistics.median(r["step_ms_median"] for r in cpp_runs)
    py_step = statistics.median(r["step_ms_median"] for r in py_runs)
    threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
    result = {
        "device": cpu_model(),
        "commit": git_commit(),
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["scripts/python-overhead.py"] + sys.argv[1:]),
        "workload": {"model": "mlp", "units": 512, "hidden_layers": 2, "batch_size": args.batch_size,
                     "optimizer": "rmsprop", "policy": args.policy, "epochs": args.epochs,
                     "samples": args.samples, "data": "fashion_mnist", "repeats": args.repeats,
                     "threads": threads, "load_average_at_start": load_start,
                     "load_average_at_end": os.getloadavg()[0]},
        "results": [
            {"system": "mixprec-c++", "policy": args.policy, "batch_size": args.batch_size,
             "fit_seconds": {"min": min(r["fit_seconds"] for r in cpp_runs), "median": cpp_median,
                             "max": max(r["fit_seconds"] for r in cpp_runs)},
             "step_ms_median": cpp_step, "final_loss": cpp_runs[0]["loss"]},
            {"system": "mixprec-python", "policy": args.policy, "batch_size": args.batch_size,
             "fit_seconds": {"min": min(r["fit_seconds"] for r in py_runs), "median": py_median,
                             "max": max(r["fit_seconds"] for r in py_runs)},
             "step_ms_median": py_step, "final_loss": py_runs[0]["loss"]},
        ],
        "python_fit_overhead_percent": {"median_runs": round(overhead * 100, 2),
                                        "fastest_runs": round(overhead_min * 100, 2),
                                        "median_step": round((py_step / cpp_step - 1) * 100, 2)},
        "in_process": {
            "what": "one model, one epoch at a time, alternately Model.fit from Python and the "
                    "same fit called from C++ inside the extension, both timed from Python",
            "python_epoch_s_median": ip_py, "cpp_epoch_s_median": ip_cpp,
            "overhead_percent": round((ip_py / ip_cpp - 1) * 100, 2),
            "python_epoch_s": in_process["in_process_python_s"],
            "cpp_epoch_s": in_process["in_process_cpp_s"]},
        "fit_seconds_each_run": {"c++": [r["fit_seconds"] for r in cpp_runs],
                                 "python": [r["fit_seconds"] for r in py_runs]},
        "small_op": {"op": "add of two 16-element float32 tensors",
                     "c++_us": cpp_add["add_us"], "python_us": py_add["add_us"]},
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"fit: C++ median {cpp_median:.3f} s, Python median {py_median:.3f} s "
          f"({overhead * 100:+.2f}%; fastest runs {overhead_min * 100:+.2f}%, median step "
          f"{(py_step / cpp_step - 1) * 100:+.2f}%); in one process: {(ip_py / ip_cpp - 1) * 100:+.2f}%; "
          f"add: C++ {cpp_add['add_us']:.2f} us, Python "
          + ", ".join(f"{k} {v:.2f} us" for k, v in py_add["add_us"].items()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
