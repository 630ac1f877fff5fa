// MaxPooling2D, AveragePooling2D: (batch, H, W, C) -> (batch, OH, OW, C);
// GlobalAveragePooling2D: (batch, H, W, C) -> (batch, C) or (batch, 1, 1, C).
#include "mixprec/layers/pooling.h"

#include <algorithm>
#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/nn_ops.h"
#include "ops/window.h"

namespace mixprec::layers {

namespace {

void check_nhwc(const LayerImpl& layer, const PartialShape& s) {
  if (s.size() != 4) {
    throw ShapeError(layer.name() + ": " + layer.class_name() +
                     " expects a rank-4 input (batch, height, width, channels), got shape " +
                     partial_shape_to_string(s) + "; add a channel axis with Reshape");
  }
}

void check_floating(const LayerImpl& layer, DType dtype) {
  if (!is_floating(dtype)) {
    throw DTypeError(layer.name() + ": " + layer.class_name() + " needs a floating input, got " +
                     std::string(dtype_name(dtype)) +
                     "; convert it first, e.g. x.to(mp::kFloat32)");
  }
}

enum class PoolKind { max, average };

class Pooling2DImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["pool_size"] = detail::size2d_config(pool_size_);
    c["strides"] = detail::size2d_config(strides_);  // resolved: pool_size when left at 0
    c["padding"] = std::string(padding_.name());
    return c;
  }
  Pooling2DImpl(PoolKind kind, Size2d pool_size, const Pooling2DOptions& o)
      : LayerImpl(kind == PoolKind::max ? "MaxPooling2D" : "AveragePooling2D",
                  {o.dtype, o.name, o.trainable}),
        kind_(kind),
        pool_size_(pool_size),
        strides_(o.strides == Size2d(0) ? pool_size : o.strides),
        padding_(o.padding) {
    if (std::min(pool_size.height, pool_size.width) < 1) {
      throw ValueError(name() + ": " + class_name() + " pool_size must be positive, got " +
                       pool_size.to_string());
    }
    if (std::min(strides_.height, strides_.width) < 1) {
      throw ValueError(name() + ": " + class_name() +
                       " strides must be positive (or 0 for pool_size), got " +
                       o.strides.to_string());
    }
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    check_nhwc(*this, shapes[0]);
    compute_output_shape(shapes);  // a window larger than a known valid input: ValueError
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    const std::string op = name() + " (" + class_name() + ")";
    auto out = [&](std::int64_t in, const char* axis, int k, int stride) {
      if (in < 0) return std::int64_t{-1};
      return ops::window_dim(op.c_str(), axis, in, k, stride, 1, padding_.value()).out;
    };
    return {{s[0], out(s[1], "height", pool_size_.height, strides_.height),
             out(s[2], "width", pool_size_.width, strides_.width), s[3]}};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    check_floating(*this, inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];  // (batch, H, W, C)
    check_floating(*this, x.dtype());
    Pool2dOptions pool;
    pool.pool_size = {pool_size_.height, pool_size_.width};
    pool.strides = {strides_.height, strides_.width};
    pool.padding = padding_.value();
    return {kind_ == PoolKind::max ? max_pool2d(x, pool) : avg_pool2d(x, pool)};
  }

  PoolKind kind_;
  Size2d pool_size_, strides_;
  PaddingMode padding_;
};

class GlobalAveragePooling2DImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["keepdims"] = keepdims_;
    return c;
  }
  explicit GlobalAveragePooling2DImpl(const GlobalPooling2DOptions& o)
      : LayerImpl("GlobalAveragePooling2D", {o.dtype, o.name, o.trainable}),
        keepdims_(o.keepdims) {}

  void validate(const std::vector<PartialShape>& shapes) const override {
    check_nhwc(*this, shapes[0]);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    if (keepdims_) return {{s[0], 1, 1, s[3]}};
    return {{s[0], s[3]}};
  }

  std::vector<TensorSpec> compute_output_spec(
      const std::vector<TensorSpec>& inputs) const override {
    check_floating(*this, inputs[0].dtype);
    return LayerImpl::compute_output_spec(inputs);
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    check_floating(*this, inputs[0].dtype());
    return {global_avg_pool2d(inputs[0], keepdims_ ? KeepDims::yes : KeepDims::no)};
  }

  bool keepdims_;
};

const Pooling2DImpl& pool_impl(const Layer& layer) {
  return static_cast<const Pooling2DImpl&>(layer.impl());
}

}  // namespace

MaxPooling2D::MaxPooling2D(Size2d pool_size, Pooling2DOptions options)
    : Layer(std::make_shared<Pooling2DImpl>(PoolKind::max, pool_size, options)) {}
Size2d MaxPooling2D::pool_size() const { return pool_impl(*this).pool_size_; }
Size2d MaxPooling2D::strides() const { return pool_impl(*this).strides_; }
PaddingMode MaxPooling2D::padding() const { return pool_impl(*this).padding_; }

AveragePooling2D::AveragePooling2D(Size2d pool_size, Pooling2DOptions options)
    : Layer(std::make_shared<Pooling2DImpl>(PoolKind::average, pool_size, options)) {}
Size2d AveragePooling2D::pool_size() const { return pool_impl(*this).pool_size_; }
Size2d AveragePooling2D::strides() const { return pool_impl(*this).strides_; }
PaddingMode AveragePooling2D::padding() const { return pool_impl(*this).padding_; }

GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalPooling2DOptions options)
    : Layer(std::make_shared<GlobalAveragePooling2DImpl>(options)) {}
bool GlobalAveragePooling2D::keepdims() const {
  return static_cast<const GlobalAveragePooling2DImpl&>(impl()).keepdims_;
}

}  // namespace mixprec::layers
