// Dense: y = activation(x W + b). x (..., in), W (in, units), b (units,) -> y (..., units).
#include "mixprec/layers/dense.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/activations.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "ops/dense_op.h"

namespace mixprec::layers {

namespace {

class DenseImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["units"] = units_;
    c["activation"] = activation_;
    c["use_bias"] = use_bias_;
    c["kernel_initializer"] =
        detail::initializer_config(kernel_initializer_, name(), "kernel_initializer");
    c["bias_initializer"] =
        detail::initializer_config(bias_initializer_, name(), "bias_initializer");
    return c;
  }
  DenseImpl(std::int64_t units, const DenseOptions& o)
      : LayerImpl("Dense", {o.dtype, o.name, o.trainable}),
        units_(units),
        activation_(o.activation),
        use_bias_(o.use_bias),
        kernel_initializer_(o.kernel_initializer),
        bias_initializer_(o.bias_initializer) {
    if (units <= 0) {
      throw ValueError(name() + ": Dense needs a positive number of units, got " +
                       std::to_string(units));
    }
    check_activation_name(activation_, name());
  }

  bool uses_matmul() const override { return true; }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    if (s.size() < 2) {
      throw ShapeError(name() +
                       ": Dense expects a rank-2 (or higher) input (batch, ..., features), "
                       "got shape " +
                       partial_shape_to_string(s) + "; add a batch axis or Flatten first");
    }
    if (s.back() < 0) {
      throw ShapeError(name() + ": Dense needs a known last axis (the features), got shape " +
                       partial_shape_to_string(s) + "; give mp::Input the feature size");
    }
    if (kernel_.defined() && s.back() != kernel_.dim(0)) {
      throw ShapeError(name() + ": expected an input with " + std::to_string(kernel_.dim(0)) +
                       " features (last axis), got shape " + partial_shape_to_string(s) +
                       "; the layer was built on its first call, so feed it the same feature size "
                       "or use a new layer");
    }
  }

  void build(const std::vector<PartialShape>& shapes) override {
    const std::int64_t in = shapes[0].back();
    kernel_ = add_weight("kernel", Shape{in, units_}, kernel_initializer_);
    if (use_bias_) bias_ = add_weight("bias", Shape{units_}, bias_initializer_);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    PartialShape out = shapes[0];
    out.back() = units_;
    return {out};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    check_floating(inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (..., in), already in the compute dtype
    check_floating(x.dtype());
    // DESIGN §2.4: with the switch off, a 16-bit matmul rounds its partial sums to the compute
    // dtype (the slow reference path on the CPU); otherwise partial sums are float32, and the
    // float32 master kernel and bias are read in the compute dtype inside the op (dense_forward:
    // the same values as matmul(x, read(kernel_)) + read(bias_) with less memory traffic, and on
    // CUDA the bias and relu/gelu as cuBLASLt epilogues of the product).
    const Accumulation accumulation = accumulation_dtype() == x.dtype() && is_16bit_float(x.dtype())
                                          ? Accumulation::compute_dtype
                                          : Accumulation::float32;
    const Tensor bias = use_bias_ ? bias_ : Tensor();
    if (const auto fused = dense_activation_from_name(activation_)) {
      return {dense_forward(x, kernel_, bias, *fused, accumulation)};
    }
    // Activations the op does not fuse (sigmoid, softmax, ...) apply to its linear result.
    return {apply_activation(
        activation_, dense_forward(x, kernel_, bias, DenseActivation::linear, accumulation))};
  }

  void check_floating(DType dtype) const {
    if (!is_floating(dtype)) {
      throw DTypeError(name() + ": Dense needs a floating input, got " +
                       std::string(dtype_name(dtype)) +
                       "; convert it first, e.g. x.to(mp::kFloat32) (and scale it, e.g. / 255)");
    }
  }

  std::int64_t units_;
  std::string activation_;
  bool use_bias_;
  initializers::Initializer kernel_initializer_;
  initializers::Initializer bias_initializer_;
  Tensor kernel_, bias_;
};

DenseImpl& dense_impl(const Layer& layer) { return static_cast<DenseImpl&>(layer.impl()); }

}  // namespace

Dense::Dense(std::int64_t units, DenseOptions options)
    : Layer(std::make_shared<DenseImpl>(units, options)) {}

Dense::Dense(const Layer& layer) : Layer(layer) {
  if (dynamic_cast<DenseImpl*>(&impl()) == nullptr) {
    throw ValueError("Dense: layer '" + layer.name() + "' is a " + layer.class_name() +
                     ", not a Dense");
  }
}

std::int64_t Dense::units() const { return dense_impl(*this).units_; }
const std::string& Dense::activation() const { return dense_impl(*this).activation_; }
bool Dense::use_bias() const { return dense_impl(*this).use_bias_; }

Tensor Dense::kernel() const {
  const DenseImpl& d = dense_impl(*this);
  if (!d.kernel_.defined()) {
    throw ValueError(d.name() +
                     ": the kernel does not exist until the layer is built; call the layer on an "
                     "input (or on mp::Input) first");
  }
  return d.kernel_;
}

Tensor Dense::bias() const {
  const DenseImpl& d = dense_impl(*this);
  if (!d.built()) {
    throw ValueError(d.name() +
                     ": the bias does not exist until the layer is built; call the layer on an "
                     "input (or on mp::Input) first");
  }
  return d.bias_;
}

}  // namespace mixprec::layers
