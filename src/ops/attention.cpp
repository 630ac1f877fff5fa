// scaled_dot_product_attention: argument checks, the choice between the device's fused kernel
// (NnKernels::attention_*) and the composition (ops/attention_reference.cpp), and the fused
// path's backward node, which keeps q, k, v, the output and the (batch, heads, q_len) float32
// log-sum-exp: never the q_len x k_len probabilities.
#include "ops/attention.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "core/counter_hash.h"
#include "core/env_switch.h"
#include "core/replay_parameters.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"
#include "mixprec/random.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

constinit core::EnvSwitch g_attention_fusion("MIXPREC_FUSION");

void check_rank4(const char* op, const char* what, const char* layout, const Tensor& t) {
  if (t.rank() != 4) {
    throw ShapeError(std::string(op) + ": " + what + " must have rank 4, " + layout + ", got " +
                     ops::describe(t) +
                     "; reshape a Dense projection (B, T, H * D) to (B, T, H, D) first");
  }
}

// The user's mask as a bool view (batch, heads, q_len, k_len): rank 2 is (Tq, Tk), rank 3
// (B, Tq, Tk) (one mask for every head, as Keras' attention_mask), rank 4 (B, H, Tq, Tk); each
// extent equal to the attention's or 1 (broadcast: stride 0).
Tensor mask_view(const char* op, const Tensor& mask, const ops::AttentionCall& c, const Tensor& q) {
  if (mask.dtype() != DType::bool_) {
    throw DTypeError(std::string(op) + ": the mask must be bool (true = attend), got " +
                     ops::describe(mask) +
                     "; build it with a comparison such as not_equal(ids, 0)");
  }
  ops::check_same_device(op, q, mask);
  const std::vector<std::int64_t> full{c.batch, c.heads, c.q_len, c.k_len};
  std::vector<int> axis_of;  // which axis of (B, H, Tq, Tk) each mask axis is
  if (mask.rank() == 2) {
    axis_of = {2, 3};
  } else if (mask.rank() == 3) {
    axis_of = {0, 2, 3};
  } else if (mask.rank() == 4) {
    axis_of = {0, 1, 2, 3};
  } else {
    throw ShapeError(std::string(op) +
                     ": the mask must be (Tq, Tk), (B, Tq, Tk) or (B, H, Tq, Tk)" +
                     " with extents equal or 1, got " + ops::describe(mask));
  }
  const Tensor m = mask.detach().contiguous();
  std::vector<std::int64_t> strides(4, 0);
  for (std::size_t a = 0; a < axis_of.size(); ++a) {
    const auto extent = m.dim(static_cast<int>(a));
    const auto want = full[static_cast<std::size_t>(axis_of[a])];
    if (extent != want && extent != 1) {
      throw ShapeError(std::string(op) + ": the mask " + ops::describe(mask) +
                       " does not broadcast to (B, H, Tq, Tk) = " + Shape(full).to_string() +
                       " (axis " + std::to_string(a) + " has " + std::to_string(extent) +
                       ", expected " + std::to_string(want) + " or 1)");
    }
    if (extent != 1) strides[static_cast<std::size_t>(axis_of[a])] = m.strides()[a];
  }
  return core::make_view(m, Shape(full), strides, m.offset());
}

struct AttentionBackward final : autograd::Node {
  Tensor q, k, v, out, lse, mask;
  AttentionGeometry geometry;
  std::vector<Tensor> backward(const Tensor& g) override {
    ops::check_same_device(name().c_str(), g, q);
    const Tensor dout = g.dtype() == q.dtype() ? g.contiguous() : g.to(q.dtype()).contiguous();
    AttentionGradients r =
        backend_for(q.device()).nn->attention_backward(dout, q, k, v, out, lse, mask, geometry);
    return {r.dq, r.dk, r.dv};
  }
  std::string name() const override { return "ScaledDotProductAttentionBackward"; }
  void release_saved() override { q = k = v = out = lse = mask = Tensor(); }
};

}  // namespace

