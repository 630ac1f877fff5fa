#!/usr/bin/env python3
"""PyTorch peer of bench/attention_bench.cpp: torch.nn.functional.scaled_dot_product_attention on
the same shapes, forward and forward + backward, printing the same JSON lines (path "torch_sdpa").

  python3 bench/peers/torch_attention.py --device cuda [--batch 8 --length 256 --heads 6
      --dim 64 --repeats 10 --no-causal]

The inputs are made (B, T, H, D), as mixprec's op takes them, and viewed as (B, H, T, D) for
PyTorch (a transpose, no copy: PyTorch picks its kernel for those strides, as a model reshaping a
projection would). TF32 is off, so float32 is true float32 as in mixprec. Each timed run ends
with a device synchronisation; min and median over `repeats` runs after two warm-up runs.
GFLOP/s as attention_bench: 4 B H T^2 D forward, 3.5x that forward + backward, halved when causal.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def time_it(f, sync, repeats):
    f()
    f()
    sync()
    ms = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    return min(ms), statistics.median(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--no-causal", action="store_true")
    a = ap.parse_args()
    causal = not a.no_causal
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    b, t, h, d = a.batch, a.length, a.heads, a.dim
    forward_flops = 4.0 * b * h * t * t * d * (0.5 if causal else 1.0)
    dtypes = [torch.float32, torch.bfloat16] + ([torch.float16] if dev.type == "cuda" else [])
    for dtype in dtypes:
        gen = torch.Generator(device="cpu").manual_seed(1)

        def make(grad=True):
            x = torch.randn(b, t, h, d, generator=gen).to(device=dev, dtype=dtype)
            return x.requires_grad_(grad)

        q, k, v = make(), make(), make()
        w = make(False)

        def run():
            y = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal
            )
            return y.transpose(1, 2)

        def forward():
            with torch.no_grad():
                run()

        def both():
            torch.autograd.grad((run() * w).sum(), (q, k, v))

        for name, f, flops in (("forward", forward, forward_flops),
                               ("forward+backward", both, 3.5 * forward_flops)):
            lo, med = time_it(f, sync, a.repeats)
            print(json.dumps({
                "device": dev.type, "dtype": str(dtype).replace("torch.", ""),
                "path": "torch_sdpa", "pass": name, "shape": [b, t, h, d],
                "min_ms": round(lo, 3), "median_ms": round(med, 3),
                "gflops": round(flops / (lo * 1e6), 2), "torch": torch.__version__,
            }), flush=True)


if __name__ == "__main__":
    main()
