// add_layer_norm / add_rms_norm (ops/add_layer_norm.h): checks, the backend's one-pass kernel or
// the composed ops, and the two autograd nodes (the sum's, here; the normalization's, shared with
// layer_norm through ops/row_norm.h).
#include "ops/add_layer_norm.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "mixprec/transformer_ops.h"
#include "ops/checks.h"
#include "ops/row_norm.h"

namespace mixprec::ops {

namespace {

// add's backward for operands of one shape: g to both (what add's node returns: sum_to of g to
// each operand's shape, here g's own).
struct AddNormSumBackward final : autograd::Node {
  Shape a_shape, b_shape;
  std::vector<Tensor> backward(const Tensor& g) override {
    return {sum_to(g, a_shape), sum_to(g, b_shape)};
  }
  std::string name() const override { return "AddNormSumBackward"; }
};

AddNormOutput add_row_norm(const char* op, RowNorm kind, const Tensor& a, const Tensor& b,
                           const Tensor& gamma, const Tensor& beta, double epsilon) {
  check_same_dtype_device(op, a, b);
  check_floating(op, a);
  if (a.shape() != b.shape()) {
    throw ShapeError(std::string(op) + ": a and b must have one shape (no broadcasting), got " +
                     a.shape().to_string() + " and " + b.shape().to_string());
  }
  check_row_norm_arguments(op, kind, a, gamma, beta, epsilon);
  const NnKernels& nn = *backend_for(a.device()).nn;
  if (nn.add_row_norm_forward == nullptr) {
    Tensor sum = add(a, b);
    Tensor y = kind == RowNorm::layer ? layer_norm(sum, gamma, beta, epsilon)
                                      : rms_norm(sum, gamma, epsilon);
    return {std::move(sum), std::move(y)};
  }
  AddRowNormResult r = nn.add_row_norm_forward(kind, a, b, gamma, beta, epsilon);
  Tensor sum = std::move(r.sum);
  if (autograd::needs_record({&a, &b})) {
    auto node = std::make_shared<AddNormSumBackward>();
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    sum = autograd::record(sum, node, {a, b});
  }
  Tensor y = record_row_norm(kind, sum, gamma, beta,
                             RowNormResult{std::move(r.y), std::move(r.mean), std::move(r.rstd)});
  return {std::move(sum), std::move(y)};
}

}  // namespace

AddNormOutput add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& gamma,
                             const Tensor& beta, double epsilon) {
  return add_row_norm("add_layer_norm", RowNorm::layer, a, b, gamma, beta, epsilon);
}

AddNormOutput add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& gamma, double epsilon) {
  return add_row_norm("add_rms_norm", RowNorm::rms, a, b, gamma, Tensor(), epsilon);
}

}  // namespace mixprec::ops
