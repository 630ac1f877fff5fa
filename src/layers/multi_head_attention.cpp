// MultiHeadAttention: three projections (Keras' EinsumDense "abc,cde->abde" as a Dense product
// on the kernel viewed as (C, H * dim)), scaled_dot_product_attention on (B, T, H, dim) views (no
// transposes), and the output projection ("abcd,cde->abe": the kernel viewed as
// (H * value_dim, out)).
#include "mixprec/layers/multi_head_attention.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/replay_parameters.h"
#include "layers/layer_config.h"
#include "layers/multi_head_attention_config.h"
#include "mixprec/attention.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "ops/dense_op.h"

namespace mixprec::layers {

namespace {

class MultiHeadAttentionImpl final : public LayerImpl {
 public:
  MultiHeadAttentionImpl(std::int64_t num_heads, std::int64_t key_dim,
                         const MultiHeadAttentionOptions& o)
      : LayerImpl("MultiHeadAttention", {o.dtype, o.name, o.trainable}),
        num_heads_(num_heads),
        key_dim_(key_dim),
        value_dim_(o.value_dim.value_or(key_dim)),
        dropout_(o.dropout),
        use_bias_(o.use_bias),
        output_shape_(o.output_shape),
        kernel_initializer_(o.kernel_initializer),
        bias_initializer_(o.bias_initializer),
        seed_(o.seed) {
    auto positive = [&](const char* what, std::int64_t v) {
      if (v <= 0) {
        throw ValueError(name() + ": MultiHeadAttention needs a positive " + what + ", got " +
                         std::to_string(v));
      }
    };
    positive("num_heads", num_heads_);
    positive("key_dim", key_dim_);
    positive("value_dim", value_dim_);
    if (output_shape_) positive("output_shape", *output_shape_);
    if (!(dropout_ >= 0.0 && dropout_ < 1.0)) {
      throw ValueError(name() + ": MultiHeadAttention dropout must be in [0, 1), got " +
                       std::to_string(dropout_) + " (the fraction of probabilities dropped)");
    }
    if (seed_) generator_.emplace(*seed_);
  }

  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["num_heads"] = num_heads_;
    c["key_dim"] = key_dim_;
    c["value_dim"] = value_dim_;
    c["dropout"] = dropout_;
    c["use_bias"] = use_bias_;
    c["output_shape"] = output_shape_ ? nlohmann::json(*output_shape_) : nlohmann::json(nullptr);
    c["kernel_initializer"] =
        detail::initializer_config(kernel_initializer_, name(), "kernel_initializer");
    c["bias_initializer"] =
        detail::initializer_config(bias_initializer_, name(), "bias_initializer");
    c["seed"] = seed_ ? nlohmann::json(*seed_) : nlohmann::json(nullptr);
    // Keras keeps this call argument in the functional graph's node; mixprec records it once per
    // layer (SymbolicAttentionArgs).
    c["use_causal_mask"] = causal_;
    return c;
  }

  bool uses_matmul() const override { return true; }
  Generator* own_generator() override { return generator_ ? &*generator_ : nullptr; }

  void validate_input_count(std::size_t count) const override {
    if (count < 2 || count > 4) {
      throw ValueError(name() + ": MultiHeadAttention takes [query, value (, key) (, " +
                       "attention_mask)], got " + std::to_string(count) + " inputs");
    }
  }

