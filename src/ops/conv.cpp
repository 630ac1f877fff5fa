// conv2d and depthwise_conv2d (nn_ops.h): checks, geometry (ops/window.h), dispatch to oneDNN or
// the reference loops, and the backward pass. With y = x * w + b:
//   dx = conv2d_backward_data(dy, w),  dw = conv2d_backward_filters(x, dy),  db = sum of dy over
// (N, OH, OW). A depthwise convolution is a grouped one: the Keras depthwise filters (KH, KW, C, M)
// are, element for element, grouped HWIO filters (KH, KW, 1, C * M) with groups = C (output
// channel c * M + m of group c), so depthwise_conv2d reshapes (a view) and shares everything else.
// CUDA tensors go to cuDNN (cuda/conv.h), depthwise ones to own kernels (cuda/depthwise.h).
#include "backend/cpu/conv.h"

#include <string>

#include "autograd/node.h"
#include "backend/cpu/conv_reference.h"
#include "backend/cuda/conv.h"
#include "backend/cuda/depthwise.h"
#include "mixprec/nn_ops.h"
#include "mixprec/ops.h"
#include "ops/checks.h"
#include "ops/window.h"

namespace mixprec {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Which code computes a pass: oneDNN (float32 and 16-bit with float32 accumulation), or the plain
// loops (float64: the gradient-check dtype; 16-bit with Accumulation::compute_dtype: every partial
// sum rounded to the 16-bit dtype; and empty operands, which oneDNN need not see). On CUDA: cuDNN,
// or the depthwise kernels for depthwise_conv2d; both take the accumulation setting themselves.
enum class Path { dnnl, reference_wide, reference_storage, cuda_cudnn, cuda_depthwise };

enum class ConvKind { general, depthwise };

Path path_for(const Tensor& x, Accumulation accumulation, const ConvGeometry& g,
              ConvKind kind) {
  if (x.device().is_cuda()) {
    // A depthwise op with no channels is an empty grouped one (groups = 1): cuDNN's path returns
    // the empty/zero result without a launch.
    return kind == ConvKind::depthwise && g.in_channels > 0 ? Path::cuda_depthwise
                                                            : Path::cuda_cudnn;
  }
  const DType dtype = x.dtype();
  const bool empty = g.batch == 0 || g.in_channels == 0 || g.out_channels == 0;
  if (dtype == DType::float64 || empty) return Path::reference_wide;
  if (is_16bit_float(dtype) && accumulation == Accumulation::compute_dtype) {
    return Path::reference_storage;
  }
  return Path::dnnl;
}

cpu::ConvAccumulation reference_accumulation(Path path) {
  return path == Path::reference_storage ? cpu::ConvAccumulation::storage
                                         : cpu::ConvAccumulation::wide;
}

Tensor forward(const Tensor& x, const Tensor& w, const Tensor& b, const ConvGeometry& g,
               Path path, Accumulation accumulation, cuda::ConvPrepared* prepared) {
  switch (path) {
    case Path::dnnl: return cpu::conv2d_forward(x, w, b, g);
    case Path::cuda_cudnn: return cuda::conv2d_forward(x, w, b, g, accumulation, prepared);
    case Path::cuda_depthwise: return cuda::depthwise_forward(x, w, b, g, accumulation);
    case Path::reference_wide:
    case Path::reference_storage: break;
  }
  return cpu::conv2d_reference_forward(x, w, b, g, reference_accumulation(path));
}

// `w` / `x`: the HWIO filters / the input, or, on the cuDNN path, what its forward prepared (the
// KRSC filters / the padded input: cuda::ConvPrepared), whichever the node kept.
Tensor backward_data(const Tensor& g, const Tensor& w, const ConvGeometry& geometry, Path path,
                     Accumulation accumulation, const Tensor& krsc) {
  switch (path) {
    case Path::dnnl: return cpu::conv2d_backward_data(g, w, geometry);
    case Path::cuda_cudnn: return cuda::conv2d_backward_data(g, w, geometry, accumulation, krsc);
    case Path::cuda_depthwise: return cuda::depthwise_backward_data(g, w, geometry, accumulation);
    case Path::reference_wide:
    case Path::reference_storage: break;
  }
  return cpu::conv2d_reference_backward_data(g, w, geometry, reference_accumulation(path));
}

Tensor backward_filters(const Tensor& x, const Tensor& g, const ConvGeometry& geometry,
                        Path path, Accumulation accumulation, const Tensor& padded_input) {
  switch (path) {
    case Path::dnnl: return cpu::conv2d_backward_filters(x, g, geometry);
    case Path::cuda_cudnn:
      return cuda::conv2d_backward_filters(x, g, geometry, accumulation, padded_input);
    case Path::cuda_depthwise:
      return cuda::depthwise_backward_filters(x, g, geometry, accumulation);
    case Path::reference_wide:
    case Path::reference_storage: break;
  }
  return cpu::conv2d_reference_backward_filters(x, g, geometry, reference_accumulation(path));
}

struct Conv2dBackward final : autograd::Node {
  Tensor x, filters;  // contiguous, detached; each saved only when the other needs a gradient
  // The cuDNN path keeps what its forward built instead (the same sizes): the padded input in
  // place of x, the KRSC filters in place of the HWIO ones.
  Tensor cuda_input, cuda_krsc;
  ConvGeometry geometry;
  DType dtype = DType::float32;
  Path path = Path::dnnl;
  Accumulation accumulation = Accumulation::float32;

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const Tensor g = (grad_output.dtype() == dtype ? grad_output : cast(grad_output, dtype))
                         .detach()
                         .contiguous();
    Tensor dx, dw, db;
    if (next[0]) dx = backward_data(g, filters, geometry, path, accumulation, cuda_krsc);
    if (next[1]) dw = backward_filters(x, g, geometry, path, accumulation, cuda_input);
    // A reduction: accumulated in float32 (float64 for float64) and rounded once, under either
    // accumulation setting (DESIGN §2.3: reductions accumulate in float32).
    if (next.size() > 2 && next[2]) db = sum(g, {0, 1, 2});
    return {dx, dw, db};
  }

