#!/usr/bin/env python3
"""Writes a small GPT-2 in Hugging Face's file layout, with PyTorch's logits for a fixed input,
as the external oracle of mixprec's GPT-2 reader (tests/e2e/gpt2_weights_test.cpp).

  python3 tests/tools/make_hf_gpt2.py OUT_DIR [--seed 0] [--layers 2] [--width 32] [--heads 4]
      [--context 16] [--vocab 61] [--prefix transformer.] [--tokens 11]

OUT_DIR receives:
  model.safetensors  the weights under Hugging Face's GPT-2 names (`transformer.` prefixed as
                     GPT2LMHeadModel saves them, or bare as the Hub's GPT2Model file, by --prefix),
                     Conv1D kernels stored (in, out), plus the attention's causal-mask buffers
                     `h.N.attn.bias` that older files carry (a reader must skip them);
  config.json        n_layer, n_embd, n_head, n_positions, n_ctx, vocab_size, layer_norm_epsilon,
                     activation_function "gelu_new", as Hugging Face writes it;
  reference.safetensors  "input_ids" (1, tokens) int64 and "logits" (1, tokens, vocab) float32
                     computed by the PyTorch model below in float64 and rounded once.

The model is GPT-2's architecture written out here (no transformers package): token and position
embeddings, pre-norm blocks (ln_1, causal self-attention with a fused c_attn, c_proj; ln_2, c_fc,
tanh GELU, c_proj), ln_f, and the head tied to wte. Weights are random normal (std 0.2, so that
every part of the network moves the logits), biases and LayerNorm parameters random too.
"""
import argparse
import json
import math
import os
import struct
import sys

import torch


def write_safetensors(path, tensors):
    """The safetensors layout: an 8-byte little-endian header length, the JSON header (name ->
    dtype, shape, data_offsets), then the raw little-endian data in header order."""
    names = {"float32": "F32", "int64": "I64"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": names[str(t.dtype).replace("torch.", "")], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def forward(p, ids, layers, heads, eps):
    """GPT-2's forward pass over the Hugging Face parameter dict p (float64)."""
    t = ids.shape[1]
    x = p["wte.weight"][ids] + p["wpe.weight"][torch.arange(t)]
    c = x.shape[-1]
    d = c // heads
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for i in range(layers):
        h = lambda name: p["h.%d.%s" % (i, name)]  # noqa: E731
        a = layer_norm(x, h("ln_1.weight"), h("ln_1.bias"), eps)
        qkv = a @ h("attn.c_attn.weight") + h("attn.c_attn.bias")  # Conv1D: x (.., in) @ W (in, out)
        q, k, v = qkv.split(c, dim=-1)
        q, k, v = (z.view(1, t, heads, d).transpose(1, 2) for z in (q, k, v))  # (1, H, T, D)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        s = s.masked_fill(~causal, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        y = y.transpose(1, 2).reshape(1, t, c)
        x = x + y @ h("attn.c_proj.weight") + h("attn.c_proj.bias")
        m = layer_norm(x, h("ln_2.weight"), h("ln_2.bias"), eps)
        m = gelu_new(m @ h("mlp.c_fc.weight") + h("mlp.c_fc.bias"))
        x = x + m @ h("mlp.c_proj.weight") + h("mlp.c_proj.bias")
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], eps)
    return x @ p["wte.weight"].t()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=61)
    ap.add_argument("--tokens", type=int, default=11)
    ap.add_argument("--prefix", default="transformer.", help="'transformer.' or '' (bare names)")
    ap.add_argument("--epsilon", type=float, default=1e-5)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    c, n = a.width, a.layers
    shapes = {"wte.weight": (a.vocab, c), "wpe.weight": (a.context, c),
              "ln_f.weight": (c,), "ln_f.bias": (c,)}
    for i in range(n):
        for name, shape in (("ln_1.weight", (c,)), ("ln_1.bias", (c,)),
                            ("attn.c_attn.weight", (c, 3 * c)), ("attn.c_attn.bias", (3 * c,)),
                            ("attn.c_proj.weight", (c, c)), ("attn.c_proj.bias", (c,)),
                            ("ln_2.weight", (c,)), ("ln_2.bias", (c,)),
                            ("mlp.c_fc.weight", (c, 4 * c)), ("mlp.c_fc.bias", (4 * c,)),
                            ("mlp.c_proj.weight", (4 * c, c)), ("mlp.c_proj.bias", (c,))):
            shapes["h.%d.%s" % (i, name)] = shape
    params = {}
    for name, shape in shapes.items():
        w = torch.randn(shape, dtype=torch.float32) * 0.2
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            w = 1.0 + w  # scales near 1, as trained LayerNorms are
        params[name] = w
    ids = torch.randint(0, a.vocab, (1, a.tokens), generator=torch.Generator().manual_seed(a.seed + 1))
    logits = forward({k: v.double() for k, v in params.items()}, ids, n, a.heads, a.epsilon).float()

    os.makedirs(a.out_dir, exist_ok=True)
    stored = {a.prefix + k: v for k, v in params.items()}
    for i in range(n):  # the causal-mask buffers of older GPT-2 files: not weights
        stored[a.prefix + "h.%d.attn.bias" % i] = torch.ones(1, 1, a.context, a.context).tril()
    write_safetensors(os.path.join(a.out_dir, "model.safetensors"), stored)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
                   "activation_function": "gelu_new", "n_layer": n, "n_embd": c, "n_head": a.heads,
                   "n_positions": a.context, "n_ctx": a.context, "vocab_size": a.vocab,
                   "layer_norm_epsilon": a.epsilon}, f, indent=2)
    write_safetensors(os.path.join(a.out_dir, "reference.safetensors"),
                      {"input_ids": ids.to(torch.int64), "logits": logits})
    print("make_hf_gpt2: %s: %d layers, width %d, %d heads, vocab %d, logits %s" % (
        a.out_dir, n, c, a.heads, a.vocab, tuple(logits.shape)))


if __name__ == "__main__":
    sys.exit(main())
