// The layer half of model_from_json: one layer's class and options from its checked config
// (layer_config_reader.h). The graph of a model is read by model_config_reader.cpp.
#include "models/layer_config_reader.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "layers/multi_head_attention_config.h"
#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "mixprec/layers/layers.h"
#include "mixprec/layers/multi_head_attention.h"

namespace mixprec::models::config {

std::string read_name(Object& c, const char* key) {
  const std::string name = c.string(key, kMaxNameLength);
  if (name.empty()) c.bad(key, "a non-empty name", c.get(key));
  for (const char ch : name) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == '/') {
      c.bad(key, "a name without '/' or control characters", c.get(key));
    }
  }
  return name;
}

namespace {

mixed_precision::Policy read_policy(Object& c) {
  const json& v = c.get("dtype");
  if (v.is_string()) {
    const auto& name = v.get_ref<const std::string&>();
    const auto names = mixed_precision::Policy::valid_names();
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return mixed_precision::Policy(name);
    }
  }
  std::string valid;
  for (const std::string& n : mixed_precision::Policy::valid_names()) {
    valid += (valid.empty() ? "" : ", ") + n;
  }
  c.bad("dtype", "a policy name (" + valid + ")", v);
}

std::string read_activation(Object& c) {
  const json& v = c.get("activation");
  if (v.is_string()) {
    const auto& name = v.get_ref<const std::string&>();
    const auto names = activation_names();
    if (name.empty() || std::find(names.begin(), names.end(), name) != names.end()) return name;
  }
  c.bad("activation", "an activation name (\"\", \"relu\", \"softmax\", ...)", v);
}

initializers::Initializer read_initializer(Object& c, const char* key) {
  const json& v = c.get(key);
  if (v.is_string()) {
    const auto& name = v.get_ref<const std::string&>();
    const auto names = initializers::Initializer::valid_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      c.bad(key, "an initializer name (glorot_uniform, zeros, ...)", v);
    }
    return initializers::Initializer(name);
  }
  if (!v.is_object()) c.bad(key, "an initializer name or {\"class_name\", \"config\"}", v);
  Object init(v, c.where() + ": " + quote(key));
  const std::string cls = init.string("class_name", 64);
  Object p(init.get("config"), init.where() + ".config");
  init.finish();
  const double big = 1e30;
  if (cls == "constant") {
    const double value = p.number("value", -big, big, Upper::inclusive, "a finite number");
    p.finish();
    return initializers::constant(value);
  }
  if (cls == "random_normal") {
    const double mean = p.number("mean", -big, big, Upper::inclusive, "a finite number");
    const double stddev = p.number("stddev", 0, big, Upper::inclusive, "a number >= 0");
    p.finish();
    return initializers::random_normal(mean, stddev);
  }
  if (cls == "random_uniform") {
    const double lo = p.number("minval", -big, big, Upper::inclusive, "a finite number");
    const double hi = p.number("maxval", lo, big, Upper::inclusive, "a finite number >= minval");
    p.finish();
    return initializers::random_uniform(lo, hi);
  }
  init.bad("class_name", "constant, random_normal or random_uniform", json(cls));
}

layers::Size2d read_size2d(Object& c, const char* key, std::int64_t lo, std::int64_t hi,
                           const char* what) {
  const json& v = c.get(key);
  if (!v.is_array() || v.size() != 2) c.bad(key, "a pair [height, width]", v);
  const auto h = models::config::to_integer(v[0], lo, hi, c.where(), key, what);
  const auto w = models::config::to_integer(v[1], lo, hi, c.where(), key, what);
  return {static_cast<int>(h), static_cast<int>(w)};
}

layers::PaddingMode read_padding(Object& c) {
  const json& v = c.get("padding");
  if (v == "valid" || v == "same") return layers::PaddingMode(v.get<std::string>());
  c.bad("padding", "\"valid\" or \"same\"", v);
}

// name, trainable, dtype: every layer's first three options.
struct Common {
  std::string name;
  bool trainable;
  mixed_precision::Policy dtype;
};

Common read_common(Object& c) {
  Common common{read_name(c), c.boolean("trainable"), read_policy(c)};
  return common;
}

}  // namespace

