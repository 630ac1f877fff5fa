// What Conv2D and DepthwiseConv2D share: the spatial options and their checks, the conv
// accumulation switch (DESIGN §2.4), the rank-4 NHWC input checks, the output size and the
// Conv2dOptions passed to the op. Internal to src/layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/layers/conv2d.h"
#include "mixprec/nn_ops.h"

namespace mixprec::layers {

struct ConvGeometry {
  Size2d kernel_size, strides;
  PaddingMode padding;
  Size2d dilation;
};

class ConvLayerBase : public LayerImpl {
 public:
  ConvLayerBase(std::string class_name, const LayerOptions& options, const ConvGeometry& geometry,
                std::string activation, bool use_bias);

  bool uses_matmul() const override { return true; }
  // The conv switch, not the matmul one: float64 for float64; for a 16-bit compute dtype, that
  // dtype itself when fp16_conv_use_fp32_compute() is off; float32 otherwise.
  DType accumulation_dtype() const override;
  std::vector<TensorSpec> compute_output_spec(const std::vector<TensorSpec>& inputs) const override;

  const ConvGeometry& geometry() const { return geometry_; }
  const std::string& activation() const { return activation_; }
  bool use_bias() const { return use_bias_; }
  // A variable for the handle's accessors; ValueError naming `what` before the layer is built.
  Tensor built_variable(const Tensor& variable, const char* what) const;

  Tensor kernel_, bias_;  // created by build(); bias_ stays undefined without use_bias

 protected:
  // ValueError "<layer>: <Class> <what> must be positive, got <shown>" when value < 1.
  void check_positive(const char* what, std::int64_t value, const std::string& shown) const;
  // x must be (batch, H, W, C) with a known C; once built, C must be `built_channels`.
  void validate_input(const PartialShape& s, std::int64_t built_channels) const;
  // (batch, OH, OW, out_channels) by Keras' padding rules; a window larger than a known input
  // under 'valid' padding is a ValueError.
  PartialShape output_shape(const PartialShape& s, std::int64_t out_channels) const;
  // The op's options for an input of `dtype` (16-bit accumulation when the switch says so).
  Conv2dOptions conv_options(DType dtype, int groups) const;
  void check_floating(DType dtype) const;

 private:
  ConvGeometry geometry_;
  std::string activation_;
  bool use_bias_;
};

}  // namespace mixprec::layers
