// The cpu backend's NnKernels table (backend/nn_kernels.h): oneDNN where it applies, the plain
// reference loops where the dtype or the accumulation asks for them (float64, 16-bit
// accumulation, empty operands). The choice between the two is made here, per call.
#include "backend/nn_kernels.h"

#include <cstring>

#include "backend/cpu/activation_in_place.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/batch_norm.h"
#include "backend/cpu/batch_norm_activation.h"
#include "backend/cpu/binary.h"
#include "backend/cpu/binary_channel.h"
#include "backend/cpu/cast.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/conv_reference.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/layer_norm.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_accumulation.h"
#include "backend/cpu/pooling.h"
#include "backend/cpu/resize.h"

namespace mixprec::cpu {

namespace {

// ---- matmul ----

Tensor matmul_entry(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype,
                    Accumulation accumulation) {
  if (accumulation == Accumulation::compute_dtype && is_16bit_float(a.dtype()) &&
      out_dtype == a.dtype()) {
    // The operands have one rank (the op layer pads them): the output is the broadcast batch.
    std::vector<std::int64_t> dims(static_cast<std::size_t>(a.rank()));
    for (int i = 0; i + 2 < a.rank(); ++i) {
      dims[static_cast<std::size_t>(i)] = a.dim(i) == 1 ? b.dim(i) : a.dim(i);
    }
    dims[dims.size() - 2] = ta == Transpose::no ? a.dim(-2) : a.dim(-1);
    dims[dims.size() - 1] = tb == Transpose::no ? b.dim(-1) : b.dim(-2);
    return cpu::matmul_accumulate16(a, ta, b, tb, Shape(dims), Transpose::no);
  }
  return cpu::matmul(a, b, ta, tb, out_dtype);
}

// ---- autocast_matmul: the float32 kernel read in x's 16-bit dtype ----

// A 16-bit tensor as the float32 product wants it: widened (exact).
Tensor widened(const Tensor& t) { return cpu::cast(t, DType::float32); }

AutocastProduct autocast_forward(const Tensor& x, const Tensor& kernel) {
  const DType dtype = x.dtype();
  AutocastProduct r;
  // oneDNN multiplies bfloat16 natively where the CPU can; float16 (oneDNN 2.6) and bfloat16
  // elsewhere are widened to float32 and the product rounded once.
  if (dtype == DType::bfloat16 && cpu::use_native_bf16()) {
    r.form = AutocastForm::native;
    r.w = cpu::cast(kernel, dtype);
    r.y = cpu::matmul(x, r.w, Transpose::no, Transpose::no);
  } else {
    r.form = AutocastForm::widened;
    r.w = cpu::round_to_precision(kernel.contiguous(), dtype);
    r.y = cpu::cast(cpu::matmul(widened(x), r.w, Transpose::no, Transpose::no), dtype);
  }
  return r;
}

Tensor autocast_backward_data(const Tensor& g, const Tensor& w, AutocastForm form) {
  if (form == AutocastForm::native) return cpu::matmul(g, w, Transpose::no, Transpose::yes);
  return cpu::cast(cpu::matmul(widened(g), w, Transpose::no, Transpose::yes), g.dtype());
}

Tensor autocast_backward_kernel(const Tensor& x, const Tensor& g, AutocastForm form) {
  const bool native = form == AutocastForm::native;
  Tensor dw = cpu::matmul(native ? x : widened(x), native ? g : widened(g), Transpose::yes,
                          Transpose::no, DType::float32);
  cpu::round_to_precision_in_place(dw, x.dtype());  // the float32 gradient of a 16-bit kernel
  return dw;
}

// ---- convolution ----

// Which code computes a pass: oneDNN (float32, and 16-bit with float32 accumulation), or the plain
// loops (conv_reference.h) summing in float64 (float64: the gradient-check dtype; empty operands,
// which oneDNN need not see) or rounding every partial sum to the 16-bit dtype (16-bit data with
// Accumulation::compute_dtype). The backward passes choose again from the same inputs (dy has x's
// dtype), so they take the forward's path.
enum class ConvPath { dnnl, reference_wide, reference_storage };

ConvPath conv_path(DType dtype, const ConvGeometry& g, Accumulation accumulation) {
  const bool empty = g.batch == 0 || g.in_channels == 0 || g.out_channels == 0;
  if (dtype == DType::float64 || empty) return ConvPath::reference_wide;
  if (is_16bit_float(dtype) && accumulation == Accumulation::compute_dtype) {
    return ConvPath::reference_storage;
  }
  return ConvPath::dnnl;
}

// The loops' summation (conv_reference.h) of a reference path.
Accumulation loop_sum(ConvPath path) {
  return path == ConvPath::reference_storage ? Accumulation::compute_dtype : Accumulation::float32;
}

// Both kinds are the same grouped convolution on the CPU.
ConvForward conv_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                         const ConvGeometry& g, ConvKind, Accumulation accumulation,
                         SaveForBackward save) {
  const ConvPath path = conv_path(x.dtype(), g, accumulation);
  ConvForward r;
  r.y = path == ConvPath::dnnl ? cpu::conv2d_forward(x, filters, bias, g)
                               : cpu::conv2d_reference_forward(x, filters, bias, g, loop_sum(path));
  if (save == SaveForBackward::yes) r.saved = ConvSaved{x, filters, ConvSavedForm::as_given};
  return r;
}

Tensor conv_backward_data(const Tensor& dy, const ConvSaved& saved, const ConvGeometry& g, ConvKind,
                          Accumulation accumulation) {
  const ConvPath path = conv_path(dy.dtype(), g, accumulation);
  if (path == ConvPath::dnnl) return cpu::conv2d_backward_data(dy, saved.filters, g);
  return cpu::conv2d_reference_backward_data(dy, saved.filters, g, loop_sum(path));
}

Tensor conv_backward_filters(const Tensor& dy, const ConvSaved& saved, const ConvGeometry& g,
                             ConvKind, Accumulation accumulation) {
  const ConvPath path = conv_path(dy.dtype(), g, accumulation);
  if (path == ConvPath::dnnl) return cpu::conv2d_backward_filters(saved.input, dy, g);
  return cpu::conv2d_reference_backward_filters(saved.input, dy, g, loop_sum(path));
}

// ---- batch normalization (the automatic choice between oneDNN and the loops) ----

BatchNormTrainingResult bn_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon) {
  return cpu::batch_norm_training(x, gamma, beta, epsilon);
}

