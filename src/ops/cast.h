// The autograd node of cast / Tensor::to(dtype) (ops/cast.cpp), declared for the code that
// recognises a cast of a variable (autograd/saved_cast.cpp).
#pragma once

#include <string>
#include <vector>

#include "autograd/node.h"

namespace mixprec::ops {

// The gradient of a cast is the incoming gradient cast back to the input dtype.
struct CastBackward final : autograd::Node {
  DType input_dtype = DType::float32;
  std::vector<Tensor> backward(const Tensor& g) override;
  std::string name() const override { return "CastBackward"; }
};

}  // namespace mixprec::ops
