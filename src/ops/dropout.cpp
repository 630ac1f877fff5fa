// The dropout op: the keep scale rounded to x's dtype here, the masked multiply in the backend,
// and a backward node that regenerates the mask from the key.
#include "ops/dropout.h"

#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "ops/checks.h"

namespace mixprec::ops {

namespace {

struct DropoutBackward final : autograd::Node {
  DropoutMask mask;
  std::vector<Tensor> backward(const Tensor& g) override { return {dropout(g, mask)}; }
  std::string name() const override { return "DropoutBackward"; }
};

}  // namespace

Tensor dropout(const Tensor& x, const DropoutMask& mask) {
  check_floating("dropout", x);
  double keep = 0.0;  // the keep scale as a value of x's dtype
  core::dispatch_floating(x.dtype(), "dropout", [&]<typename T>() {
    keep = core::to_double(core::from_double<T>(mask.keep_scale));
  });
  Tensor out = backend_for(x.device()).tensor->dropout(x, mask.base, mask.threshold, keep);
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<DropoutBackward>();
  node->mask = mask;
  return autograd::record(out, node, {x});
}

}  // namespace mixprec::ops