  std::string name() const override { return "Conv2dBackward"; }
  void release_saved() override { x = filters = cuda_input = cuda_krsc = Tensor(); }
};

void check_rank4(const char* op, const char* what, const Tensor& t, const char* layout,
                 const char* fix) {
  if (t.rank() != 4) {
    throw ShapeError(std::string(op) + " expects " + what + " of rank 4 " + layout +
                     ", got shape " + t.shape().to_string() + "; " + fix);
  }
}

// The geometry of x (N, H, W, Cin) and `filters` in grouped HWIO form (KH, KW, Cin / groups, Cout),
// after the window checks (ops/window.h: positive sizes, a `valid` window that fits) and the bias
// shape check; the caller has checked ranks, dtypes and channel counts.
ConvGeometry make_geometry(const char* op, const Tensor& x, const Tensor& filters,
                                const Tensor& bias, std::int64_t groups,
                                const Conv2dOptions& options) {
  ConvGeometry g;
  g.batch = x.dim(0), g.in_h = x.dim(1), g.in_w = x.dim(2), g.in_channels = x.dim(3);
  g.kernel_h = filters.dim(0), g.kernel_w = filters.dim(1), g.out_channels = filters.dim(3);
  g.groups = groups;
  const ops::WindowDim h = ops::window_dim(op, "height", g.in_h, g.kernel_h, options.strides[0],
                                           options.dilation[0], options.padding);
  const ops::WindowDim w = ops::window_dim(op, "width", g.in_w, g.kernel_w, options.strides[1],
                                           options.dilation[1], options.padding);
  g.stride_h = options.strides[0], g.stride_w = options.strides[1];
  g.dilation_h = options.dilation[0], g.dilation_w = options.dilation[1];
  g.pad_top = h.pad_before, g.pad_bottom = h.pad_after, g.out_h = h.out;
  g.pad_left = w.pad_before, g.pad_right = w.pad_after, g.out_w = w.out;
  if (bias.defined() && (bias.rank() != 1 || bias.dim(0) != g.out_channels)) {
    throw ShapeError(std::string(op) + ": bias must have shape " +
                     Shape{g.out_channels}.to_string() + " (one value per output channel), got " +
                     bias.shape().to_string() + "; pass an undefined Tensor() for no bias");
  }
  return g;
}

void check_common(const char* op, const Tensor& x, const Tensor& filters, const Tensor& bias) {
  ops::check_floating(op, x);
  ops::check_same_dtype_device(op, x, filters);
  if (bias.defined()) ops::check_same_dtype_device(op, x, bias);
  check_rank4(op, "x", x, "(batch, height, width, channels)",
              "add a batch axis with reshape for a single image");
}

