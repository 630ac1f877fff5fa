#include "mixprec/autograd.h"
#include "mixprec/error.h"

namespace mixprec {

GradientTape::GradientTape() : GradientTape(Options{}) {}
GradientTape::GradientTape(Options options) : options_(options) {}

void GradientTape::watch(Tensor& tensor) {
  if (tensor.is_leaf() && !tensor.requires_grad()) tensor.set_requires_grad(true);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target,
                                           const std::vector<Tensor>& sources) {
  if (used_ && !options_.persistent) {
    throw AutogradError(
        "GradientTape::gradient can only be called once on a non-persistent tape; create the tape "
        "with {.persistent = true} to call it more than once");
  }
  used_ = true;
  return grad(target, sources, Tensor(), options_.persistent ? RetainGraph::yes : RetainGraph::no);
}

Tensor GradientTape::gradient(const Tensor& target, const Tensor& source) {
  return gradient(target, std::vector<Tensor>{source})[0];
}

}  // namespace mixprec
