#!/usr/bin/env python3
"""PyTorch peer of `mixprec bench --model gpt-...`: the same decoder-only Transformer (GPT-2's
pre-norm blocks, learned position embeddings, tanh GELU, the output head tied to the token
embedding), the same shapes and initialisation rule, AdamW, trained on random token windows and
timed per step. Writes rows in the DESIGN §5 schema next to mixprec's.

  python3 bench/peers/torch_gpt.py --device cpu --layers 6 --width 384 --heads 6 --seq-len 256 \\
      --batch-size 8 --json out.json
  python3 bench/peers/torch_gpt.py --device cuda --preset gpt2 --seq-len 1024 --batch-size 8 \\
      --policies mixed_bfloat16 --compile --json out.json

Attention: torch.nn.functional.scaled_dot_product_attention (causal) where the installed torch has
it (2.0 and later); torch 1.13 (Debian's CPU package) has no fused attention, so there the peer
runs the plain composition (matmul, scale, causal mask, softmax, matmul), as PyTorch users of
that version do. The row records which (`attention`).

Policies: float32 -> no autocast (TF32 off on CUDA); mixed_bfloat16 -> autocast bfloat16;
mixed_float16 -> autocast float16 + GradScaler (CUDA only: torch 1.13 has no float16 CPU autocast).
The loss is cross-entropy on float32 logits, as mixprec computes it.

FLOPs per step (the `tflops` field and model FLOP utilisation): 6 * tokens * N + 12 * tokens *
layers * T * width, N = the weights of the matrix products (12 * layers * width^2 + vocab * width),
the accounting of the PaLM paper and llm.c (attention's causal half is not discounted).
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

PRESETS = {  # name: (layers, width, heads, context, vocab); mixprec's applications::gpt presets
    "gpt2": (12, 768, 12, 1024, 50257),
    "gpt-mini": (6, 384, 6, 256, 50257),
}


class Block(torch.nn.Module):
    def __init__(self, width, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln_1 = torch.nn.LayerNorm(width, eps=1e-5)
        self.c_attn = torch.nn.Linear(width, 3 * width)
        self.c_proj = torch.nn.Linear(width, width)
        self.ln_2 = torch.nn.LayerNorm(width, eps=1e-5)
        self.c_fc = torch.nn.Linear(width, 4 * width)
        self.mlp_proj = torch.nn.Linear(4 * width, width)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        # (B, T, C) -> (B, H, T, D)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            s = s.masked_fill(~mask, float("-inf"))
            y = torch.softmax(s.float(), dim=-1).to(v.dtype) @ v
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, layers, width, heads, context, vocab, sdpa):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.wpe = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads, sdpa) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width, eps=1e-5)
        # GPT-2's initialisation: normal(0, 0.02) weights, zero biases, the projections into the
        # residual stream scaled by 1 / sqrt(2 * layers).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            elif "ln_" in name:
                torch.nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()  # the tied head: (B, T, vocab)


def step_flops(layers, width, context, vocab, batch):
    tokens = batch * context
    n = 12 * layers * width * width + vocab * width
    return 6.0 * tokens * n + 12.0 * tokens * layers * context * width


def make_optimizer(model):
    # AdamW with Keras' defaults (betas 0.9 / 0.999, epsilon 1e-7) and weight decay 0.1 on the
    # matrices only: biases, LayerNorm parameters and the embeddings are excluded, as mixprec's
    # gpt training excludes them (exclude_from_weight_decay).
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() == 2 and not name.startswith(("wte", "wpe")) else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=3e-4, betas=(0.9, 0.999), eps=1e-7)


def run(policy, args, system):
    device = torch.device(args.device)
    row = {"system": system, "policy": policy, "batch_size": args.batch_size}
    sdpa = peer_step.start_row(row, policy, device, system)
    if sdpa is None:
        return row
    model = Gpt(args.layers, args.width, args.heads, args.seq_len, args.vocab, sdpa).to(device)
    opt = make_optimizer(model)
    step = peer_step.make_train_step(
        model, opt,
        lambda logits, y: F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1)),
        policy, device, system)
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randint(0, args.vocab, (args.batch_size, args.seq_len), generator=gen).to(device)
    y = torch.randint(0, args.vocab, (args.batch_size, args.seq_len), generator=gen).to(device)
    times, first_s, peak = peer_step.time_steps(step, x, y, device, args.warmup, args.steps)
    median = statistics.median(times)
    tokens = args.batch_size * args.seq_len
    row.update({"step_ms": peer_step.step_ms(times),
                "samples_per_s": args.batch_size / (median / 1e3),
                "tokens_per_s": tokens / (median / 1e3),
                "tflops": step_flops(args.layers, args.width, args.seq_len, args.vocab,
                                     args.batch_size) / (median / 1e3) / 1e12,
                "peak_memory_bytes": peak})
    if system == "torch-compile":
        row["compile_s"] = first_s
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--preset", choices=sorted(PRESETS), help="layers, width, heads, context, vocab")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2, help="untimed steps; the first is never timed")
    p.add_argument("--policies", default="float32,mixed_bfloat16")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--compile", action="store_true", help="also time torch.compile (torch >= 2)")
    p.add_argument("--no-eager", action="store_true", help="only torch.compile rows")
    p.add_argument("--require-optimised-blas", action="store_true")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    if args.preset:
        args.layers, args.width, args.heads, context, args.vocab = PRESETS[args.preset]
        args.seq_len = min(args.seq_len, context)
    if args.width % args.heads:
        p.error("--width must be a multiple of --heads")
    cpu_peer = peer_step.setup(args, cpu_blas)
    systems = ([] if args.no_eager else ["torch-eager"]) + (["torch-compile"] if args.compile else [])
    rows = peer_step.run_rows(run, args, systems, "tokens_per_s", "tokens/s")
    if args.json:
        workload = {"model": "gpt", "layers": args.layers, "width": args.width,
                    "heads": args.heads, "seq_len": args.seq_len, "vocab": args.vocab,
                    "batch_size": args.batch_size, "optimizer": "adamw",
                    "steps": args.steps, "warmup": args.warmup}
        peer_step.write_json(args.json, args, workload, rows, cpu_peer)

if __name__ == "__main__":
    sys.exit(main())