// The forward of both ops on grouped HWIO filters, and its autograd record against the tensors
// the user passed (`user_filters` may be the depthwise form; `filters` is a view of it).
Tensor conv_impl(const Tensor& x, const Tensor& user_filters, const Tensor& filters,
                 const Tensor& bias, const ConvGeometry& g, Accumulation accumulation,
                 ConvKind kind) {
  const Path path = path_for(x, accumulation, g, kind);
  const Tensor xc = x.detach().contiguous(), wc = filters.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const bool record = autograd::needs_record({&x, &user_filters, &bias});
  cuda::ConvPrepared prepared;
  Tensor out = forward(xc, wc, bc, g, path, accumulation, record ? &prepared : nullptr);
  if (!record) return out;
  auto node = std::make_shared<Conv2dBackward>();
  node->geometry = g;
  node->dtype = x.dtype();
  node->path = path;
  node->accumulation = accumulation;
  if (user_filters.requires_grad()) {
    if (prepared.input.defined()) {
      node->cuda_input = prepared.input;
    } else {
      node->x = xc;
    }
  }
  if (x.requires_grad()) {
    if (prepared.krsc.defined()) {
      node->cuda_krsc = prepared.krsc;
    } else {
      node->filters = wc;
    }
  }
  // The filters' gradient comes back in grouped HWIO form; a reshape node in front of the user's
  // depthwise filters turns it back into (KH, KW, C, M).
  std::vector<Tensor> inputs = {x, filters};
  if (bias.defined()) inputs.push_back(bias);
  return autograd::record(out, node, inputs);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias,
              const Conv2dOptions& options) {
  constexpr const char* op = "conv2d";
  check_common(op, x, filters, bias);
  check_rank4(op, "filters", filters, "(kernel_h, kernel_w, in_channels / groups, out_channels)",
              "Conv2D kernels are stored as Keras does (HWIO)");
  const std::int64_t groups = options.groups;
  if (groups < 1) {
    throw ValueError(std::string(op) + ": groups must be >= 1, got " + str(groups));
  }
  const std::int64_t cin = x.dim(3), cout = filters.dim(3);
  if (cin % groups != 0 || filters.dim(2) * groups != cin) {
    throw ShapeError(std::string(op) + ": x " + x.shape().to_string() + " has " + str(cin) +
                     " channels but filters " + filters.shape().to_string() + " with groups " +
                     str(groups) + " expect " + str(filters.dim(2) * groups) +
                     " (filters.dim(2) * groups); the third filter extent must be in_channels / "
                     "groups");
  }
  if (cout % groups != 0) {
    throw ShapeError(std::string(op) + ": filters " + filters.shape().to_string() + " have " +
                     str(cout) + " output channels, not divisible by groups " + str(groups) +
                     "; use a multiple of groups");
  }
  const ConvGeometry g = make_geometry(op, x, filters, bias, groups, options);
  return conv_impl(x, filters, filters, bias, g, options.accumulation, ConvKind::general);
}

Tensor depthwise_conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias,
                        const Conv2dOptions& options) {
  constexpr const char* op = "depthwise_conv2d";
  check_common(op, x, filters, bias);
  check_rank4(op, "filters", filters, "(kernel_h, kernel_w, channels, depth_multiplier)",
              "DepthwiseConv2D kernels are stored as Keras does");
  const std::int64_t c = x.dim(3), m = filters.dim(3);
  if (filters.dim(2) != c) {
    throw ShapeError(std::string(op) + ": x " + x.shape().to_string() + " has " + str(c) +
                     " channels but filters " + filters.shape().to_string() + " are for " +
                     str(filters.dim(2)) +
                     " channels; the third filter extent must equal the input channels");
  }
  // (KH, KW, C, M) -> (KH, KW, 1, C * M): the same elements in the same order (see the top).
  // With C = 0 there are no channels and no groups: (KH, KW, 0, 0) with groups = 1, an empty
  // output that the reference path produces.
  const Tensor grouped =
      reshape(filters, Shape{filters.dim(0), filters.dim(1), c > 0 ? 1 : 0, c * m});
  const ConvGeometry g = make_geometry(op, x, grouped, bias, c > 0 ? c : 1, options);
  return conv_impl(x, filters, grouped, bias, g, options.accumulation, ConvKind::depthwise);
}

}  // namespace mixprec
