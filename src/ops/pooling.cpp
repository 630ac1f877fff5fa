// max_pool2d, avg_pool2d and global_avg_pool2d (nn_ops.h): checks, geometry (ops/window.h), the
// backend call (backend/nn_kernels.h: pool2d_forward / pool2d_backward; the CPU runs oneDNN or
// plain loops for float64, CUDA own kernels) and the backward pass.
#include <string>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/nn_ops.h"
#include "mixprec/ops.h"
#include "ops/checks.h"
#include "ops/window.h"

namespace mixprec {

namespace {

void check_image(const char* op, const Tensor& x) {
  ops::check_floating(op, x);
  if (x.rank() != 4) {
    throw ShapeError(std::string(op) +
                     " expects x of rank 4 (batch, height, width, channels), got "
                     "shape " +
                     x.shape().to_string() + "; add a batch axis with reshape for a single image");
  }
}

struct Pool2dBackward final : autograd::Node {
  PoolKind kind = PoolKind::max;
  PoolGeometry geometry;
  PoolSaved saved;
  DType dtype = DType::float32;

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const Tensor g = grad_output.dtype() == dtype ? grad_output : cast(grad_output, dtype);
    return {backend_for(g.device()).nn->pool2d_backward(kind, g.detach(), saved, geometry)};
  }
  std::string name() const override {
    return kind == PoolKind::max ? "MaxPool2dBackward" : "AvgPool2dBackward";
  }
  void release_saved() override { saved = PoolSaved{}; }
};

Tensor pool2d(PoolKind kind, const char* op, const Tensor& x, const Pool2dOptions& options) {
  check_image(op, x);
  PoolGeometry g;
  g.batch = x.dim(0), g.in_h = x.dim(1), g.in_w = x.dim(2), g.channels = x.dim(3);
  // Pooling windows are not dilated; window_dim checks sizes and strides (>= 1) and that a
  // `valid` window fits the input.
  const ops::WindowDim h = ops::window_dim(op, "height", g.in_h, options.pool_size[0],
                                           options.strides[0], 1, options.padding);
  const ops::WindowDim w = ops::window_dim(op, "width", g.in_w, options.pool_size[1],
                                           options.strides[1], 1, options.padding);
  g.window_h = options.pool_size[0], g.window_w = options.pool_size[1];
  g.stride_h = options.strides[0], g.stride_w = options.strides[1];
  g.pad_top = h.pad_before, g.pad_bottom = h.pad_after, g.out_h = h.out;
  g.pad_left = w.pad_before, g.pad_right = w.pad_after, g.out_w = w.out;

  const bool record = autograd::needs_record({&x});
  PoolForward r = backend_for(x.device())
                      .nn->pool2d_forward(kind, x.detach(), g,
                                          record ? SaveForBackward::yes : SaveForBackward::no);
  if (!record) return r.y;
  auto node = std::make_shared<Pool2dBackward>();
  node->kind = kind;
  node->geometry = g;
  node->saved = std::move(r.saved);
  node->dtype = x.dtype();
  return autograd::record(r.y, node, {x});
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return pool2d(PoolKind::max, "max_pool2d", x, options);
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return pool2d(PoolKind::average, "avg_pool2d", x, options);
}

Tensor global_avg_pool2d(const Tensor& x, KeepDims keep) {
  check_image("global_avg_pool2d", x);
  // mean accumulates in float32 (float64 for float64) and divides before the one rounding.
  return mean(x, {1, 2}, keep);
}

}  // namespace mixprec