// A layer class other than InputLayer and the models, from its checked config.
layers::Layer make_layer(const std::string& cls, Object& c, const ModelConfigLimits& limits) {
  using namespace layers;
  const std::int64_t max_extent = limits.max_extent;
  const std::int64_t max_kernel = limits.max_kernel_size;
  if (cls == "Dense") {
    const Common m = read_common(c);
    const std::int64_t units = c.integer("units", 1, max_extent, "a positive integer");
    DenseOptions o;
    o.activation = read_activation(c);
    o.use_bias = c.boolean("use_bias");
    o.kernel_initializer = read_initializer(c, "kernel_initializer");
    o.bias_initializer = read_initializer(c, "bias_initializer");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return Dense(units, o);
  }
  if (cls == "Conv2D") {
    const Common m = read_common(c);
    const std::int64_t filters = c.integer("filters", 1, max_extent, "a positive integer");
    const Size2d kernel = read_size2d(c, "kernel_size", 1, max_kernel, "a positive integer");
    Conv2DOptions o;
    o.strides = read_size2d(c, "strides", 1, max_kernel, "a positive integer");
    o.padding = read_padding(c);
    o.dilation_rate = read_size2d(c, "dilation_rate", 1, max_kernel, "a positive integer");
    o.groups = static_cast<int>(c.integer("groups", 1, max_extent, "a positive integer"));
    if (filters % o.groups != 0) {
      c.bad("groups", "a divisor of \"filters\" (" + std::to_string(filters) + ")",
            c.get("groups"));
    }
    o.activation = read_activation(c);
    o.use_bias = c.boolean("use_bias");
    o.kernel_initializer = read_initializer(c, "kernel_initializer");
    o.bias_initializer = read_initializer(c, "bias_initializer");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return Conv2D(filters, kernel, o);
  }
  if (cls == "DepthwiseConv2D") {
    const Common m = read_common(c);
    const Size2d kernel = read_size2d(c, "kernel_size", 1, max_kernel, "a positive integer");
    DepthwiseConv2DOptions o;
    o.strides = read_size2d(c, "strides", 1, max_kernel, "a positive integer");
    o.padding = read_padding(c);
    o.depth_multiplier =
        static_cast<int>(c.integer("depth_multiplier", 1, max_extent, "a positive integer"));
    o.dilation_rate = read_size2d(c, "dilation_rate", 1, max_kernel, "a positive integer");
    o.activation = read_activation(c);
    o.use_bias = c.boolean("use_bias");
    o.depthwise_initializer = read_initializer(c, "depthwise_initializer");
    o.bias_initializer = read_initializer(c, "bias_initializer");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return DepthwiseConv2D(kernel, o);
  }
  if (cls == "BatchNormalization") {
    const Common m = read_common(c);
    BatchNormalizationOptions o;
    // The layer's own check (the last axis only) runs on the input shape in the check pass.
    o.axis = static_cast<int>(c.integer("axis", -static_cast<std::int64_t>(kMaxRank), kMaxRank - 1,
                                        "an axis in [-8, 7]"));
    o.momentum = c.number("momentum", 0, 1, Upper::inclusive, "a number in [0, 1]");
    o.epsilon = c.number("epsilon", 0, 1, Upper::inclusive, "a number in (0, 1]");
    if (!(o.epsilon > 0)) c.bad("epsilon", "a number in (0, 1]", c.get("epsilon"));
    o.center = c.boolean("center");
    o.scale = c.boolean("scale");
    o.beta_initializer = read_initializer(c, "beta_initializer");
    o.gamma_initializer = read_initializer(c, "gamma_initializer");
    o.moving_mean_initializer = read_initializer(c, "moving_mean_initializer");
    o.moving_variance_initializer = read_initializer(c, "moving_variance_initializer");
    o.synchronized = c.has("synchronized") && c.boolean("synchronized");  // Keras 3's option
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return BatchNormalization(o);
  }
  if (cls == "LayerNormalization" || cls == "RMSNormalization") {
    const Common m = read_common(c);
    // The layer's own check (the last axis only) runs on the input shape in the check pass.
    const int axis = static_cast<int>(c.integer("axis", -static_cast<std::int64_t>(kMaxRank),
                                                kMaxRank - 1, "an axis in [-8, 7]"));
    const double epsilon = c.number("epsilon", 0, 1, Upper::inclusive, "a number in (0, 1]");
    if (!(epsilon > 0)) c.bad("epsilon", "a number in (0, 1]", c.get("epsilon"));
    if (cls == "RMSNormalization") {
      RMSNormalizationOptions o;
      o.axis = axis, o.epsilon = epsilon;
      o.scale_initializer = read_initializer(c, "scale_initializer");
      o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
      c.finish();
      return RMSNormalization(o);
    }
    LayerNormalizationOptions o;
    o.axis = axis, o.epsilon = epsilon;
    o.center = c.boolean("center");
    o.scale = c.boolean("scale");
    o.beta_initializer = read_initializer(c, "beta_initializer");
    o.gamma_initializer = read_initializer(c, "gamma_initializer");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return LayerNormalization(o);
  }
  if (cls == "Embedding" || cls == "ReversibleEmbedding") {
    const Common m = read_common(c);
    const std::int64_t input_dim = c.integer("input_dim", 1, max_extent, "a positive integer");
    const std::int64_t output_dim = c.integer("output_dim", 1, max_extent, "a positive integer");
    EmbeddingOptions o;
    o.embeddings_initializer = read_initializer(c, "embeddings_initializer");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    if (cls == "Embedding") return Embedding(input_dim, output_dim, o);
    return ReversibleEmbedding(input_dim, output_dim, o);
  }
  if (cls == "PositionEmbedding") {
    const Common m = read_common(c);
    const std::int64_t length = c.integer("sequence_length", 1, max_extent, "a positive integer");
    PositionEmbeddingOptions o;
    o.initializer = read_initializer(c, "initializer");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return PositionEmbedding(length, o);
  }
  if (cls == "Activation") {
    const Common m = read_common(c);
    const std::string activation = read_activation(c);
    c.finish();
    return Activation(activation, {m.dtype, m.name, m.trainable});
  }
  if (cls == "Softmax" || cls == "Concatenate") {
    const Common m = read_common(c);
    const int axis = static_cast<int>(c.integer("axis", -static_cast<std::int64_t>(kMaxRank),
                                                kMaxRank - 1, "an axis in [-8, 7]"));
    c.finish();
    const LayerOptions o{m.dtype, m.name, m.trainable};
    return cls == "Softmax" ? Layer(Softmax(axis, o)) : Layer(Concatenate(axis, o));
  }
  if (cls == "Dropout") {
    const Common m = read_common(c);
    const double rate = c.number("rate", 0, 1, Upper::exclusive, "a number in [0, 1)");
    DropoutOptions o;
    const json& seed = c.get("seed");
    if (!seed.is_null()) {
      if (!seed.is_number_unsigned()) c.bad("seed", "null or an integer >= 0", seed);
      o.seed = seed.get<std::uint64_t>();
    }
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return Dropout(rate, o);
  }
  if (cls == "MultiHeadAttention") {
    const Common m = read_common(c);
    const std::int64_t heads = c.integer("num_heads", 1, max_extent, "a positive integer");
    const std::int64_t key_dim = c.integer("key_dim", 1, max_extent, "a positive integer");
    MultiHeadAttentionOptions o;
    o.value_dim = c.integer("value_dim", 1, max_extent, "a positive integer");
    o.dropout = c.number("dropout", 0, 1, Upper::exclusive, "a number in [0, 1)");
    o.use_bias = c.boolean("use_bias");
    const json& out = c.get("output_shape");
    if (!out.is_null()) {
      o.output_shape = models::config::to_integer(out, 1, max_extent, c.where(), "output_shape",
                                                  "null or a positive integer");
    }
    o.kernel_initializer = read_initializer(c, "kernel_initializer");
    o.bias_initializer = read_initializer(c, "bias_initializer");
    const json& seed = c.get("seed");
    if (!seed.is_null()) {
      if (!seed.is_number_unsigned()) c.bad("seed", "null or an integer >= 0", seed);
      o.seed = seed.get<std::uint64_t>();
    }
    const bool causal = c.boolean("use_causal_mask");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    MultiHeadAttention layer(heads, key_dim, o);
    layers::detail::set_attention_causal(layer, causal);
    return layer;
  }
  if (cls == "Flatten" || cls == "Add" || cls == "Multiply") {
    const Common m = read_common(c);
    c.finish();
    const LayerOptions o{m.dtype, m.name, m.trainable};
    if (cls == "Flatten") return Flatten(o);
    return cls == "Add" ? Layer(Add(o)) : Layer(Multiply(o));
  }
  if (cls == "MaxPooling2D" || cls == "AveragePooling2D") {
    const Common m = read_common(c);
    const Size2d pool = read_size2d(c, "pool_size", 1, max_kernel, "a positive integer");
    Pooling2DOptions o;
    o.strides = read_size2d(c, "strides", 1, max_kernel, "a positive integer");
    o.padding = read_padding(c);
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return cls == "MaxPooling2D" ? Layer(MaxPooling2D(pool, o)) : Layer(AveragePooling2D(pool, o));
  }
  if (cls == "GlobalAveragePooling2D") {
    const Common m = read_common(c);
    GlobalPooling2DOptions o;
    o.keepdims = c.boolean("keepdims");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return GlobalAveragePooling2D(o);
  }
  if (cls == "Reshape") {
    const Common m = read_common(c);
    const json& t = c.array("target_shape", kMaxRank);
    if (t.empty()) c.bad("target_shape", "a non-empty list of extents", t);
    std::vector<std::int64_t> target;
    int unknown = 0;
    for (const json& e : t) {
      const std::int64_t d = models::config::to_integer(e, -1, max_extent, c.where(),
                                                        "target_shape", "-1 or a positive extent");
      if (d == 0) c.bad("target_shape", "a list of -1 or positive extents", t);
      unknown += d == -1;
      target.push_back(d);
    }
    if (unknown > 1) c.bad("target_shape", "a list with at most one -1", t);
    c.finish();
    return Reshape(target, {m.dtype, m.name, m.trainable});
  }
  if (cls == "Resizing") {
    const Common m = read_common(c);
    const std::int64_t h = c.integer("height", 1, max_extent, "a positive integer");
    const std::int64_t w = c.integer("width", 1, max_extent, "a positive integer");
    ResizingOptions o;
    if (c.get("interpolation") != "bilinear") {
      c.bad("interpolation", "\"bilinear\"", c.get("interpolation"));
    }
    o.interpolation = "bilinear";
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return Resizing(h, w, o);
  }
  if (cls == "ZeroPadding2D") {
    const Common m = read_common(c);
    const json& p = c.get("padding");
    const char* expected = "[[top, bottom], [left, right]] of integers >= 0";
    if (!p.is_array() || p.size() != 2 || !p[0].is_array() || p[0].size() != 2 ||
        !p[1].is_array() || p[1].size() != 2) {
      c.bad("padding", expected, p);
    }
    int v[4];
    for (int i = 0; i < 4; ++i) {
      v[i] = static_cast<int>(models::config::to_integer(p[i / 2][i % 2], 0, max_kernel, c.where(),
                                                         "padding", "an integer >= 0"));
    }
    c.finish();
    return ZeroPadding2D({v[0], v[1]}, {v[2], v[3]}, {m.dtype, m.name, m.trainable});
  }
  if (cls == "Cropping1D") {
    const Common m = read_common(c);
    const json& p = c.get("cropping");
    if (!p.is_array() || p.size() != 2) c.bad("cropping", "[left, right] of integers >= 0", p);
    std::int64_t v[2];
    for (int i = 0; i < 2; ++i) {
      v[i] =
          models::config::to_integer(p[i], 0, max_extent, c.where(), "cropping", "an integer >= 0");
    }
    c.finish();
    return Cropping1D({v[0], v[1]}, {m.dtype, m.name, m.trainable});
  }
  if (cls == "ClassToken") {
    const Common m = read_common(c);
    ClassTokenOptions o;
    o.initializer = read_initializer(c, "initializer");
    o.dtype = m.dtype, o.name = m.name, o.trainable = m.trainable;
    c.finish();
    return ClassToken(o);
  }
  fail(c.where(), "unknown layer class " + quote(cls));
}
}  // namespace mixprec::models::config
