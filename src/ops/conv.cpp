// conv2d and depthwise_conv2d (nn_ops.h): checks, geometry (ops/window.h), one call into the
// backend, and the backward pass. With y = x * w + b:
//   dx = conv2d_backward_data(dy, w),  dw = conv2d_backward_filters(x, dy),  db = sum of dy over
// (N, OH, OW). A depthwise convolution is a grouped one: the Keras depthwise filters (KH, KW, C, M)
// are, element for element, grouped HWIO filters (KH, KW, 1, C * M) with groups = C (output
// channel c * M + m of group c), so depthwise_conv2d reshapes (a view) and shares everything else.
// The passes run in the tensors' backend (backend/nn_kernels.h: conv2d_*), which chooses its own
// implementation (CPU: oneDNN or the reference loops; CUDA: cuDNN or the depthwise kernels).
#include <optional>
#include <string>

#include "autograd/node.h"
#include "autograd/saved_cast.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "backend/tensor_kernels.h"
#include "mixprec/nn_ops.h"
#include "mixprec/ops.h"
#include "ops/autocast_conv.h"
#include "ops/checks.h"
#include "ops/conv_activation.h"
#include "ops/window.h"

namespace mixprec {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Which code computes a pass is the backend's choice (backend/nn_kernels.h: the CPU runs oneDNN or
// the reference loops, CUDA cuDNN or the depthwise kernels); the node keeps what its forward saved.
struct Conv2dBackward final : autograd::Node {
  ConvSaved saved;  // each part kept only when the other operand needs a gradient
  ConvGeometry geometry;
  ConvKind kind = ConvKind::general;
  DType dtype = DType::float32;
  Accumulation accumulation = Accumulation::float32;

  // Set when the filters were a cast of a variable (a layer's weight under mixed precision): they
  // are cast again here instead of kept from the forward (autograd/saved_cast.h).
  std::optional<autograd::SavedCast> filters_cast;
  Shape filters_shape;  // the saved filters' shape (grouped HWIO, a view of the variable's)

  // Set for conv2d_activation: the relu / relu6 applied in place to the output, and that output,
  // from which its derivative is exact (0 < y < 6 exactly when 0 < z < 6), as relu's node does.
  std::optional<UnaryOp> activation;
  Tensor y;

  // Set by the autocast ops (ops/autocast_conv.h): the node's filter and bias inputs are the
  // layer's variables, so their gradients are returned in the kernel's shape and dtype and the
  // bias's dtype (widened from x's dtype, as the cast's backward would).
  struct Autocast {
    Shape kernel_shape;
    DType kernel_dtype = DType::float32;
    DType bias_dtype = DType::float32;
  };
  std::optional<Autocast> autocast;

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor g = (grad_output.dtype() == dtype ? grad_output : cast(grad_output, dtype))
                   .detach()
                   .contiguous();
    if (activation) g = backend_for(g.device()).tensor->unary_backward(*activation, g, y, y);
    const NnKernels& nn = *backend_for(g.device()).nn;
    Tensor dx, dw, db;
    if (next[0] && filters_cast) {
      ConvSaved with_filters{saved.input, filters_cast->recast().reshape(filters_shape),
                             saved.form};
      dx = nn.conv2d_backward_data(g, with_filters, geometry, kind, accumulation);
    } else if (next[0]) {
      dx = nn.conv2d_backward_data(g, saved, geometry, kind, accumulation);
    }
    if (next[1]) dw = nn.conv2d_backward_filters(g, saved, geometry, kind, accumulation);
    // A reduction: accumulated in float32 (float64 for float64) and rounded once, under either
    // accumulation setting (DESIGN §2.3: reductions accumulate in float32).
    if (next.size() > 2 && next[2]) db = sum(g, {0, 1, 2});
    if (autocast) {  // the backward runs without recording: these casts add no node
      if (dw.defined()) dw = cast(dw.reshape(autocast->kernel_shape), autocast->kernel_dtype);
      if (db.defined()) db = cast(db, autocast->bias_dtype);
    }
    return {dx, dw, db};
  }

