#!/usr/bin/env python3
"""Issue 11's checks against the Python ecosystem, for a machine that has the `tensorboard` and
`safetensors` packages (the GPU machine's image has both; this project's CPU machine has neither).

  python_interop.py MIXPREC WORKDIR

MIXPREC is the mixprec binary (it needs Fashion-MNIST: MIXPREC_FASHION_MNIST_DIR or the Debian
package). The script trains a small MLP on the CPU with --tensorboard, --histogram-freq 1, --save
and --metrics-json, then:
  1. TensorBoard's own EventAccumulator loads DIR/train and DIR/validation: every epoch's loss and
     accuracy equal the metrics JSON's, every variable has one histogram per epoch whose buckets
     count its elements;
  2. Hugging Face safetensors reads the saved model.safetensors (names, shapes, float32 values
     equal to what mixprec's own `predict` uses: checked through 3);
  3. safetensors writes the same tensors into a copy of the model directory and mixprec loads
     that file: `predict` gives bit-identical outputs from both directories;
  4. a file whose kernel safetensors wrote in float16 is refused by mixprec with one error line
     naming the variable;
  5. a TensorBoard screenshot where a headless browser exists (none is expected: then it says so).
Prints one line per check and writes WORKDIR/interop.json. Exit status 0 when every check that
could run passed, 1 when one failed, 77 when a package is missing (nothing was checked).
"""

import json
import os
import shutil
import subprocess
import sys
import time


def run(cmd, **kw):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(1.0, abs(b))


def train(mixprec, work):
    cmd = [mixprec, "train", "--model", "mlp", "--dataset", "fashion_mnist", "--device", "cpu",
           "--max-samples", "2000", "--epochs", "2", "--units", "64", "--batch-size", "128",
           "--tensorboard", os.path.join(work, "tb"), "--histogram-freq", "1",
           "--save", os.path.join(work, "model"), "--metrics-json", os.path.join(work, "run.json")]
    r = run(cmd)
    if r.returncode != 0:
        raise RuntimeError("training failed: " + (r.stderr or r.stdout).strip()[-300:])
    with open(os.path.join(work, "run.json")) as f:
        return json.load(f)


def check_event_accumulator(work, metrics):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    epochs = metrics["epochs"]
    found = {}
    for sub, prefix in (("train", ""), ("validation", "val_")):
        acc = EventAccumulator(os.path.join(work, "tb", sub),
                               size_guidance={"scalars": 0, "histograms": 0})
        acc.Reload()
        tags = acc.Tags()
        found[sub] = {"scalars": sorted(tags.get("scalars", [])),
                      "histograms": sorted(tags.get("histograms", []))}
        for name in ("loss", "accuracy"):
            events = acc.Scalars("epoch_" + name)
            values = [e.value for e in events]
            want = [e[prefix + name] for e in epochs]
            if len(values) != len(want) or not all(close(v, w) for v, w in zip(values, want)):
                raise AssertionError("%s/epoch_%s: EventAccumulator %s, metrics JSON %s"
                                     % (sub, name, values, want))
            if [e.step for e in events] != list(range(len(want))):
                raise AssertionError("%s/epoch_%s steps %s" % (sub, name, [e.step for e in events]))
    histograms = found["train"]["histograms"]
    if "dense_1/kernel" not in histograms:
        raise AssertionError("no dense_1/kernel histogram in train: %s" % histograms)
    acc = EventAccumulator(os.path.join(work, "tb", "train"), size_guidance={"histograms": 0})
    acc.Reload()
    for tag in histograms:
        events = acc.Histograms(tag)
        if len(events) != len(epochs):
            raise AssertionError("%s: %d histograms for %d epochs" % (tag, len(events), len(epochs)))
        for e in events:
            h = e.histogram_value
            if sum(h.bucket) != h.num or not (h.min <= h.max):
                raise AssertionError("%s step %d: buckets sum to %s, num %s, min %s max %s"
                                     % (tag, e.step, sum(h.bucket), h.num, h.min, h.max))
    kernel = acc.Histograms("dense_1/kernel")[0].histogram_value
    if kernel.num != 784 * 64:
        raise AssertionError("dense_1/kernel histogram counts %s values, expected %d"
                             % (kernel.num, 784 * 64))
    return found


