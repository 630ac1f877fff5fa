// Text generation from a GPT built by applications::gpt() (or loaded from its saved form or from
// Hugging Face's GPT-2 files), with a key-value cache: each new token costs one pass of one
// position through the blocks, attending to the keys and values kept from the earlier positions,
// so generating N tokens costs N single-position steps, not N passes over the whole prefix.
//
//   mp::applications::GptDecoder decoder(model);
//   mp::Tensor logits = decoder.prefill(prompt_ids);   // (vocab,) float32 after the prompt
//   logits = decoder.step(next_id);                     // one more position
//
//   auto ids = mp::applications::generate(model, prompt_ids,
//                                         {.max_tokens = 200, .temperature = 0.8, .top_k = 40});
//
// The decoder computes in the variables' dtype (float32 under the mixed policies: the float32
// master weights, so generation does not depend on the policy the model was trained under) with
// the model's own ops (layer_norm, scaled_dot_product_attention with its bottom-right causal
// mask, matmul, gelu), on the device the variables live on. Its logits equal the model's own
// forward pass at each position within float32 rounding (tests/unit/gpt_generate_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "mixprec/models/model.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::applications {

class GptDecoder {
 public:
  // Reads the model's configuration and shares its variables (no copy). ValueError when `gpt`
  // was not built by applications::gpt() (naming the missing layer).
  explicit GptDecoder(const Model& gpt);
  ~GptDecoder();
  GptDecoder(GptDecoder&&) noexcept;
  GptDecoder& operator=(GptDecoder&&) noexcept;

  // Appends `tokens` (at least one) at the next positions and returns the logits for the token
  // after the last of them, (vocab,) float32. Each id must be in [0, vocab) and the cache must not
  // pass the model's context (ValueError naming the id or the lengths).
  Tensor prefill(const std::vector<std::int64_t>& tokens);
  Tensor step(std::int64_t token) { return prefill({token}); }

  std::int64_t position() const;  // tokens seen so far
  std::int64_t context() const;   // the longest sequence the model embeds
  std::int64_t vocab() const;
  void reset();  // forgets the cache: the next token is at position 0

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct GenerateOptions {
  // New tokens, >= 0. Past the context the window slides: the cache restarts from the last
  // context / 2 tokens (as nanoGPT crops to its block), so any number of tokens can follow.
  std::int64_t max_tokens = 64;
  // > 0: sample from softmax(logits / temperature); 0: greedy (the most likely token).
  double temperature = 1.0;
  std::int64_t top_k = 0;  // > 0: sample among the k most likely tokens only; 0: all
  std::uint64_t seed = 0;  // the sampling generator's seed: the same seed, the same text
  std::optional<std::int64_t> stop_token;  // stop after generating this id (e.g. end of text)
};

// The prompt (at least one id) followed by up to max_tokens generated ids. ValueError for a bad
// option (naming it) or an id out of range.
std::vector<std::int64_t> generate(const Model& gpt, const std::vector<std::int64_t>& prompt,
                                   const GenerateOptions& options = {});

}  // namespace mixprec::applications

#pragma GCC visibility pop
