// applications::gpt: GPT-2's decoder-only Transformer (see include/mixprec/applications/gpt.h).
#include "mixprec/applications/gpt.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/error.h"
#include "mixprec/initializers.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/dropout.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/layer_normalization.h"
#include "mixprec/layers/merge.h"
#include "mixprec/layers/multi_head_attention.h"
#include "mixprec/layers/position_embedding.h"
#include "mixprec/layers/reversible_embedding.h"

namespace mixprec::applications {

namespace {

constexpr double kInitStddev = 0.02;  // GPT-2's weight initialisation

struct Preset {
  const char* name;
  GptConfig config;
};

GptConfig shape(int layers, std::int64_t width, int heads, std::int64_t context,
                std::int64_t vocab) {
  GptConfig c;
  c.layers = layers;
  c.width = width;
  c.heads = heads;
  c.context = context;
  c.vocab = vocab;
  return c;
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = {
      {"gpt2", shape(12, 768, 12, 1024, 50257)},
      {"gpt-mini", shape(6, 384, 6, 256, 50257)},
      {"gpt-micro", shape(4, 256, 4, 256, 257)},
      {"gpt-nano", shape(3, 128, 4, 128, 257)},
  };
  return all;
}

void validate(const GptConfig& c) {
  auto at_least = [](const char* field, std::int64_t value, std::int64_t minimum) {
    if (value < minimum) {
      throw ValueError("applications::gpt: " + std::string(field) +
                       " must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
    }
  };
  at_least("layers", c.layers, 1);
  at_least("heads", c.heads, 1);
  at_least("width", c.width, 1);
  at_least("context", c.context, 1);
  at_least("vocab", c.vocab, 2);
  if (c.width % c.heads != 0) {
    throw ValueError("applications::gpt: width (" + std::to_string(c.width) +
                     ") must be a multiple of heads (" + std::to_string(c.heads) + ")");
  }
  if (!(c.dropout >= 0.0 && c.dropout < 1.0)) {
    throw ValueError("applications::gpt: dropout must be in [0, 1), got " +
                     std::to_string(c.dropout));
  }
  if (!(c.layer_norm_epsilon > 0.0)) {
    throw ValueError("applications::gpt: layer_norm_epsilon must be > 0, got " +
                     std::to_string(c.layer_norm_epsilon));
  }
}

std::string block_name(int i, const char* part) {
  return "block_" + std::to_string(i) + "_" + part;
}

KerasTensor add(const KerasTensor& a, const KerasTensor& b, const GptConfig& c,
                const std::string& name) {
  return layers::Add({.dtype = c.dtype, .name = name})({a, b});
}

KerasTensor layer_norm(const KerasTensor& x, const GptConfig& c, const std::string& name) {
  return layers::LayerNormalization(
      {.epsilon = c.layer_norm_epsilon, .dtype = c.dtype, .name = name})(x);
}

KerasTensor dropout(const KerasTensor& x, const GptConfig& c, const std::string& name) {
  if (c.dropout == 0.0) return x;
  layers::DropoutOptions o;
  o.dtype = c.dtype;
  o.name = name;
  return layers::Dropout(c.dropout, o)(x);
}

layers::DenseOptions dense(const GptConfig& c, const std::string& name, const char* activation,
                           const initializers::Initializer& kernel) {
  layers::DenseOptions o;
  o.activation = activation;
  o.kernel_initializer = kernel;
  o.dtype = c.dtype;
  o.name = name;
  return o;
}

// GPT-2 scales the projections that write into the residual stream by 1 / sqrt(2 * layers), so
// that the stream's variance does not grow with depth. MultiHeadAttention has one kernel
// initializer for its four projections: the output kernel is drawn again here after the build.
void scale_residual_projections(Model& model, const GptConfig& c) {
  const double stddev = kInitStddev / std::sqrt(2.0 * c.layers);
  for (int i = 0; i < c.layers; ++i) {
    for (const layers::NamedVariable& v :
         model.get_layer(block_name(i, "attention")).named_variables()) {
      if (v.name.ends_with("attention_output/kernel")) {
        v.value.assign(initializers::random_normal(0.0, stddev)(v.value.shape(), v.value.dtype()));
      }
    }
  }
}

}  // namespace

GptConfig gpt_preset(std::string_view name) {
  for (const Preset& p : presets()) {
    if (name == p.name) return p.config;
  }
  std::string valid;
  for (const std::string& n : gpt_preset_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw ValueError("applications::gpt_preset: unknown preset '" + std::string(name) +
                   "'; valid presets: " + valid);
}

std::vector<std::string> gpt_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.emplace_back(p.name);
  return names;
}

Model gpt(const GptConfig& c) {
  validate(c);
  const initializers::Initializer normal = initializers::random_normal(0.0, kInitStddev);
  const initializers::Initializer residual =
      initializers::random_normal(0.0, kInitStddev / std::sqrt(2.0 * c.layers));

  auto ids = Input({-1}, {.dtype = DType::int32, .name = "token_ids"});  // (B, T)
  layers::ReversibleEmbedding tokens(
      c.vocab, c.width,
      {.embeddings_initializer = normal, .dtype = c.dtype, .name = "token_embedding"});
  KerasTensor x = tokens(ids);  // (B, T, width)
  KerasTensor positions = layers::PositionEmbedding(
      c.context, {.initializer = normal, .dtype = c.dtype, .name = "position_embedding"})(x);
  x = add(x, positions, c, "embeddings_add");
  x = dropout(x, c, "embeddings_dropout");

  for (int i = 0; i < c.layers; ++i) {
    KerasTensor h = layer_norm(x, c, block_name(i, "ln_1"));
    layers::MultiHeadAttentionOptions mha;
    mha.dropout = c.dropout;
    mha.kernel_initializer = normal;
    mha.dtype = c.dtype;
    mha.name = block_name(i, "attention");
    layers::SymbolicAttentionArgs causal;
    causal.use_causal_mask = true;
    h = layers::MultiHeadAttention(c.heads, c.width / c.heads, mha)(h, h, causal);
    x = add(x, h, c, block_name(i, "add_1"));
    h = layer_norm(x, c, block_name(i, "ln_2"));
    h = layers::Dense(4 * c.width, dense(c, block_name(i, "fc"), "gelu_tanh", normal))(h);
    h = layers::Dense(c.width, dense(c, block_name(i, "proj"), "", residual))(h);
    h = dropout(h, c, block_name(i, "dropout"));
    x = add(x, h, c, block_name(i, "add_2"));
  }
  x = layer_norm(x, c, "ln_f");
  KerasTensor logits = tokens.reverse(x);  // (B, T, vocab), the tied head
  Model model(ids, logits, {.name = c.name});
  scale_residual_projections(model, c);
  return model;
}

GptConfig gpt_config(const Model& model) {
  GptConfig c;
  c.name = model.name();
  const layers::ReversibleEmbedding tokens(model.get_layer("token_embedding"));
  c.vocab = tokens.input_dim();
  c.width = tokens.output_dim();
  c.context = layers::PositionEmbedding(model.get_layer("position_embedding")).sequence_length();
  c.dtype = tokens.dtype_policy();
  int blocks = 0;
  for (const layers::Layer& l : model.layers()) {
    if (l.name().starts_with("block_") && l.name().ends_with("_ln_1")) ++blocks;
  }
  if (blocks == 0) {
    throw ValueError("gpt_config: model '" + model.name() +
                     "' has no layer 'block_0_ln_1'; it was not built by applications::gpt()");
  }
  c.layers = blocks;
  const layers::MultiHeadAttention attention(model.get_layer(block_name(0, "attention")));
  c.heads = static_cast<int>(attention.num_heads());
  c.layer_norm_epsilon = layers::LayerNormalization(model.get_layer("ln_f")).epsilon();
  c.dropout = 0.0;
  for (const layers::Layer& l : model.layers()) {
    if (l.name() == "embeddings_dropout")
      c.dropout = l.impl().get_config().at("rate").get<double>();
  }
  return c;
}

double gpt_step_flops(const GptConfig& c, std::int64_t batch, std::int64_t seq_len) {
  const double tokens = static_cast<double>(batch) * static_cast<double>(seq_len);
  const double width = static_cast<double>(c.width);
  const double matmul_weights =
      12.0 * c.layers * width * width + static_cast<double>(c.vocab) * width;
  return 6.0 * tokens * matmul_weights +
         12.0 * tokens * c.layers * static_cast<double>(seq_len) * width;
}

}  // namespace mixprec::applications
