// Spatial ops on NHWC images: zero_pad2d (a row copy, its gradient a slice) and resize_bilinear
// (kernels in backend/cpu/resize.h; for CUDA tensors backend/cuda/image.h).
#include "backend/cuda/image.h"

#include <cstring>
#include <string>

#include "autograd/node.h"
#include "backend/cpu/resize.h"
#include "core/tensor_impl.h"
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

// out (N, OH, OW, C), contiguous = x (N, H, W, C), contiguous, at rows [top, top + H) and columns
// [left, left + W), zeros elsewhere. A byte copy, so every dtype works: each output row is either
// all padding or padding, one contiguous input row of W * C elements, padding.
void pad_rows(const Tensor& x, const Padding2d& p, Tensor& out) {
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const std::int64_t oh = out.dim(1), ow = out.dim(2);
  const std::size_t elem = dtype_size(x.dtype());
  const std::size_t in_row = static_cast<std::size_t>(w * c) * elem;
  const std::size_t out_row = static_cast<std::size_t>(ow * c) * elem;
  const std::size_t before = static_cast<std::size_t>(p.left * c) * elem;
  const std::size_t after = out_row - before - in_row;
  const auto* src = static_cast<const unsigned char*>(x.data_ptr());
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  const std::int64_t rows = n * oh;
#pragma omp parallel for schedule(static) if (out.nbytes() >= (std::size_t{1} << 18))
  for (std::int64_t r = 0; r < rows; ++r) {
    unsigned char* o = dst + static_cast<std::size_t>(r) * out_row;
    const std::int64_t y = r % oh - p.top;  // input row, when inside
    if (y < 0 || y >= h) {
      std::memset(o, 0, out_row);
      continue;
    }
    std::memset(o, 0, before);
    std::memcpy(o + before, src + static_cast<std::size_t>((r / oh) * h + y) * in_row, in_row);
    std::memset(o + before + in_row, 0, after);
  }
}

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
    if (g.device().is_cuda()) return {cuda::resize_bilinear_backward(g.detach(), height, width)};
    return {cpu::resize_bilinear_backward(g, height, width)};
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
  Tensor out;
  if (x.device().is_cuda()) {
    out = cuda::zero_pad2d(x, padding.top, padding.bottom, padding.left, padding.right);
  } else {
    out = core::make_tensor(Shape{x.dim(0), padding.top + h + padding.bottom,
                                  padding.left + w + padding.right, x.dim(3)},
                            x.dtype(), x.device());
    if (out.numel() > 0) pad_rows(x.contiguous(), padding, out);
  }
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
  Tensor out = x.device().is_cuda() ? cuda::resize_bilinear(x, height, width)
                                    : cpu::resize_bilinear(x, height, width);
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<ResizeBilinearBackward>();
  node->height = x.dim(1);
  node->width = x.dim(2);
  return autograd::record(out, node, {x});
}

}  // namespace mixprec