  // Which of the inputs are the key and the mask: inputs[2] is the key unless it is bool.
  struct Roles {
    int key = 1;    // index of the key (the value when absent)
    int mask = -1;  // index of the mask, -1 for none
  };
  template <typename DTypeOf>
  Roles roles(std::size_t count, DTypeOf dtype_of) const {
    Roles r;
    if (count >= 3) {
      if (dtype_of(2) == DType::bool_) {
        r.mask = 2;
        if (count == 4) {
          throw ValueError(name() + ": MultiHeadAttention's inputs are [query, value (, key) (, " +
                           "attention_mask)]; the third was a bool mask and a fourth followed");
        }
      } else {
        r.key = 2;
        if (count == 4) r.mask = 3;
      }
    }
    return r;
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    const Roles r = roles(inputs.size(), [&](std::size_t i) { return inputs[i].dtype; });
    for (int i : {0, 1, r.key}) check_floating(inputs[static_cast<std::size_t>(i)].dtype, i);
    if (r.mask >= 0 && inputs[static_cast<std::size_t>(r.mask)].dtype != DType::bool_) {
      throw DTypeError(name() + ": attention_mask must be bool (true = attend), got " +
                       std::string(dtype_name(inputs[static_cast<std::size_t>(r.mask)].dtype)));
    }
    std::vector<PartialShape> shapes;
    for (const TensorSpec& s : inputs) shapes.push_back(s.shape);
    return {TensorSpec{compute_output_shape(shapes)[0], inputs[0].dtype}};
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    auto need_rank3 = [&](const char* what, const PartialShape& s) {
      if (s.size() != 3) {
        throw ShapeError(name() + ": MultiHeadAttention expects " + what +
                         " of rank 3 (batch, length, features), got shape " +
                         partial_shape_to_string(s) + " (other attention axes are not supported)");
      }
      if (s[2] < 0) {
        throw ShapeError(name() + ": MultiHeadAttention needs the features (last axis) of " + what +
                         " known, got shape " + partial_shape_to_string(s));
      }
    };
    // The mask's role is known from its rank here (bool dtypes are not in the shapes): a rank-3
    // third input with the query's length and the value's length is checked as either.
    const PartialShape& q = shapes[0];
    const PartialShape& v = shapes[1];
    need_rank3("the query", q);
    need_rank3("the value", v);
    auto mismatch = [&](const std::string& what) {
      std::string got;
      for (const PartialShape& s : shapes)
        got += (got.empty() ? "" : ", ") + partial_shape_to_string(s);
      throw ShapeError(name() + ": " + what + "; got shapes " + got +
                       " for [query, value (, key) (, attention_mask)]");
    };
    auto same = [](std::int64_t a, std::int64_t b) { return a < 0 || b < 0 || a == b; };
    if (!same(q[0], v[0])) mismatch("the query and the value must have the same batch size");
    for (std::size_t i = 2; i < shapes.size(); ++i) {
      const PartialShape& s = shapes[i];
      need_rank3(i == 2 ? "the key (or attention_mask)" : "the attention_mask", s);
      if (!same(s[0], q[0])) mismatch("every input must have the query's batch size");
    }
    if (built()) {
      auto check_features = [&](const char* what, std::int64_t got, std::int64_t want) {
        if (got != want) {
          throw ShapeError(name() + ": the layer was built for " + what + " with " +
                           std::to_string(want) + " features, got " + std::to_string(got) +
                           "; feed the same feature sizes or use a new layer");
        }
      };
      check_features("the query", q[2], query_kernel_.dim(0));
      check_features("the value", v[2], value_kernel_.dim(0));
    }
  }

  // The key's features need the dtypes (a bool third input is the mask, not the key).
  void build_from_specs(const std::vector<TensorSpec>& inputs) override {
    const Roles r = roles(inputs.size(), [&](std::size_t i) { return inputs[i].dtype; });
    key_features_ = inputs[static_cast<std::size_t>(r.key)].shape.back();
    std::vector<PartialShape> shapes;
    for (const TensorSpec& s : inputs) shapes.push_back(s.shape);
    build(shapes);
  }

