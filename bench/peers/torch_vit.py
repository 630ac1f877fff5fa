#!/usr/bin/env python3
"""PyTorch peer of `mixprec bench --model vit`: the same Vision Transformer as
mixprec's applications::vit (a strided Conv2D patch embedding, learned position embeddings, pre-norm
blocks of MultiHeadAttention and a GELU MLP, a final LayerNormalization, the mean of the patch
tokens, a Dense head and a float32 softmax), the same shapes, Adam with Keras' defaults, trained on
random images and timed per step. Writes rows in the DESIGN §5 schema next to mixprec's.

  python3 bench/peers/torch_vit.py --device cpu --batch-size 128 --json out.json
  MODELS=vit OUT=bench/results/cpu-vit.json scripts/bench-cpu-cnn.sh   # beside mixprec's rows

Attention: torch.nn.functional.scaled_dot_product_attention where the installed torch has it (2.0
and later), else the plain composition (matmul, scale, softmax, matmul) as torch 1.13 users write
it; the row records which (`attention`). Policies as bench/peers/torch_gpt.py: float32 without
autocast (TF32 off on CUDA), mixed_bfloat16 autocast bfloat16, mixed_float16 autocast float16 with
GradScaler (CUDA only). The loss is the negative log of the float32 softmax, as mixprec's
sparse_categorical_crossentropy on the model's probabilities.
"""
import argparse
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_blas  # noqa: E402  (which BLAS and CPU the peer runs with)
import peer_step  # noqa: E402  (the step under a policy, and its timing)


class Block(torch.nn.Module):
    def __init__(self, width, heads, mlp_dim, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln_1 = torch.nn.LayerNorm(width, eps=1e-6)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.ln_2 = torch.nn.LayerNorm(width, eps=1e-6)
        self.fc = torch.nn.Linear(width, mlp_dim)
        self.proj = torch.nn.Linear(mlp_dim, width)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            y = torch.softmax(s.float(), dim=-1).to(v.dtype) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class Vit(torch.nn.Module):
    def __init__(self, args, sdpa):
        super().__init__()
        p = args.patch_size
        tokens = (args.image_size // p) ** 2
        self.patches = torch.nn.Conv2d(args.channels, args.width, p, stride=p)
        self.position = torch.nn.Parameter(torch.zeros(1, tokens, args.width))
        torch.nn.init.uniform_(self.position, -0.05, 0.05)
        self.blocks = torch.nn.ModuleList(Block(args.width, args.heads, args.mlp_dim, sdpa)
                                          for _ in range(args.layers))
        self.ln_f = torch.nn.LayerNorm(args.width, eps=1e-6)
        self.head = torch.nn.Linear(args.width, args.classes)
        for m in self.modules():  # Keras' defaults: glorot_uniform kernels, zero biases
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
                torch.nn.init.xavier_uniform_(m.weight)
                torch.nn.init.zeros_(m.bias)

    def forward(self, images):
        x = self.patches(images)  # (B, width, S/p, S/p)
        x = x.flatten(2).transpose(1, 2) + self.position  # (B, N, width)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x).mean(dim=1))
        return torch.softmax(logits.float(), dim=-1)


def forward_flops_per_sample(args):
    """Matrix-product FLOPs of one image's forward pass (a multiply-add counted as 2): the patch
    convolution, per block the four projections, the MLP and the two attention products, the head.
    A training step counts 3x (forward, and the two products of the backward)."""
    n = (args.image_size // args.patch_size) ** 2
    w, m = args.width, args.mlp_dim
    patch = n * args.channels * args.patch_size ** 2 * w
    per_block = n * (3 * w * w + w * w + 2 * w * m) + 2 * n * n * w
    return 2 * (patch + args.layers * per_block + w * args.classes)


def run(policy, args, system):
    device = torch.device(args.device)
    row = {"system": system, "model": "vit", "policy": policy, "batch_size": args.batch_size}
    sdpa = peer_step.start_row(row, policy, device, system)
    if sdpa is None:
        return row
    model = Vit(args, sdpa).to(device)
    args.params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    step = peer_step.make_train_step(
        model, opt, lambda probabilities, y: F.nll_loss(torch.log(probabilities.float()), y),
        policy, device, system)
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.rand(args.batch_size, args.channels, args.image_size, args.image_size,
                   generator=gen).to(device)
    y = torch.randint(0, args.classes, (args.batch_size,), generator=gen).to(device)
    times, first_s, peak = peer_step.time_steps(step, x, y, device, args.warmup, args.steps)
    median = statistics.median(times)
    row.update({"step_ms": peer_step.step_ms(times),
                "samples_per_s": args.batch_size / (median / 1e3),
                "tflops": 3 * forward_flops_per_sample(args) * args.batch_size / (median / 1e3) / 1e12,
                "peak_memory_bytes": peak})
    if system == "torch-compile":
        row["compile_s"] = first_s
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--image-size", type=int, default=28)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--patch-size", type=int, default=4)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--mlp-dim", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps; the first is never timed")
    p.add_argument("--policies", default="float32,mixed_bfloat16")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--compile", action="store_true", help="also time torch.compile (torch >= 2)")
    p.add_argument("--require-optimised-blas", action="store_true")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    if args.width % args.heads:
        p.error("--width must be a multiple of --heads")
    if args.image_size % args.patch_size:
        p.error("--image-size must be a multiple of --patch-size")
    cpu_peer = peer_step.setup(args, cpu_blas)
    systems = ["torch-eager"] + (["torch-compile"] if args.compile else [])
    rows = peer_step.run_rows(run, args, systems, "samples_per_s", "images/s")
    if args.json:
        workload = {"model": "vit", "image_size": args.image_size, "channels": args.channels,
                    "patch_size": args.patch_size, "width": args.width, "layers": args.layers,
                    "heads": args.heads, "mlp_dim": args.mlp_dim, "classes": args.classes,
                    "batch_size": args.batch_size, "optimizer": "adam", "steps": args.steps,
                    "warmup": args.warmup, "params": getattr(args, "params", None),
                    "forward_flops_per_sample": forward_flops_per_sample(args)}
        peer_step.write_json(args.json, args, workload, rows, cpu_peer)

if __name__ == "__main__":
    sys.exit(main())
