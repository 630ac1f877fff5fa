// all_reduce_sum (src/ops/collective_ops.h): the forward sum over the ranks and its backward node,
// both through mixprec::distributed::all_reduce on a private contiguous copy.
#include "ops/collective_ops.h"

#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::ops {

namespace {

// A contiguous copy of `t` that the collective may overwrite: never an alias of the caller's
// tensor (an all-reduce is in place).
Tensor reduced_copy(const Tensor& t, DType dtype) {
  Tensor out = autograd::fresh_copy(t.dtype() == dtype ? t : t.to(dtype));
  distributed::all_reduce(out, distributed::ReduceOp::sum);
  return out;
}

struct AllReduceSumBackward final : autograd::Node {
  DType dtype = DType::float32;
  std::vector<Tensor> backward(const Tensor& g) override {
    return {reduced_copy(g.detach(), dtype)};
  }
  std::string name() const override { return "AllReduceSumBackward"; }
};

}  // namespace

Tensor all_reduce_sum(const Tensor& x) {
  if (!x.defined()) {
    throw ValueError("all_reduce_sum: x is an undefined tensor; pass the tensor to sum over ranks");
  }
  Tensor y = reduced_copy(x.detach(), x.dtype());
  if (!autograd::needs_record({&x})) return y;
  auto node = std::make_shared<AllReduceSumBackward>();
  node->dtype = x.dtype();
  return autograd::record(y, node, {x});
}

}  // namespace mixprec::ops