  void build(const std::vector<PartialShape>& shapes) override {
    const std::int64_t cq = shapes[0][2], cv = shapes[1][2];
    const std::int64_t ck = key_features_ > 0 ? key_features_ : cv;
    const std::int64_t out = output_shape_.value_or(cq);
    const std::int64_t h = num_heads_;
    query_kernel_ = add_weight("query/kernel", Shape{cq, h, key_dim_}, kernel_initializer_);
    if (use_bias_) query_bias_ = add_weight("query/bias", Shape{h, key_dim_}, bias_initializer_);
    key_kernel_ = add_weight("key/kernel", Shape{ck, h, key_dim_}, kernel_initializer_);
    if (use_bias_) key_bias_ = add_weight("key/bias", Shape{h, key_dim_}, bias_initializer_);
    value_kernel_ = add_weight("value/kernel", Shape{cv, h, value_dim_}, kernel_initializer_);
    if (use_bias_) value_bias_ = add_weight("value/bias", Shape{h, value_dim_}, bias_initializer_);
    output_kernel_ =
        add_weight("attention_output/kernel", Shape{h, value_dim_, out}, kernel_initializer_);
    if (use_bias_)
      output_bias_ = add_weight("attention_output/bias", Shape{out}, bias_initializer_);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& q = shapes[0];
    return {PartialShape{q[0], q[1], output_shape_.value_or(q[2])}};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions& options) override {
    const Roles r = roles(inputs.size(), [&](std::size_t i) { return inputs[i].dtype(); });
    const Tensor& query = inputs[0];                              // (B, Tq, Cq), compute dtype
    const Tensor& value = inputs[1];                              // (B, Tv, Cv)
    const Tensor& key = inputs[static_cast<std::size_t>(r.key)];  // (B, Tv, Ck)
    for (int i : {0, 1, r.key}) check_floating(inputs[static_cast<std::size_t>(i)].dtype(), i);
    if (key.dim(1) != value.dim(1) || key.dim(2) != key_kernel_.dim(0)) {
      throw ShapeError(name() + ": the key must be (batch, " + std::to_string(value.dim(1)) +
                       " (the value's length), " + std::to_string(key_kernel_.dim(0)) +
                       " features), got " + key.shape().to_string());
    }
    const std::int64_t b = query.dim(0), tq = query.dim(1), tv = value.dim(1);
    const std::int64_t h = num_heads_;
    const Tensor q = reshape(project(query, query_kernel_, query_bias_), Shape{b, tq, h, key_dim_});
    const Tensor k = reshape(project(key, key_kernel_, key_bias_), Shape{b, tv, h, key_dim_});
    const Tensor v =
        reshape(project(value, value_kernel_, value_bias_), Shape{b, tv, h, value_dim_});

    AttentionOptions o;
    o.scale = 1.0 / std::sqrt(static_cast<double>(key_dim_));
    const bool causal = eager_causal_.value_or(causal_);
    Tensor mask;
    if (r.mask >= 0) {
      mask = inputs[static_cast<std::size_t>(r.mask)];
      if (mask.shape() != Shape{b, tq, tv}) {
        throw ShapeError(name() +
                         ": attention_mask must be (batch, query length, value length) = " +
                         Shape{b, tq, tv}.to_string() + ", got " + mask.shape().to_string());
      }
    }
    if (causal && tq == tv) {
      o.causal = true;  // the op's bottom-right rule is Keras' lower triangle when Tq == Tv
    } else if (causal) {
      mask = combine(mask, top_left_causal(tq, tv, query.device()));
    }
    o.mask = mask;
    o.dropout_rate = dropout_;
    o.training = options.training;
    if (options.training && dropout_ > 0.0) {
      Generator& gen = generator_ ? *generator_ : default_generator();
      // A step captured for CUDA graph replays records the draw; the attention's kernels read
      // the key from the replay buffer (core::ReplayParameters).
      core::ReplayParameters* replay = core::ReplayParameters::active();
      if (replay != nullptr && !(replay->device() == query.device())) replay = nullptr;
      o.seed = replay != nullptr ? replay->draw(gen) : gen.next_u64();
    }
    // call_with_scores: the probabilities before dropout, (B, H, Tq, Tv), from the composition.
    if (want_scores_) scores_ = attention_scores(q, k, o);
    const Tensor attended = scaled_dot_product_attention(q, k, v, o);  // (B, Tq, H, Dv)
    const Tensor flat = reshape(attended, Shape{b, tq, h * value_dim_});
    const std::int64_t out = output_kernel_.dim(2);
    const Tensor w = reshape(output_kernel_, Shape{h * value_dim_, out});
    return {dense_forward(flat, w, use_bias_ ? output_bias_ : Tensor(), DenseActivation::linear,
                          accumulation(flat.dtype()))};
  }

  // x (B, T, C) times kernel (C, H, dim) viewed as (C, H * dim), plus the bias (H, dim) viewed
  // as (H * dim): (B, T, H * dim).
  Tensor project(const Tensor& x, const Tensor& kernel, const Tensor& bias) const {
    const std::int64_t n = kernel.dim(1) * kernel.dim(2);
    return dense_forward(x, reshape(kernel, Shape{kernel.dim(0), n}),
                         bias.defined() ? reshape(bias, Shape{n}) : Tensor(),
                         DenseActivation::linear, accumulation(x.dtype()));
  }

  Accumulation accumulation(DType dtype) const {
    return accumulation_dtype() == dtype && is_16bit_float(dtype) ? Accumulation::compute_dtype
                                                                  : Accumulation::float32;
  }

  static Tensor top_left_causal(std::int64_t tq, std::int64_t tv, Device device) {
    const TensorOptions f{.dtype = DType::float64, .device = device};
    const Tensor j = reshape(arange(0.0, static_cast<double>(tv), 1.0, f), Shape{1, tv});
    const Tensor i = reshape(arange(0.0, static_cast<double>(tq), 1.0, f), Shape{tq, 1});
    return less_equal(j, i);  // (Tq, Tv)
  }

  static Tensor combine(const Tensor& mask, const Tensor& causal) {
    if (!mask.defined()) return causal;
    const TensorOptions f{.dtype = DType::float32, .device = causal.device()};
    return greater(where(causal, cast(mask, DType::float32), zeros({}, f)), full({}, 0.5, f));
  }

  void check_floating(DType dtype, int index) const {
    static const char* const kWhat[] = {"query", "value", "key"};
    if (!is_floating(dtype)) {
      throw DTypeError(name() + ": MultiHeadAttention needs a floating " +
                       kWhat[std::min(index, 2)] + ", got " + std::string(dtype_name(dtype)));
    }
  }

