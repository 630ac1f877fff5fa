// Dense: y = activation(x W + b), W of shape (in, units), b of shape (units,). The input may have
// any rank >= 2: (batch, ..., in) -> (batch, ..., units). Under a mixed policy W and b are float32
// variables read as float16/bfloat16; the matmul accumulates in float32 unless
// mixed_precision::fp16_matmul_use_fp32_compute() is off (DESIGN §2.4).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mixprec/initializers.h"
#include "mixprec/layers/layer.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::layers {

struct DenseOptions {
  std::string activation;  // by name (see activations.h); "" = linear
  bool use_bias = true;
  initializers::Initializer kernel_initializer = "glorot_uniform";
  initializers::Initializer bias_initializer = "zeros";
  std::optional<mixed_precision::Policy> dtype;
  std::string name;
  bool trainable = true;
};

class Dense : public Layer {
 public:
  explicit Dense(std::int64_t units, DenseOptions options = {});
  // A handle to an existing Dense (throws ValueError when `layer` is not a Dense).
  explicit Dense(const Layer& layer);

  std::int64_t units() const;
  const std::string& activation() const;
  bool use_bias() const;
  // The variables (float32 under mixed policies). They exist once the layer is built: kernel()
  // before that throws ValueError.
  Tensor kernel() const;
  Tensor bias() const;  // undefined when use_bias is false
};

}  // namespace mixprec::layers

#pragma GCC visibility pop
