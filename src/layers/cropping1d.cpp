// Cropping1D: x (batch, steps, features) -> x[:, left : steps - right, :].
#include "mixprec/layers/cropping1d.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::layers {

namespace {

class Cropping1DImpl final : public LayerImpl {
 public:
  Cropping1DImpl(const Cropping1DAmounts& cropping, const LayerOptions& o)
      : LayerImpl("Cropping1D", o), cropping_(cropping) {
    if (cropping.left < 0 || cropping.right < 0) {
      throw ValueError(name() + ": Cropping1D needs cropping amounts >= 0, got (" +
                       std::to_string(cropping.left) + ", " + std::to_string(cropping.right) + ")");
    }
  }

  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["cropping"] = {cropping_.left, cropping_.right};
    return c;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    if (s.size() != 3) {
      throw ShapeError(name() +
                       ": Cropping1D expects an input (batch, steps, features), got shape " +
                       partial_shape_to_string(s));
    }
    if (s[1] >= 0) check_steps(s[1], partial_shape_to_string(s));
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    PartialShape s = shapes[0];
    if (s[1] >= 0) s[1] -= cropping_.left + cropping_.right;
    return {s};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];
    check_steps(x.dim(1), x.shape().to_string());
    return {slice(x, 1, cropping_.left, x.dim(1) - cropping_.right)};
  }

 private:
  void check_steps(std::int64_t steps, const std::string& shape) const {
    if (cropping_.left + cropping_.right >= steps) {
      throw ShapeError(name() + ": cropping (" + std::to_string(cropping_.left) + ", " +
                       std::to_string(cropping_.right) + ") leaves no step of the input " + shape);
    }
  }

  Cropping1DAmounts cropping_;
};

}  // namespace

Cropping1D::Cropping1D(Cropping1DAmounts cropping, LayerOptions options)
    : Layer(std::make_shared<Cropping1DImpl>(cropping, options)) {}

}  // namespace mixprec::layers