  std::string name() const override {
    return activation ? std::string("Conv2d") + op_name(*activation) + "Backward"
                      : std::string("Conv2dBackward");
  }
  void release_saved() override {
    saved = ConvSaved{};
    filters_cast.reset();
    y = Tensor();
  }
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
                           const Tensor& bias, std::int64_t groups, const Conv2dOptions& options) {
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

// Replaces the node's saved filters by `recipe` (how to cast them again, autograd/saved_cast.h)
// when they are the filters the op received as given (`user_filters`, or the autocast ops' cast).
void keep_filters_as(Conv2dBackward& node, const Tensor& user_filters,
                     std::optional<autograd::SavedCast> recipe) {
  const Tensor& kept = node.saved.filters;
  if (!recipe || !kept.defined() || node.saved.form != ConvSavedForm::as_given ||
      kept.data_ptr() != user_filters.data_ptr() || kept.numel() != user_filters.numel()) {
    return;
  }
  node.filters_cast = std::move(recipe);
  node.filters_shape = kept.shape();
  node.saved.filters = Tensor();
}

// The autocast ops' variables (ops/autocast_conv.h): the kernel and bias in their own dtype, of
// which the op's filters and bias are casts made outside autograd.
struct Variables {
  Tensor kernel;
  Tensor bias;
};

// The forward of both ops on grouped HWIO filters, and its autograd record against the tensors
// the user passed (`user_filters` may be the depthwise form; `filters` is a view of it), or, for
// the autocast ops, against `variables` (`user_filters` and `bias` are then their casts).
Tensor conv_impl(const Tensor& x, const Tensor& user_filters, const Tensor& filters,
                 const Tensor& bias, const ConvGeometry& g, Accumulation accumulation,
                 ConvKind kind, std::optional<UnaryOp> activation = std::nullopt,
                 const Variables* variables = nullptr) {
  const Tensor xc = x.detach().contiguous(), wc = filters.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  const Tensor& kernel_input = variables ? variables->kernel : user_filters;
  const Tensor& bias_input = variables ? variables->bias : bias;
  const bool record = autograd::needs_record({&x, &kernel_input, &bias_input});
  const NnKernels& nn = *backend_for(x.device()).nn;
  ConvForward r = nn.conv2d_forward(xc, wc, bc, g, kind, accumulation,
                                    record ? SaveForBackward::yes : SaveForBackward::no);
  // The output is fresh and nothing else holds it yet: activated where it lies.
  if (activation) nn.activation_in_place(r.y, *activation);
  if (!record) return r.y;
  auto node = std::make_shared<Conv2dBackward>();
  if (activation) node->activation = activation, node->y = r.y.detach();
  node->geometry = g;
  node->kind = kind;
  node->dtype = x.dtype();
  node->accumulation = accumulation;
  node->saved.form = r.saved.form;
  // The filters' gradient reads the input; the input's gradient reads the filters.
  if (kernel_input.requires_grad()) node->saved.input = std::move(r.saved.input);
  if (x.requires_grad()) node->saved.filters = std::move(r.saved.filters);
  if (variables) {
    node->autocast =
        Conv2dBackward::Autocast{variables->kernel.shape(), variables->kernel.dtype(),
                                 variables->bias.defined() ? variables->bias.dtype() : x.dtype()};
    // Inside a training step (autograd::recast_enabled) the node keeps the kernel variable and
    // casts it again in its backward.
    const Tensor& kernel = variables->kernel;
    if (autograd::recast_enabled() && kernel.is_contiguous()) {
      keep_filters_as(*node, user_filters, autograd::SavedCast{kernel.detach(), x.dtype()});
    }
    std::vector<Tensor> inputs = {x, variables->kernel};
    if (variables->bias.defined()) inputs.push_back(variables->bias);
    return autograd::record(r.y, node, inputs);
  }
  // The filters as given, when they are a recorded cast of a variable inside a training step.
  keep_filters_as(*node, user_filters, autograd::saved_cast_of(user_filters));
  // The filters' gradient comes back in grouped HWIO form; a reshape node in front of the user's
  // depthwise filters turns it back into (KH, KW, C, M).
  std::vector<Tensor> inputs = {x, filters};
  if (bias.defined()) inputs.push_back(bias);
  return autograd::record(r.y, node, inputs);
}

}  // namespace

