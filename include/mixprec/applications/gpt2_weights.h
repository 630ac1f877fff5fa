// Hugging Face GPT-2 checkpoints: a `model.safetensors` in Hugging Face's GPT-2 layout with its
// `config.json`, read into applications::gpt() of that configuration and written back.
//
//   auto model = mp::applications::load_gpt2_huggingface("path/to/gpt2");   // the directory
//   mp::applications::save_gpt2_huggingface(model, "out/gpt2");
//
// The layout (Hugging Face's names, with the "transformer." prefix that GPT2LMHeadModel saves, or
// without it, as the Hub's GPT2Model files are):
//   wte.weight (vocab, C), wpe.weight (n_positions, C), ln_f.weight / .bias (C), and per block
//   h.<i>.ln_1.{weight,bias}, h.<i>.attn.c_attn.{weight (C, 3C), bias (3C)},
//   h.<i>.attn.c_proj.{weight (C, C), bias}, h.<i>.ln_2.{weight,bias},
//   h.<i>.mlp.c_fc.{weight (C, 4C), bias}, h.<i>.mlp.c_proj.{weight (4C, C), bias}.
// GPT-2's Conv1D stores its kernels (in, out), as Dense does, so they are taken as they are;
// c_attn's columns are the query, key and value projections side by side, split into the
// MultiHeadAttention's (C, H, D) kernels. The causal-mask buffers of older files
// (h.<i>.attn.bias, h.<i>.attn.masked_bias) are skipped; an lm_head.weight must equal wte (GPT-2's
// head is tied). Any other tensor, a missing one or a shape that does not match the config is an
// IOError naming the file and the tensor. config.json: n_layer, n_embd, n_head, vocab_size,
// n_positions (or n_ctx), layer_norm_epsilon (default 1e-5), activation_function "gelu_new" (the
// tanh GELU; anything else is refused), n_inner null or 4 * n_embd; read with a size and depth
// limit.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "mixprec/mixed_precision/policy.h"
#include "mixprec/models/model.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::applications {

struct Gpt2LoadOptions {
  // Policy of the model's layers; default: the global policy.
  std::optional<mixed_precision::Policy> dtype;
  std::string name = "gpt2";
};

// `path`: the directory holding config.json and model.safetensors, or the model.safetensors file
// itself (config.json beside it).
Model load_gpt2_huggingface(const std::filesystem::path& path, const Gpt2LoadOptions& options = {});

struct Gpt2SaveOptions {
  // "transformer." (GPT2LMHeadModel's names) or "" (GPT2Model's).
  std::string prefix = "transformer.";
};

// Writes `dir`/model.safetensors (float32) and `dir`/config.json for a model built by gpt(); the
// directory is created when missing. Files are written atomically.
void save_gpt2_huggingface(const Model& gpt, const std::filesystem::path& dir,
                           const Gpt2SaveOptions& options = {});

}  // namespace mixprec::applications

#pragma GCC visibility pop