  std::int64_t num_heads_, key_dim_, value_dim_;
  double dropout_;
  bool use_bias_;
  std::optional<std::int64_t> output_shape_;
  initializers::Initializer kernel_initializer_, bias_initializer_;
  std::optional<std::uint64_t> seed_;
  std::optional<Generator> generator_;
  bool causal_ = false;               // the symbolic calls' use_causal_mask
  bool causal_fixed_ = false;         // a symbolic call has set causal_
  std::optional<bool> eager_causal_;  // during an eager call: its use_causal_mask
  bool want_scores_ = false;          // during call_with_scores: keep the scores in scores_
  Tensor scores_;
  std::int64_t key_features_ = 0;  // the key's features (build_from_specs)
  Tensor query_kernel_, query_bias_, key_kernel_, key_bias_, value_kernel_, value_bias_;
  Tensor output_kernel_, output_bias_;
};

MultiHeadAttentionImpl& mha_impl(const Layer& layer) {
  return static_cast<MultiHeadAttentionImpl&>(layer.impl());
}

// Restores the eager call's causal setting on exit (also when the call throws).
struct EagerCausal {
  MultiHeadAttentionImpl& impl;
  EagerCausal(MultiHeadAttentionImpl& i, bool causal) : impl(i) { impl.eager_causal_ = causal; }
  ~EagerCausal() { impl.eager_causal_.reset(); }
};

}  // namespace

MultiHeadAttention::MultiHeadAttention(std::int64_t num_heads, std::int64_t key_dim,
                                       MultiHeadAttentionOptions options)
    : Layer(std::make_shared<MultiHeadAttentionImpl>(num_heads, key_dim, options)) {}

MultiHeadAttention::MultiHeadAttention(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<MultiHeadAttentionImpl*>(&impl()) == nullptr) {
    throw ValueError("MultiHeadAttention: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a MultiHeadAttention");
  }
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& value,
                                      const AttentionArgs& args) const {
  MultiHeadAttentionImpl& m = mha_impl(*this);
  std::vector<Tensor> inputs{query, value};
  if (args.key.defined()) inputs.push_back(args.key);
  if (args.attention_mask.defined()) inputs.push_back(args.attention_mask);
  EagerCausal scope(m, args.use_causal_mask);
  return m.call_eager(inputs, CallOptions{.training = args.training})[0];
}

AttentionWithScores MultiHeadAttention::call_with_scores(const Tensor& query, const Tensor& value,
                                                         const AttentionArgs& args) const {
  MultiHeadAttentionImpl& m = mha_impl(*this);
  struct KeepScores {  // resets the request and drops the scores on exit, also when it throws
    MultiHeadAttentionImpl& impl;
    explicit KeepScores(MultiHeadAttentionImpl& i) : impl(i) { impl.want_scores_ = true; }
    ~KeepScores() {
      impl.want_scores_ = false;
      impl.scores_ = Tensor();
    }
  } keep(m);
  AttentionWithScores out;
  out.output = (*this)(query, value, args);
  out.scores = m.scores_;
  return out;
}

KerasTensor MultiHeadAttention::operator()(const KerasTensor& query, const KerasTensor& value,
                                           const SymbolicAttentionArgs& args) const {
  MultiHeadAttentionImpl& m = mha_impl(*this);
  if (m.causal_fixed_ && m.causal_ != args.use_causal_mask) {
    throw ValueError(m.name() + ": this layer was called with use_causal_mask = " +
                     (m.causal_ ? "true" : "false") +
                     " before; a layer in a functional model keeps one setting, so use a second "
                     "MultiHeadAttention for the other");
  }
  m.causal_ = args.use_causal_mask;
  m.causal_fixed_ = true;
  std::vector<KerasTensor> inputs{query, value};
  if (args.key.defined()) inputs.push_back(args.key);
  if (args.attention_mask.defined()) inputs.push_back(args.attention_mask);
  return Layer::operator()(inputs);
}

std::int64_t MultiHeadAttention::num_heads() const { return mha_impl(*this).num_heads_; }
std::int64_t MultiHeadAttention::key_dim() const { return mha_impl(*this).key_dim_; }
std::int64_t MultiHeadAttention::value_dim() const { return mha_impl(*this).value_dim_; }
bool MultiHeadAttention::use_causal_mask() const { return mha_impl(*this).causal_; }

namespace detail {

// For the config reader: the symbolic calls' causal setting of a layer read from a config.
void set_attention_causal(const Layer& layer, bool causal) {
  MultiHeadAttentionImpl& m = mha_impl(layer);
  m.causal_ = causal;
  m.causal_fixed_ = true;
}

}  // namespace detail

}  // namespace mixprec::layers
