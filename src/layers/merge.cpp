// Add, Multiply (broadcasting elementwise) and Concatenate (along an axis) of two or more inputs.
#include "mixprec/layers/merge.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "layers/activation_fusion.h"
#include "layers/add_norm_fusion.h"
#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "ops/add_layer_norm.h"
#include "ops/add_relu.h"

namespace mixprec::layers {

namespace {

class MergeImpl : public LayerImpl {
 public:
  using LayerImpl::LayerImpl;

  void validate_input_count(std::size_t count) const override {
    if (count < 2) {
      throw ValueError(name() + ": " + class_name() + " merges at least 2 inputs, got " +
                       std::to_string(count) + "; call it on a list: layer({a, b})");
    }
  }
};

// NumPy broadcasting on partial shapes: an unknown extent matches anything; the result is unknown
// unless the other extent is known and not 1.
class ElementwiseMergeImpl final : public MergeImpl {
 public:
  nlohmann::json get_config() const override { return base_config(); }
  enum class Op { add, multiply };
  ElementwiseMergeImpl(Op op, const LayerOptions& o)
      : MergeImpl(op == Op::add ? "Add" : "Multiply", o), op_(op) {}

  PartialShape broadcast(const std::vector<PartialShape>& shapes) const {
    PartialShape out = shapes[0];
    for (std::size_t k = 1; k < shapes.size(); ++k) {
      const PartialShape& s = shapes[k];
      PartialShape r(std::max(out.size(), s.size()), 1);
      for (std::size_t i = 1; i <= r.size(); ++i) {
        const std::int64_t a = i <= out.size() ? out[out.size() - i] : 1;
        const std::int64_t b = i <= s.size() ? s[s.size() - i] : 1;
        std::int64_t d;
        if (a == b || b == 1) {
          d = a;
        } else if (a == 1) {
          d = b;
        } else if (a < 0 || b < 0) {
          d = a < 0 ? b : a;
        } else {
          throw ShapeError(name() + ": " + class_name() +
                           " needs input shapes that are equal (or "
                           "broadcast), got " +
                           partial_shape_to_string(shapes[0]) + " (input 0) and " +
                           partial_shape_to_string(s) + " (input " + std::to_string(k) + ")");
        }
        r[r.size() - i] = d;
      }
      out = r;
    }
    return out;
  }

  void validate(const std::vector<PartialShape>& shapes) const override { broadcast(shapes); }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return {broadcast(shapes)};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    if (op_ == Op::add) {
      if (detail::AddNormScope* norm = detail::take_add_norm_request()) {
        if (auto sum = add_and_normalize(inputs, *norm)) return {*sum};
      }
    }
    // The model's Add + ReLU fusion (activation_fusion.h): the last sum is ops::add_relu.
    const bool relu = op_ == Op::add && detail::take_fused_activation() == UnaryOp::relu;
    Tensor y = inputs[0];
    for (std::size_t i = 1; i < inputs.size(); ++i) {
      if (op_ == Op::add) {
        y = relu && i + 1 == inputs.size() ? ops::add_relu(y, inputs[i]) : add(y, inputs[i]);
      } else {
        y = mul(y, inputs[i]);
      }
    }
    return {y};
  }

  // The model's Add + normalization fusion (add_norm_fusion.h): for two inputs of one shape and
  // dtype that the normalization takes as they are, the sum and its normalization from the fused
  // op; the normalization's output goes to the request. Nullopt (nothing done): the caller adds.
  static std::optional<Tensor> add_and_normalize(const std::vector<Tensor>& inputs,
                                                 detail::AddNormScope& request) {
    if (inputs.size() != 2 || inputs[0].shape() != inputs[1].shape() ||
        inputs[0].dtype() != inputs[1].dtype() || !(inputs[0].device() == inputs[1].device())) {
      return std::nullopt;
    }
    const auto p = detail::fused_norm_parameters(request.norm(), inputs[0]);
    if (!p) return std::nullopt;
    ops::AddNormOutput out =
        p->rms ? ops::add_rms_norm(inputs[0], inputs[1], p->gamma, p->epsilon)
               : ops::add_layer_norm(inputs[0], inputs[1], p->gamma, p->beta, p->epsilon);
    request.set_y(std::move(out.y));
    return std::move(out.sum);
  }

  // The dtype the layer computes and returns for inputs of `input_dtype` (its policy's autocast).
  DType output_dtype(DType input_dtype) const { return autocast_dtype(input_dtype); }

  Op op_;
};

class ConcatenateImpl final : public MergeImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["axis"] = axis_;
    return c;
  }
  ConcatenateImpl(int axis, const LayerOptions& o) : MergeImpl("Concatenate", o), axis_(axis) {}

  int normalized_axis(int rank) const {
    if (axis_ >= rank || axis_ < -rank) {
      throw ShapeError(name() + ": Concatenate axis " + std::to_string(axis_) +
                       " is out of range for inputs of rank " + std::to_string(rank));
    }
    return axis_ < 0 ? axis_ + rank : axis_;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& first = shapes[0];
    const int axis = normalized_axis(static_cast<int>(first.size()));
    for (std::size_t k = 1; k < shapes.size(); ++k) {
      const PartialShape& s = shapes[k];
      bool ok = s.size() == first.size();
      for (std::size_t i = 0; ok && i < s.size(); ++i) {
        if (static_cast<int>(i) != axis && s[i] >= 0 && first[i] >= 0 && s[i] != first[i])
          ok = false;
      }
      if (!ok) {
        throw ShapeError(name() + ": Concatenate along axis " + std::to_string(axis_) +
                         " needs inputs of the same rank whose other extents are equal, got " +
                         partial_shape_to_string(first) + " (input 0) and " +
                         partial_shape_to_string(s) + " (input " + std::to_string(k) + ")");
      }
    }
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const std::size_t axis =
        static_cast<std::size_t>(normalized_axis(static_cast<int>(shapes[0].size())));
    PartialShape out = shapes[0];
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (i == axis) continue;
      for (const PartialShape& s : shapes) {
        if (out[i] < 0) out[i] = s[i];  // a known extent wins over an unknown one
      }
    }
    std::int64_t total = 0;
    for (const PartialShape& s : shapes) {
      if (s[axis] < 0) {
        total = -1;
        break;
      }
      total += s[axis];
    }
    out[axis] = total;
    return {out};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    return {concat(inputs, axis_)};
  }

  int axis_;
};

}  // namespace

std::optional<DType> detail::fusable_add_output(const Layer& layer, DType input_dtype) {
  const auto* add = dynamic_cast<const ElementwiseMergeImpl*>(layer.impl_ptr().get());
  if (add == nullptr || add->op_ != ElementwiseMergeImpl::Op::add) return std::nullopt;
  return add->output_dtype(input_dtype);
}

Add::Add(LayerOptions options)
    : Layer(std::make_shared<ElementwiseMergeImpl>(ElementwiseMergeImpl::Op::add, options)) {}

Multiply::Multiply(LayerOptions options)
    : Layer(std::make_shared<ElementwiseMergeImpl>(ElementwiseMergeImpl::Op::multiply, options)) {}

Concatenate::Concatenate(int axis, LayerOptions options)
    : Layer(std::make_shared<ConcatenateImpl>(axis, options)) {}

int Concatenate::axis() const { return static_cast<const ConcatenateImpl&>(impl()).axis_; }

}  // namespace mixprec::layers
