// GptDecoder and generate(): a GPT's forward pass one position at a time over a key-value cache
// (see include/mixprec/applications/generate.h).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "mixprec/applications/generate.h"
#include "mixprec/applications/gpt.h"
#include "mixprec/attention.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "mixprec/random.h"
#include "mixprec/transformer_ops.h"

namespace mixprec::applications {

namespace {

// The variable of `layer` whose name ends in "/<suffix>" ("kernel", "query/kernel", ...).
Tensor variable(const Model& model, const std::string& layer, const std::string& suffix) {
  for (const layers::NamedVariable& v : model.get_layer(layer).named_variables()) {
    if (v.name.size() > suffix.size() && v.name.ends_with("/" + suffix)) return v.value;
  }
  throw ValueError("GptDecoder: layer '" + layer + "' of model '" + model.name() +
                   "' has no variable '" + suffix +
                   "'; the model was not built by "
                   "applications::gpt()");
}

struct Block {
  Tensor ln_1_gamma, ln_1_beta;
  Tensor wq, bq, wk, bk, wv, bv;  // (C, H * D), (H * D)
  Tensor wo, bo;                  // (H * D, C), (C)
  Tensor ln_2_gamma, ln_2_beta;
  Tensor w_fc, b_fc, w_proj, b_proj;
  Tensor keys, values;  // the cache, (1, positions, H, D); undefined while empty
};

// x (1, T, in) @ w (in, out) + b (out) -> (1, T, out)
Tensor affine(const Tensor& x, const Tensor& w, const Tensor& b) { return add(matmul(x, w), b); }

}  // namespace

struct GptDecoder::State {
  GptConfig config;
  std::int64_t head_dim = 0;
  Tensor token_table;     // (vocab, C)
  Tensor position_table;  // (context, C)
  Tensor ln_f_gamma, ln_f_beta;
  std::vector<Block> blocks;
  std::int64_t position = 0;
};

GptDecoder::GptDecoder(const Model& gpt) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.config = gpt_config(gpt);
  const GptConfig& c = s.config;
  s.head_dim = c.width / c.heads;
  const std::int64_t hd = c.heads * s.head_dim;
  s.token_table = variable(gpt, "token_embedding", "embeddings");
  s.position_table = variable(gpt, "position_embedding", "embeddings");
  s.ln_f_gamma = variable(gpt, "ln_f", "gamma");
  s.ln_f_beta = variable(gpt, "ln_f", "beta");
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = "block_" + std::to_string(i) + "_";
    const std::string attention = p + "attention";
    Block b;
    b.ln_1_gamma = variable(gpt, p + "ln_1", "gamma");
    b.ln_1_beta = variable(gpt, p + "ln_1", "beta");
    // MultiHeadAttention keeps Keras' EinsumDense shapes: (C, H, D) kernels and (H, D) biases for
    // the projections, (H, D, C) for the output; as matrices they are (C, H * D) and (H * D, C).
    b.wq = reshape(variable(gpt, attention, "query/kernel"), {c.width, hd});
    b.bq = reshape(variable(gpt, attention, "query/bias"), {hd});
    b.wk = reshape(variable(gpt, attention, "key/kernel"), {c.width, hd});
    b.bk = reshape(variable(gpt, attention, "key/bias"), {hd});
    b.wv = reshape(variable(gpt, attention, "value/kernel"), {c.width, hd});
    b.bv = reshape(variable(gpt, attention, "value/bias"), {hd});
    b.wo = reshape(variable(gpt, attention, "attention_output/kernel"), {hd, c.width});
    b.bo = variable(gpt, attention, "attention_output/bias");
    b.ln_2_gamma = variable(gpt, p + "ln_2", "gamma");
    b.ln_2_beta = variable(gpt, p + "ln_2", "beta");
    b.w_fc = variable(gpt, p + "fc", "kernel");
    b.b_fc = variable(gpt, p + "fc", "bias");
    b.w_proj = variable(gpt, p + "proj", "kernel");
    b.b_proj = variable(gpt, p + "proj", "bias");
    s.blocks.push_back(std::move(b));
  }
}

GptDecoder::~GptDecoder() = default;
GptDecoder::GptDecoder(GptDecoder&&) noexcept = default;
GptDecoder& GptDecoder::operator=(GptDecoder&&) noexcept = default;

std::int64_t GptDecoder::position() const { return state_->position; }
std::int64_t GptDecoder::context() const { return state_->config.context; }
std::int64_t GptDecoder::vocab() const { return state_->config.vocab; }

void GptDecoder::reset() {
  state_->position = 0;
  for (Block& b : state_->blocks) b.keys = b.values = Tensor();
}