namespace ops {

AttentionCall resolve_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                const AttentionOptions& options) {
  check_floating(op, q);
  check_same_dtype_device(op, q, k);
  check_same_dtype_device(op, q, v);
  check_rank4(op, "q", "(B, Tq, H, D)", q);
  check_rank4(op, "k", "(B, Tk, H, D)", k);
  check_rank4(op, "v", "(B, Tk, H, Dv)", v);
  if (k.dim(0) != q.dim(0) || k.dim(2) != q.dim(2) || k.dim(3) != q.dim(3) ||
      v.dim(0) != q.dim(0) || v.dim(1) != k.dim(1) || v.dim(2) != q.dim(2)) {
    throw ShapeError(std::string(op) + ": q (B, Tq, H, D), k (B, Tk, H, D) and v (B, Tk, H, Dv)" +
                     " must agree in B, H, D and Tk; got q " + q.shape().to_string() + ", k " +
                     k.shape().to_string() + ", v " + v.shape().to_string());
  }
  AttentionCall c;
  c.batch = q.dim(0), c.q_len = q.dim(1), c.heads = q.dim(2), c.head_dim = q.dim(3);
  c.k_len = k.dim(1), c.value_dim = v.dim(3);
  if (options.scale) {
    if (!std::isfinite(*options.scale)) {
      throw ValueError(std::string(op) + ": scale must be finite, got " +
                       std::to_string(*options.scale) + "; leave it unset for 1 / sqrt(D)");
    }
    c.scale = *options.scale;
  } else {
    c.scale = c.head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(c.head_dim)) : 1.0;
  }
  c.causal = options.causal;
  if (options.mask.defined()) c.mask = mask_view(op, options.mask, c, q);
  if (!(options.dropout_rate >= 0.0 && options.dropout_rate < 1.0)) {
    throw ValueError(std::string(op) + ": dropout_rate must be in [0, 1), got " +
                     std::to_string(options.dropout_rate) +
                     " (it is the fraction of probabilities dropped)");
  }
  c.dropout_rate = options.dropout_rate;
  c.dropout = options.training && options.dropout_rate > 0.0;
  if (c.dropout) {
    // A step captured for CUDA graph replays records the draw (a given seed is the same every
    // step): the kernels read the key from the replay buffer (core::ReplayParameters).
    core::ReplayParameters* replay = core::ReplayParameters::active();
    if (replay != nullptr && !(replay->device() == q.device())) replay = nullptr;
    c.dropout_base = options.seed        ? *options.seed
                     : replay != nullptr ? replay->draw(default_generator())
                                         : default_generator().next_u64();
  }
  return c;
}

}  // namespace ops

bool attention_fusion_enabled() { return g_attention_fusion.enabled(); }
void set_attention_fusion(std::optional<bool> enabled) { g_attention_fusion.set(enabled); }

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                           const AttentionOptions& options) {
  const ops::AttentionCall c = ops::resolve_attention("attention_reference", q, k, v, options);
  return ops::attention_composition(q, k, v, c);
}

Tensor attention_scores(const Tensor& q, const Tensor& k, const AttentionOptions& options) {
  AttentionOptions o = options;
  o.dropout_rate = 0.0;  // the scores before dropout (and no key drawn for it)
  o.training = false;
  const ops::AttentionCall c = ops::resolve_attention("attention_scores", q, k, k, o);
  return ops::attention_probabilities(q, k, c);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  const ops::AttentionCall c = ops::resolve_attention(kOp, q, k, v, options);
  const NnKernels& nn = *backend_for(q.device()).nn;
  if (!attention_fusion_enabled() || nn.attention_forward == nullptr ||
      nn.attention_backward == nullptr) {
    return ops::attention_composition(q, k, v, c);
  }
  AttentionGeometry g;
  g.batch = c.batch, g.heads = c.heads, g.q_len = c.q_len, g.k_len = c.k_len;
  g.head_dim = c.head_dim, g.value_dim = c.value_dim;
  g.scale = c.scale;
  g.causal = c.causal;
  g.dropout = c.dropout;
  if (c.dropout) {
    g.dropout_base = c.dropout_base;
    g.dropout_threshold = core::keep_threshold(c.dropout_rate);
    // The keep scale as a float32 value (float64 for float64), as the Dropout op rounds it to the
    // dtype of the probabilities it multiplies.
    const double keep = 1.0 / (1.0 - c.dropout_rate);
    g.keep_scale =
        q.dtype() == DType::float64 ? keep : static_cast<double>(static_cast<float>(keep));
  }
  const Tensor qc = q.detach().contiguous();
  const Tensor kc = k.detach().contiguous();
  const Tensor vc = v.detach().contiguous();
  AttentionForward f = nn.attention_forward(qc, kc, vc, c.mask, g);
  if (!autograd::needs_record({&q, &k, &v})) return f.out;
  auto node = std::make_shared<AttentionBackward>();
  node->q = qc, node->k = kc, node->v = vc;
  node->out = f.out.detach();
  node->lse = f.lse;
  node->mask = c.mask;
  node->geometry = g;
  return autograd::record(f.out, node, {q, k, v});
}

}  // namespace mixprec
