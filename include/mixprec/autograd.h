// Reverse-mode automatic differentiation. Ops record a graph whenever an input requires a gradient
// and recording is enabled; backward() walks it once from the output. GradientTape is the Keras
// spelling for the custom training loop: `tape.gradient(loss, variables)`.
#pragma once

#include <vector>

#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// True when ops record the autograd graph (the default); false inside a NoGradScope.
bool is_grad_enabled();

// Inside this scope no op records a graph (evaluation, optimizer updates).
class NoGradScope {
 public:
  NoGradScope();
  ~NoGradScope();
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;

 private:
  bool previous_;
};

enum class RetainGraph { no, yes };

// Gradients of `output` (scalar, or with `output_gradient` of its shape) with respect to each of
// `inputs`, without touching their accumulated .grad(). An input the output does not depend on gets
// a zero gradient. Inputs may be leaves or intermediate tensors.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                         const Tensor& output_gradient = Tensor(),
                         RetainGraph retain = RetainGraph::no);

class GradientTape {
 public:
  struct Options {
    bool persistent = false;  // allow gradient() to be called more than once
  };
  GradientTape();
  explicit GradientTape(Options options);
  // Starts tracking a tensor that was not created with requires_grad (Keras tape.watch).
  void watch(Tensor& tensor);
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources);
  Tensor gradient(const Tensor& target, const Tensor& source);

 private:
  Options options_;
  bool used_ = false;
};

}  // namespace mixprec

#pragma GCC visibility pop