Tensor bn_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                    const Tensor& variance, double epsilon) {
  return cpu::batch_norm_inference(x, gamma, beta, mean, variance, epsilon);
}

BatchNormGradients bn_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                               const Tensor& mean, const Tensor& variance, double epsilon,
                               BatchNormStats stats) {
  return cpu::batch_norm_backward(dy, x, gamma, mean, variance, epsilon, stats);
}

}  // namespace

extern const NnKernels kNnKernels;
const NnKernels kNnKernels{
    .matmul = matmul_entry,
    .matmul_summed = cpu::matmul_accumulate16,
    .matmul_epilogue = nullptr,  // no fused epilogues: Dense composes its ops
    .autocast_matmul = autocast_forward,
    .autocast_matmul_backward_data = autocast_backward_data,
    .autocast_matmul_backward_kernel = autocast_backward_kernel,
    .conv2d_forward = conv_forward,
    .conv2d_backward_data = conv_backward_data,
    .conv2d_backward_filters = conv_backward_filters,
    .activation_in_place = cpu::activation_in_place,
    .pool2d_forward = cpu::pool2d_forward,
    .pool2d_backward = cpu::pool2d_backward,
    .batch_norm_training = bn_training,
    .batch_norm_inference = bn_inference,
    .batch_norm_backward = bn_backward,
    .batch_norm_activation_training = cpu::batch_norm_activation_training,
    .batch_norm_activation_inference = cpu::batch_norm_activation_inference,
    .batch_norm_activation_backward = cpu::batch_norm_activation_backward,
    .row_norm_forward = cpu::row_norm_forward,
    .row_norm_backward = cpu::row_norm_backward,
    .add_row_norm_forward = cpu::add_row_norm_forward,
    .embedding_gather = cpu::embedding_gather,
    .embedding_scatter_add = cpu::embedding_scatter_add,
    .channel_gate_backward = cpu::channel_gate_backward,
    .accumulate_gradient = cpu::accumulate_into,
    .attention_forward = cpu::attention_forward,
    .attention_backward = cpu::attention_backward,
    .zero_pad2d = cpu::zero_pad2d,
    .resize_bilinear = cpu::resize_bilinear,
    .resize_bilinear_backward = cpu::resize_bilinear_backward,
};

}  // namespace mixprec::cpu
