#!/usr/bin/env python3
"""PyTorch peer of `mixprec bench --model mlp`: the seed 001 model (784-U-U-10, ReLU, float32
softmax + sparse categorical cross-entropy, RMSprop with Keras defaults) trained on synthetic
batches, timed per step. Writes rows in the DESIGN §5 schema so they can sit next to mixprec's.

  python3 bench/peers/torch_mlp.py --device cpu --batch-size 256 --json out.json
  python3 bench/peers/torch_mlp.py --device cuda --batch-size 8192 --compile --json out.json

Policies map to PyTorch as: float32 -> no autocast, TF32 off (true FP32) unless --tf32 on|both
(CUDA rows then carry "tf32": true/false); mixed_float16 -> autocast float16 + GradScaler (CUDA
only; torch 1.13's CPU autocast has no float16); mixed_bfloat16 -> autocast bfloat16 (no scaler, as
Keras does).

torch.compile compiles the forward pass and the loss (autocast inside); backward runs through the
compiled backward graph and the optimizer step and GradScaler stay eager. The first step (which
compiles) is timed on its own and reported as compile_s, never mixed into the step times.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_blas  # noqa: E402  (which BLAS and CPU the peer runs with)


def build(units, device):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(784, units), torch.nn.ReLU(),
        torch.nn.Linear(units, units), torch.nn.ReLU(),
        torch.nn.Linear(units, 10)).to(device)


def step_flops(units, batch):
    # Forward 2*B*(sum of weight elements); backward twice that (input and weight gradients).
    weights = 784 * units + units * units + units * 10
    return 6.0 * batch * weights


def set_tf32(enabled):
    """TF32 for float32 matmuls and convolutions on or off. torch >= 2.9 has the fp32_precision
    settings (the allow_tf32 flags are deprecated there, and mixing the two APIs is refused);
    older versions only the flags."""
    matmul = torch.backends.cuda.matmul
    try:  # torch 1.13's matmul backend raises AssertionError (not AttributeError) for unknown names
        new_api = isinstance(matmul.fp32_precision, str) and hasattr(torch.backends.cudnn, "conv")
    except (AttributeError, AssertionError):
        new_api = False
    if new_api:
        mode = "tf32" if enabled else "ieee"
        matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
    else:
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def make_scaler():
    # Keras LossScaleOptimizer: initial scale 2^15, doubled after 2000 finite steps.
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", init_scale=32768.0, growth_interval=2000)
    return torch.cuda.amp.GradScaler(init_scale=32768.0, growth_interval=2000)


def run(policy, args, system, tf32=False):
    device = torch.device(args.device)
    row = {"system": system, "policy": policy, "batch_size": args.batch_size}
    if policy == "float32" and device.type == "cuda":
        row["tf32"] = tf32
    if policy == "mixed_float16" and device.type == "cpu":
        row["unsupported"] = "torch %s has no float16 autocast on the CPU" % torch.__version__
        return row
    if system == "torch-compile" and not hasattr(torch, "compile"):
        row["unsupported"] = "torch %s has no torch.compile (added in 2.0)" % torch.__version__
        return row
    if device.type == "cuda":
        set_tf32(tf32)  # float32 means true FP32 unless asked
    model = build(args.units, device)
    # Keras RMSprop defaults: rho 0.9, epsilon 1e-7.
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)
    autocast_dtype = {"float32": None, "mixed_float16": torch.float16,
                      "mixed_bfloat16": torch.bfloat16}[policy]
    scaler = make_scaler() if policy == "mixed_float16" else None
    loss_fn = torch.nn.NLLLoss()

    def forward_loss(x, y):
        if autocast_dtype is None:
            logits = model(x)
        else:
            with torch.autocast(device_type=device.type, dtype=autocast_dtype):
                logits = model(x)
        # The float32 softmax output layer of the seed, then cross-entropy, in float32.
        return loss_fn(torch.log_softmax(logits.float(), dim=-1), y)

    if system == "torch-compile":
        forward_loss = torch.compile(forward_loss, dynamic=False)

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(x, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.rand(args.batch_size, 784, generator=gen).to(device)
    y = torch.randint(0, 10, (args.batch_size,), generator=gen).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        sync()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    train_step(x, y)  # the first step; under torch.compile it compiles forward and backward
    sync()
    first_s = time.perf_counter() - start
    for _ in range(args.warmup - 1):  # the first step counts as one warmup step
        train_step(x, y)
    sync()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        train_step(x, y)
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    median = statistics.median(times)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # process peak RSS
    row.update({"step_ms": {"min": min(times), "median": median, "max": max(times)},
                "samples_per_s": args.batch_size / (median / 1e3),
                "tflops": step_flops(args.units, args.batch_size) / (median / 1e3) / 1e12,
                "peak_memory_bytes": peak})
    if system == "torch-compile":
        row["compile_s"] = first_s
    if scaler is not None:
        row["final_loss_scale"] = scaler.get_scale()
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--units", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps; the first step is never timed")
    p.add_argument("--policies", default="float32,mixed_float16,mixed_bfloat16")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--tf32", choices=["off", "on", "both"], default="off",
                   help="float32 rows on CUDA: TF32 off (true FP32), on, or one row of each")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (torch >= 2)")
    p.add_argument("--no-eager", action="store_true", help="only torch.compile rows")
    p.add_argument("--require-optimised-blas", action="store_true",
                   help="on the CPU: stop when torch runs on the reference BLAS (cpu_blas.py)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    cpu_peer = None if cuda else cpu_blas.describe(torch)
    if cpu_peer is not None and args.require_optimised_blas:
        cpu_blas.require_optimised(cpu_peer)
    tf32_modes = {"off": [False], "on": [True], "both": [False, True]}[args.tf32]
    systems = ([] if args.no_eager else ["torch-eager"]) + (["torch-compile"] if args.compile else [])
    rows = []
    for system in systems:
        for policy in args.policies.split(","):
            for tf32 in (tf32_modes if policy == "float32" and cuda else [False]):
                r = run(policy, args, system, tf32)
                rows.append(r)
                name = r["policy"] + ("+tf32" if r.get("tf32") else "")
                if "unsupported" in r:
                    print("%-14s %-19s unsupported: %s" % (r["system"], name, r["unsupported"]))
                else:
                    extra = "  compile %.1f s" % r["compile_s"] if "compile_s" in r else ""
                    print("%-14s %-19s batch %5d  median %8.2f ms  %10.0f samples/s  %6.2f TFLOP/s%s" % (
                        r["system"], name, r["batch_size"], r["step_ms"]["median"], r["samples_per_s"],
                        r["tflops"], extra))
                sys.stdout.flush()
    if args.json:
        out = {"torch_version": torch.__version__, "threads": args.threads, "device": args.device,
               "device_name": torch.cuda.get_device_name() if cuda else None,
               "workload": {"model": "mlp", "units": args.units, "batch_size": args.batch_size,
                            "optimizer": "rmsprop", "steps": args.steps, "warmup": args.warmup},
               "results": rows}
        if not cuda:
            out["cpu_peer"] = cpu_peer  # BLAS library, its matmul time, CPU model (cpu_blas.py)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
