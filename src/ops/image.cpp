// Spatial ops on NHWC images: zero_pad2d (a row copy, its gradient a slice) and resize_bilinear,
// run by x's backend (backend/nn_kernels.h: zero_pad2d, resize_bilinear, resize_bilinear_backward).
#include <string>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/nn_ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

void check_nhwc(const char* op, const Tensor& x) {
  ops::check_defined(op, x);
  if (x.rank() != 4) {
    throw ShapeError(std::string(op) + ": expected an image batch (N, H, W, C), got shape " +
                     x.shape().to_string() + "; reshape a single image to (1, H, W, C)");
  }
}

// ---- zero_pad2d ----

struct ZeroPad2dBackward final : autograd::Node {
  Padding2d padding;
  std::int64_t height = 0, width = 0;  // of the input
  std::vector<Tensor> backward(const Tensor& g) override {
    // The gradient of the input is the interior of g, copied out.
    return {g.slice(1, padding.top, padding.top + height)
                .slice(2, padding.left, padding.left + width)
                .contiguous()};
  }
  std::string name() const override { return "ZeroPad2dBackward"; }
};

// ---- resize_bilinear ----

struct ResizeBilinearBackward final : autograd::Node {
  std::int64_t height = 0, width = 0;  // of the input
  std::vector<Tensor> backward(const Tensor& g) override {
    return {backend_for(g.device()).nn->resize_bilinear_backward(g.detach(), height, width)};
  }
  std::string name() const override { return "ResizeBilinearBackward"; }
};

}  // namespace

Tensor zero_pad2d(const Tensor& x, const Padding2d& padding) {
  constexpr const char* op = "zero_pad2d";
  check_nhwc(op, x);
  if (padding.top < 0 || padding.bottom < 0 || padding.left < 0 || padding.right < 0) {
    throw ValueError(std::string(op) + ": padding must be >= 0 on every side, got top " +
                     std::to_string(padding.top) + ", bottom " + std::to_string(padding.bottom) +
                     ", left " + std::to_string(padding.left) + ", right " +
                     std::to_string(padding.right) + "; crop with slice instead");
  }
  const std::int64_t h = x.dim(1), w = x.dim(2);
  Tensor out = backend_for(x.device()).nn->zero_pad2d(x, padding);
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<ZeroPad2dBackward>();
  node->padding = padding;
  node->height = h;
  node->width = w;
  return autograd::record(out, node, {x});
}

Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width) {
  constexpr const char* op = "resize_bilinear";
  check_nhwc(op, x);
  ops::check_floating(op, x);
  if (height < 1 || width < 1) {
    throw ValueError(std::string(op) + ": the output size must be >= 1 in both axes, got " +
                     std::to_string(height) + "x" + std::to_string(width));
  }
  if (x.dim(1) < 1 || x.dim(2) < 1) {
    throw ShapeError(std::string(op) + ": cannot interpolate an empty image: input " +
                     x.shape().to_string() + " has no rows or no columns");
  }
  Tensor out = backend_for(x.device()).nn->resize_bilinear(x, height, width);
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<ResizeBilinearBackward>();
  node->height = x.dim(1);
  node->width = x.dim(2);
  return autograd::record(out, node, {x});
}

}  // namespace mixprec
