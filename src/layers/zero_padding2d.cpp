// ZeroPadding2D: (batch, H, W, C) -> (batch, top + H + bottom, left + W + right, C).
#include "mixprec/layers/zero_padding2d.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"

namespace mixprec::layers {

namespace {

class ZeroPadding2DImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    // Keras' ((top, bottom), (left, right))
    c["padding"] = {{padding_.top, padding_.bottom}, {padding_.left, padding_.right}};
    return c;
  }
  ZeroPadding2DImpl(Padding2d padding, const LayerOptions& o)
      : LayerImpl("ZeroPadding2D", o), padding_(padding) {
    if (padding.top < 0 || padding.bottom < 0 || padding.left < 0 || padding.right < 0) {
      throw ValueError(name() + ": ZeroPadding2D amounts must be >= 0, got ((" +
                       std::to_string(padding.top) + ", " + std::to_string(padding.bottom) +
                       "), (" + std::to_string(padding.left) + ", " +
                       std::to_string(padding.right) + "))");
    }
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    if (shapes[0].size() != 4) {
      throw ShapeError(name() +
                       ": ZeroPadding2D expects a rank-4 input (batch, height, width, channels), "
                       "got shape " +
                       partial_shape_to_string(shapes[0]));
    }
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    auto grow = [](std::int64_t in, int before, int after) {
      return in < 0 ? std::int64_t{-1} : in + before + after;
    };
    return {{s[0], grow(s[1], padding_.top, padding_.bottom),
             grow(s[2], padding_.left, padding_.right), s[3]}};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    return {zero_pad2d(inputs[0], padding_)};
  }

  Padding2d padding_;
};

}  // namespace

ZeroPadding2D::ZeroPadding2D(int padding, LayerOptions options)
    : ZeroPadding2D({padding, padding}, {padding, padding}, std::move(options)) {}

ZeroPadding2D::ZeroPadding2D(int height_padding, int width_padding, LayerOptions options)
    : ZeroPadding2D({height_padding, height_padding}, {width_padding, width_padding},
                    std::move(options)) {}

ZeroPadding2D::ZeroPadding2D(std::array<int, 2> top_bottom, std::array<int, 2> left_right,
                             LayerOptions options)
    : Layer(std::make_shared<ZeroPadding2DImpl>(
          Padding2d{top_bottom[0], top_bottom[1], left_right[0], left_right[1]}, options)) {}

Padding2d ZeroPadding2D::padding() const {
  return static_cast<const ZeroPadding2DImpl&>(impl()).padding_;
}

}  // namespace mixprec::layers
