#!/usr/bin/env python3
"""PyTorch peer of `mixprec bench --model mlp`: the seed 001 model (784-U-U-10, ReLU, float32
softmax + sparse categorical cross-entropy, RMSprop with Keras defaults) trained on synthetic
batches, timed per step. Writes rows in the DESIGN §5 schema so they can sit next to mixprec's.

  python3 bench/peers/torch_mlp.py --device cpu --batch-size 256 --json out.json
  python3 bench/peers/torch_mlp.py --device cuda --batch-size 8192 --compile --json out.json

Policies map to PyTorch as: float32 -> no autocast (TF32 off); mixed_float16 -> autocast float16 +
GradScaler (CUDA only; torch 1.13's CPU autocast has no float16); mixed_bfloat16 -> autocast
bfloat16 (no scaler, as Keras does).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch


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


def run(policy, args, system):
    device = torch.device(args.device)
    if policy == "mixed_float16" and device.type == "cpu":
        return {"system": system, "policy": policy, "batch_size": args.batch_size,
                "unsupported": "torch %s has no float16 autocast on the CPU" % torch.__version__}
    model = build(args.units, device)
    # Keras RMSprop defaults: rho 0.9, epsilon 1e-7.
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, eps=1e-7)
    autocast_dtype = {"float32": None, "mixed_float16": torch.float16,
                      "mixed_bfloat16": torch.bfloat16}[policy]
    scaler = torch.cuda.amp.GradScaler(init_scale=32768.0) if policy == "mixed_float16" else None
    loss_fn = torch.nn.NLLLoss()

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        if autocast_dtype is None:
            logits = model(x)
        else:
            with torch.autocast(device_type=device.type, dtype=autocast_dtype):
                logits = model(x)
        # The float32 softmax output layer of the seed, then cross-entropy, in float32.
        loss = loss_fn(torch.log_softmax(logits.float(), dim=-1), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    if system == "torch-compile":
        train_step = torch.compile(train_step)
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.rand(args.batch_size, 784, generator=gen).to(device)
    y = torch.randint(0, 10, (args.batch_size,), generator=gen).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(args.warmup):
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
    return {"system": system, "policy": policy, "batch_size": args.batch_size,
            "step_ms": {"min": min(times), "median": median, "max": max(times)},
            "samples_per_s": args.batch_size / (median / 1e3),
            "tflops": step_flops(args.units, args.batch_size) / (median / 1e3) / 1e12,
            "peak_memory_bytes": peak}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--units", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--policies", default="float32,mixed_float16,mixed_bfloat16")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--compile", action="store_true", help="also time torch.compile (torch >= 2)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 means true FP32
        torch.backends.cudnn.allow_tf32 = False
    systems = ["torch-eager"] + (["torch-compile"] if args.compile else [])
    rows = [run(policy, args, system) for system in systems for policy in args.policies.split(",")]
    for r in rows:
        if "unsupported" in r:
            print("%-14s %-15s unsupported: %s" % (r["system"], r["policy"], r["unsupported"]))
        else:
            print("%-14s %-15s batch %5d  median %8.2f ms  %10.0f samples/s  %6.2f TFLOP/s" % (
                r["system"], r["policy"], r["batch_size"], r["step_ms"]["median"], r["samples_per_s"], r["tflops"]))
    if args.json:
        out = {"torch_version": torch.__version__, "threads": args.threads, "device": args.device,
               "workload": {"model": "mlp", "units": args.units, "batch_size": args.batch_size,
                            "optimizer": "rmsprop", "steps": args.steps, "warmup": args.warmup},
               "results": rows}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