namespace {

// conv2d's checks and geometry.
ConvGeometry conv2d_geometry(const Tensor& x, const Tensor& filters, const Tensor& bias,
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
  return make_geometry(op, x, filters, bias, groups, options);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias,
              const Conv2dOptions& options) {
  const ConvGeometry g = conv2d_geometry(x, filters, bias, options);
  return conv_impl(x, filters, filters, bias, g, options.accumulation, ConvKind::general);
}

namespace ops {

Tensor conv2d_activation(const Tensor& x, const Tensor& filters, const Tensor& bias,
                         const Conv2dOptions& options, UnaryOp activation) {
  if (activation != UnaryOp::relu && activation != UnaryOp::relu6) {
    throw ValueError(std::string("conv2d_activation: relu or relu6 only, got ") +
                     op_name(activation));
  }
  if (backend_for(x.device()).nn->activation_in_place == nullptr) {
    const Tensor z = conv2d(x, filters, bias, options);
    return activation == UnaryOp::relu ? relu(z) : relu6(z);
  }
  const ConvGeometry g = conv2d_geometry(x, filters, bias, options);
  return conv_impl(x, filters, filters, bias, g, options.accumulation, ConvKind::general,
                   activation);
}

}  // namespace ops

namespace {

// depthwise_conv2d's checks; `grouped` receives the filters as grouped HWIO (a view).
ConvGeometry depthwise_geometry(const Tensor& x, const Tensor& filters, const Tensor& bias,
                                const Conv2dOptions& options, Tensor& grouped) {
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
  grouped = reshape(filters, Shape{filters.dim(0), filters.dim(1), c > 0 ? 1 : 0, c * m});
  return make_geometry(op, x, grouped, bias, c > 0 ? c : 1, options);
}

// Whether the autocast ops read the variables inside (ops/autocast_conv.h): a floating x and a
// floating kernel (and bias) of another dtype, on x's device. Otherwise they compose.
bool reads_inside(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  if (!x.defined() || !kernel.defined() || !is_floating(x.dtype()) ||
      !is_floating(kernel.dtype()) || kernel.dtype() == x.dtype() ||
      kernel.device() != x.device()) {
    return false;
  }
  return !bias.defined() || (bias.dtype() == kernel.dtype() && bias.device() == x.device());
}

// A variable read in `dtype` outside autograd (the op's node differentiates the variable).
Tensor read_as(const Tensor& variable, DType dtype) {
  return variable.defined() ? cast(variable.detach(), dtype) : Tensor();
}

// The composition the autocast ops stand for.
Tensor cast_recorded(const Tensor& variable, DType dtype) {
  return variable.defined() ? cast(variable, dtype) : Tensor();
}

}  // namespace

Tensor depthwise_conv2d(const Tensor& x, const Tensor& filters, const Tensor& bias,
                        const Conv2dOptions& options) {
  Tensor grouped;
  const ConvGeometry g = depthwise_geometry(x, filters, bias, options, grouped);
  return conv_impl(x, filters, grouped, bias, g, options.accumulation, ConvKind::depthwise);
}

namespace ops {

Tensor autocast_conv2d(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                       const Conv2dOptions& options, std::optional<UnaryOp> activation) {
  if (!reads_inside(x, kernel, bias) ||
      (activation && backend_for(x.device()).nn->activation_in_place == nullptr)) {
    const DType dtype = x.defined() ? x.dtype() : kernel.dtype();
    const Tensor k = cast_recorded(kernel, dtype), b = cast_recorded(bias, dtype);
    return activation ? conv2d_activation(x, k, b, options, *activation) : conv2d(x, k, b, options);
  }
  if (activation && activation != UnaryOp::relu && activation != UnaryOp::relu6) {
    throw ValueError(std::string("autocast_conv2d: relu or relu6 only, got ") +
                     op_name(*activation));
  }
  const Tensor k = read_as(kernel, x.dtype()), b = read_as(bias, x.dtype());
  const ConvGeometry g = conv2d_geometry(x, k, b, options);
  const Variables variables{kernel, bias};
  return conv_impl(x, k, k, b, g, options.accumulation, ConvKind::general, activation, &variables);
}

Tensor autocast_depthwise_conv2d(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                                 const Conv2dOptions& options) {
  if (!reads_inside(x, kernel, bias)) {
    const DType dtype = x.defined() ? x.dtype() : kernel.dtype();
    return depthwise_conv2d(x, cast_recorded(kernel, dtype), cast_recorded(bias, dtype), options);
  }
  const Tensor k = read_as(kernel, x.dtype()), b = read_as(bias, x.dtype());
  Tensor grouped;
  const ConvGeometry g = depthwise_geometry(x, k, b, options, grouped);
  const Variables variables{kernel, bias};
  return conv_impl(x, k, grouped, b, g, options.accumulation, ConvKind::depthwise, std::nullopt,
                   &variables);
}

}  // namespace ops

}  // namespace mixprec
