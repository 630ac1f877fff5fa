// Resizing (bilinear): (batch, H, W, C) -> (batch, height, width, C) in the compute dtype.
#include "mixprec/layers/resizing.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/nn_ops.h"

namespace mixprec::layers {

namespace {

class ResizingImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["height"] = height_;
    c["width"] = width_;
    c["interpolation"] = interpolation_;
    return c;
  }
  ResizingImpl(std::int64_t height, std::int64_t width, const ResizingOptions& o)
      : LayerImpl("Resizing", {o.dtype, o.name, o.trainable}),
        height_(height),
        width_(width),
        interpolation_(o.interpolation) {
    if (height < 1 || width < 1) {
      throw ValueError(name() + ": Resizing needs a positive output size, got (" +
                       std::to_string(height) + ", " + std::to_string(width) + ")");
    }
    if (interpolation_ != "bilinear") {
      throw ValueError(name() + ": Resizing interpolation must be one of 'bilinear', got '" +
                       interpolation_ + "'");
    }
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    if (shapes[0].size() != 4) {
      throw ShapeError(name() +
                       ": Resizing expects a rank-4 input (batch, height, width, channels), got "
                       "shape " +
                       partial_shape_to_string(shapes[0]) + "; add a channel axis with Reshape");
    }
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    return {{s[0], height_, width_, s[3]}};
  }

  // Integer images come out in the compute dtype too (the call converts them).
  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    std::vector<TensorSpec> out = LayerImpl::compute_output_spec(inputs);
    out[0].dtype = compute_dtype();
    return out;
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor x = inputs[0].to(compute_dtype());  // floating inputs are there already
    return {resize_bilinear(x, height_, width_)};
  }

  std::int64_t height_, width_;
  std::string interpolation_;
};

const ResizingImpl& resizing_impl(const Layer& layer) {
  return static_cast<const ResizingImpl&>(layer.impl());
}

}  // namespace

Resizing::Resizing(std::int64_t height, std::int64_t width, ResizingOptions options)
    : Layer(std::make_shared<ResizingImpl>(height, width, options)) {}
std::int64_t Resizing::height() const { return resizing_impl(*this).height_; }
std::int64_t Resizing::width() const { return resizing_impl(*this).width_; }
const std::string& Resizing::interpolation() const { return resizing_impl(*this).interpolation_; }

}  // namespace mixprec::layers
