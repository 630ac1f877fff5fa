"""What the PyTorch peers of the Transformers (torch_gpt.py, torch_vit.py) share: the training step
under a policy (autocast, GradScaler for float16, optionally torch.compile) and its timing (the
first step untimed, warm-up, the median of the timed steps, the peak memory)."""
import json
import resource
import statistics
import sys
import time

import torch

AUTOCAST = {"float32": None, "mixed_float16": torch.float16, "mixed_bfloat16": torch.bfloat16}


def unsupported(policy, device, system):
    """Why this torch cannot run the row, or None."""
    if policy == "mixed_float16" and device.type == "cpu":
        return "torch %s has no float16 autocast on the CPU" % torch.__version__
    if system == "torch-compile" and not hasattr(torch, "compile"):
        return "torch %s has no torch.compile (added in 2.0)" % torch.__version__
    return None


def start_row(row, policy, device, system):
    """Marks `row` unsupported and returns None when this torch cannot run it; otherwise records
    which attention runs (scaled_dot_product_attention where torch has it, 2.0 and later, else the
    composition), turns TF32 off on CUDA (float32 means float32), seeds torch, and returns whether
    SDPA is used."""
    why = unsupported(policy, device, system)
    if why:
        row["unsupported"] = why
        return None
    sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    row["attention"] = "scaled_dot_product_attention" if sdpa else "composition"
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    return sdpa


def make_scaler():
    # GradScaler with Keras' LossScaleOptimizer settings: initial scale 2^15, growth every 2000.
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", init_scale=32768.0, growth_interval=2000)
    return torch.cuda.amp.GradScaler(init_scale=32768.0, growth_interval=2000)


def make_train_step(model, opt, loss_of_output, policy, device, system):
    """step(x, y): zero the gradients, forward under the policy's autocast, loss_of_output(out, y)
    in float32, backward (scaled for mixed_float16) and the optimizer step."""
    autocast_dtype = AUTOCAST[policy]
    scaler = make_scaler() if policy == "mixed_float16" else None

    def forward_loss(x, y):
        if autocast_dtype is None:
            out = model(x)
        else:
            with torch.autocast(device_type=device.type, dtype=autocast_dtype):
                out = model(x)
        return loss_of_output(out, y)

    if system == "torch-compile":
        forward_loss = torch.compile(forward_loss, dynamic=False)

    def step(x, y):
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

    return step


def time_steps(step, x, y, device, warmup, steps):
    """Runs the first step (untimed; under torch.compile it compiles), warmup - 1 more, then
    `steps` timed ones. Returns (step times in ms, the first step's seconds, peak memory bytes:
    the CUDA allocator's peak on a GPU, the process's peak RSS on the CPU)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        sync()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    step(x, y)
    sync()
    first_s = time.perf_counter() - start
    for _ in range(warmup - 1):
        step(x, y)
    sync()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(x, y)
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return times, first_s, peak


def step_ms(times):
    return {"min": min(times), "median": statistics.median(times), "max": max(times)}


def setup(args, cpu_blas):
    """Sets torch's threads; on the CPU describes the BLAS torch runs (cpu_blas.describe) and, with
    --require-optimised-blas, stops on the reference BLAS. Returns the description (None on CUDA)."""
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        return None
    peer = cpu_blas.describe(torch)
    if args.require_optimised_blas:
        cpu_blas.require_optimised(peer)
    return peer


def run_rows(run, args, systems, rate_key, rate_unit):
    """run(policy, args, system) for every system and policy, each row printed as it comes."""
    rows = []
    for system in systems:
        for policy in args.policies.split(","):
            r = run(policy, args, system)
            rows.append(r)
            if "unsupported" in r:
                print("%-14s %-15s unsupported: %s" % (r["system"], r["policy"], r["unsupported"]))
            else:
                print("%-14s %-15s batch %3d  median %9.2f ms  %9.0f %s  %6.3f TFLOP/s  (%s)" % (
                    r["system"], r["policy"], r["batch_size"], r["step_ms"]["median"],
                    r[rate_key], rate_unit, r["tflops"], r["attention"]))
            sys.stdout.flush()
    return rows


def write_json(path, args, workload, rows, cpu_peer):
    """The peer's document: torch's version and threads, the device, the workload, the rows and,
    on the CPU, the BLAS description."""
    cuda = args.device == "cuda"
    out = {"torch_version": torch.__version__, "threads": args.threads, "device": args.device,
           "device_name": torch.cuda.get_device_name() if cuda else None,
           "workload": workload, "results": rows}
    if not cuda:
        out["cpu_peer"] = cpu_peer
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
