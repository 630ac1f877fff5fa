// Tensor-core advice (seed 001, "GPU performance tips"): on NVIDIA GPUs a float16/bfloat16 matmul
// or convolution runs on tensor cores at full speed when its dimensions are multiples of 8, so a
// Dense layer's units and input features, a Conv2D's filters and input channels, and the batch
// size should be. compile() and summary() print this advice for models on a GPU; the function is
// public so that any model can be checked anywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/models/model.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct TensorCoreAdvice {
  std::string layer;  // "dense_1", or "batch" for the batch size
  std::string what;   // "units", "input features", "filters", "input channels", "batch size"
  std::int64_t size = 0;
  std::int64_t padded = 0;        // the next multiple of 8
  std::string to_string() const;  // "dense_1: units 4095 is not a multiple of 8; use 4096"
};

// Every layer of `model` (nested models included) that computes in float16 or bfloat16 and has a
// Dense kernel (in, units) or Conv2D kernel (KH, KW, in / groups, filters) with a dimension that
// is not a multiple of 8, in layer order; then the batch size, when given, not a multiple of 8,
// and the model has such 16-bit layers. Layers computing in float32 (the float32 softmax head) are
// not listed. The model must be built (a functional model always is).
std::vector<TensorCoreAdvice> tensor_core_advice(const Model& model,
                                                 std::optional<std::int64_t> batch_size = {});

}  // namespace mixprec

#pragma GCC visibility pop