def predict(mixprec, model_dir, out):
    r = run([mixprec, "predict", "--model", model_dir, "--dataset", "fashion_mnist",
             "--max-samples", "500", "--device", "cpu", "--output", out])
    if r.returncode != 0:
        raise RuntimeError("predict on %s failed: %s" % (model_dir, (r.stderr or r.stdout).strip()))


def check_safetensors(mixprec, work):
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    model = os.path.join(work, "model")
    path = os.path.join(model, "model.safetensors")
    tensors = load_file(path)
    with safe_open(path, framework="np") as f:
        metadata = f.metadata()
    summary = {name: [str(t.dtype), list(t.shape)] for name, t in sorted(tensors.items())}
    kernel = tensors.get("dense_1/kernel")
    if kernel is None or kernel.shape != (784, 64) or kernel.dtype != np.float32:
        raise AssertionError("dense_1/kernel read by safetensors: %s" % summary.get("dense_1/kernel"))

    # 3: the same tensors written by Hugging Face's writer, read by mixprec.
    hf = os.path.join(work, "model_hf")
    shutil.rmtree(hf, ignore_errors=True)
    shutil.copytree(model, hf)
    save_file(tensors, os.path.join(hf, "model.safetensors"), metadata=metadata)
    predict(mixprec, model, os.path.join(work, "ours.npy"))
    predict(mixprec, hf, os.path.join(work, "hf.npy"))
    ours, theirs = np.load(os.path.join(work, "ours.npy")), np.load(os.path.join(work, "hf.npy"))
    if ours.shape != theirs.shape or not np.array_equal(ours, theirs):
        raise AssertionError("predictions differ between our file and the one safetensors wrote")

    # 4: a float16 kernel where the model has a float32 variable: one error line naming it.
    bad = os.path.join(work, "model_f16")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(model, bad)
    wrong = dict(tensors)
    wrong["dense_1/kernel"] = kernel.astype(np.float16)
    save_file(wrong, os.path.join(bad, "model.safetensors"), metadata=metadata)
    r = run([mixprec, "evaluate", "--model", bad, "--dataset", "fashion_mnist",
             "--max-samples", "100", "--device", "cpu"])
    lines = [l for l in (r.stderr + r.stdout).splitlines() if l.startswith("error:")]
    if r.returncode != 1 or len(lines) != 1 or "dense_1/kernel" not in lines[0]:
        raise AssertionError("float16 kernel: exit %d, output %r" % (r.returncode,
                                                                    (r.stderr + r.stdout)[-400:]))
    return {"tensors": summary, "metadata": metadata, "float16_refusal": lines[0]}


def screenshot(work):
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome", "chrome")
                    if shutil.which(b)), None)
    if browser is None or shutil.which("tensorboard") is None:
        return {"status": "not made: no headless browser (or no tensorboard command) here"}
    server = subprocess.Popen(["tensorboard", "--logdir", os.path.join(work, "tb"), "--port",
                               "6123", "--bind_all"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(8)
        png = os.path.join(work, "tensorboard.png")
        r = run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                 "--virtual-time-budget=15000", "--screenshot=" + png,
                 "http://localhost:6123/#timeseries"])
        ok = r.returncode == 0 and os.path.exists(png)
        return {"status": "made" if ok else "failed", "file": png if ok else None}
    finally:
        server.terminate()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    mixprec, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    try:
        import numpy  # noqa: F401
        import safetensors
        import tensorboard
    except ImportError as e:
        print("python_interop: skipped, a package is missing: %s" % e)
        return 77
    os.makedirs(work, exist_ok=True)
    report, failed = {"tensorboard": None, "safetensors": None}, False
    report["versions"] = {"tensorboard": tensorboard.__version__,
                          "safetensors": safetensors.__version__}
    metrics = train(mixprec, work)
    for name, check in (("tensorboard", lambda: check_event_accumulator(work, metrics)),
                        ("safetensors", lambda: check_safetensors(mixprec, work))):
        try:
            report[name] = {"passed": True, "details": check()}
            print("python_interop: %s: passed" % name)
        except Exception as e:  # report every check, fail at the end
            failed = True
            report[name] = {"passed": False, "error": "%s: %s" % (type(e).__name__, e)}
            print("python_interop: %s: FAILED: %s" % (name, report[name]["error"]))
    report["screenshot"] = screenshot(work)
    print("python_interop: screenshot: %s" % report["screenshot"]["status"])
    with open(os.path.join(work, "interop.json"), "w") as f:
        json.dump(report, f, indent=2, default=str)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