Tensor GptDecoder::prefill(const std::vector<std::int64_t>& tokens) {
  State& s = *state_;
  const GptConfig& c = s.config;
  const auto t = static_cast<std::int64_t>(tokens.size());
  if (t == 0) throw ValueError("GptDecoder::prefill: no tokens given");
  if (s.position + t > c.context) {
    throw ValueError("GptDecoder: " + std::to_string(s.position) + " cached + " +
                     std::to_string(t) + " new tokens pass the model's context of " +
                     std::to_string(c.context) + " positions");
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab) {
      throw ValueError("GptDecoder: token id " + std::to_string(tokens[i]) + " at index " +
                       std::to_string(i) + " is outside [0, " + std::to_string(c.vocab) + ")");
    }
  }
  NoGradScope no_grad;
  const Device device = s.token_table.device();
  const DType dtype = s.token_table.dtype();
  const Tensor ids = from_vector(tokens, {1, t}, {.dtype = DType::int64, .device = device});
  // (1, T, C): token rows plus the rows of positions position .. position + T - 1.
  Tensor x = add(embedding_lookup(s.token_table, ids, dtype),
                 reshape(slice(s.position_table, 0, s.position, s.position + t), {1, t, c.width}));
  const Shape heads_shape{1, t, c.heads, s.head_dim};
  for (Block& b : s.blocks) {
    const Tensor h = layer_norm(x, b.ln_1_gamma, b.ln_1_beta, c.layer_norm_epsilon);
    const Tensor q = reshape(affine(h, b.wq, b.bq), heads_shape);
    const Tensor k = reshape(affine(h, b.wk, b.bk), heads_shape);
    const Tensor v = reshape(affine(h, b.wv, b.bv), heads_shape);
    b.keys = b.keys.defined() ? concat({b.keys, k}, 1) : k;  // (1, position + T, H, D)
    b.values = b.values.defined() ? concat({b.values, v}, 1) : v;
    // Bottom-right causal: new query i (position + i) sees the cached keys 0 .. position + i.
    AttentionOptions causal;
    causal.causal = true;
    const Tensor o = scaled_dot_product_attention(q, b.keys, b.values, causal);
    x = add(x, affine(reshape(o, {1, t, c.heads * s.head_dim}), b.wo, b.bo));
    const Tensor m = layer_norm(x, b.ln_2_gamma, b.ln_2_beta, c.layer_norm_epsilon);
    x = add(x,
            affine(gelu(affine(m, b.w_fc, b.b_fc), GeluApproximation::tanh), b.w_proj, b.b_proj));
  }
  s.position += t;
  // Only the last position's logits: (1, C) @ table^T -> (1, vocab).
  const Tensor last = reshape(slice(x, 1, t - 1, t), {1, c.width});
  const Tensor normed = layer_norm(last, s.ln_f_gamma, s.ln_f_beta, c.layer_norm_epsilon);
  return reshape(cast(matmul(normed, s.token_table, Transpose::no, Transpose::yes), DType::float32),
                 {c.vocab});
}

namespace {

// The index drawn from logits (vocab) under the options (greedy when temperature is 0).
std::int64_t sample(const Tensor& logits, const GenerateOptions& o, Generator& gen) {
  const Tensor host = logits.to(Device::cpu()).contiguous();
  const float* z = host.data<float>();
  const auto n = static_cast<std::size_t>(host.numel());
  if (o.temperature == 0.0) return std::max_element(z, z + n) - z;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::size_t keep = n;
  if (o.top_k > 0 && static_cast<std::size_t>(o.top_k) < n) {
    keep = static_cast<std::size_t>(o.top_k);
    // The k largest first; ties broken by the lower id, so the choice is repeatable.
    std::partial_sort(
        order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
        [z](std::size_t a, std::size_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  }
  double top = -INFINITY;
  for (std::size_t i = 0; i < keep; ++i) top = std::max(top, static_cast<double>(z[order[i]]));
  std::vector<double> weights(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((static_cast<double>(z[order[i]]) - top) / o.temperature);
    total += weights[i];
  }
  double u = gen.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    if (u < weights[i]) return static_cast<std::int64_t>(order[i]);
    u -= weights[i];
  }
  return static_cast<std::int64_t>(order[keep - 1]);  // rounding left u just above the sum
}

}  // namespace

std::vector<std::int64_t> generate(const Model& gpt, const std::vector<std::int64_t>& prompt,
                                   const GenerateOptions& options) {
  if (prompt.empty()) throw ValueError("generate: the prompt needs at least one token");
  if (options.max_tokens < 0) {
    throw ValueError("generate: max_tokens must be >= 0, got " +
                     std::to_string(options.max_tokens));
  }
  if (!(options.temperature >= 0.0) || !std::isfinite(options.temperature)) {
    throw ValueError("generate: temperature must be >= 0 (0 = greedy), got " +
                     std::to_string(options.temperature));
  }
  if (options.top_k < 0) {
    throw ValueError("generate: top_k must be >= 0 (0 = every token), got " +
                     std::to_string(options.top_k));
  }
  GptDecoder decoder(gpt);
  if (static_cast<std::int64_t>(prompt.size()) > decoder.context()) {
    throw ValueError("generate: the prompt has " + std::to_string(prompt.size()) +
                     " tokens, more than the model's context of " +
                     std::to_string(decoder.context()));
  }
  Generator gen(options.seed);
  std::vector<std::int64_t> out = prompt;
  Tensor logits = decoder.prefill(prompt);
  for (std::int64_t i = 0; i < options.max_tokens; ++i) {
    const std::int64_t next = sample(logits, options, gen);
    out.push_back(next);
    if (options.stop_token && next == *options.stop_token) break;
    if (i + 1 == options.max_tokens) break;
    if (decoder.position() < decoder.context()) {
      logits = decoder.step(next);
    } else {  // the cache is full: slide, restarting it from the last half context
      const auto keep =
          static_cast<std::ptrdiff_t>(std::max<std::int64_t>(1, decoder.context() / 2));
      decoder.reset();
      logits = decoder.prefill(std::vector<std::int64_t>(out.end() - keep, out.end()));
    }
  }
  return out;
}

}  // namespace mixprec::applications
