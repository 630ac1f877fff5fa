// The cuda backend's NnKernels table (backend/nn_kernels.h): cuBLASLt products (with fused
// epilogues), cuDNN convolutions or the own depthwise kernels, and the own pooling, batch-norm,
// squeeze-and-excitation gate gradient and image kernels. The choice between cuDNN and the
// depthwise kernels is made here, per call.
#include "backend/nn_kernels.h"

#include <algorithm>

#include "backend/cuda/attention.h"
#include "backend/cuda/batch_norm.h"
#include "backend/cuda/channel_gate.h"
#include "backend/cuda/conv.h"
#include "backend/cuda/depthwise.h"
#include "backend/cuda/embedding.h"
#include "backend/cuda/image.h"
#include "backend/cuda/layer_norm.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/pooling.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

namespace {

// ---- matmul ----

Tensor matmul_entry(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype,
                    Accumulation accumulation) {
  return cuda::matmul(a, b, ta, tb, out_dtype, accumulation);
}

Transpose flip(Transpose t) { return t == Transpose::yes ? Transpose::no : Transpose::yes; }

// cuBLASLt with the 16-bit compute type (float16; bfloat16 has none and accumulates in float32).
// The products of batch axes the output was broadcast along are summed by sum_to (float32
// accumulation, rounded once), not in a running 16-bit sum as on the CPU. A transposed output is
// the product of the flipped operands in the other order: (op(l) op(r))^T = op(r)^T op(l)^T.
Tensor matmul_summed(const Tensor& l, Transpose tl, const Tensor& r, Transpose tr,
                     const Shape& out_shape, Transpose to) {
  const int rank = std::max(l.rank(), r.rank());
  const Tensor lp = core::pad_rank(l.detach(), rank), rp = core::pad_rank(r.detach(), rank);
  const Tensor product =
      to == Transpose::no
          ? cuda::matmul(lp, rp, tl, tr, l.dtype(), Accumulation::compute_dtype)
          : cuda::matmul(rp, lp, flip(tr), flip(tl), l.dtype(), Accumulation::compute_dtype);
  return mixprec::sum_to(product, out_shape);
}

// ---- convolution: cuDNN, or the depthwise kernels for depthwise_conv2d ----

// A depthwise op with no channels is an empty grouped one (groups = 1): cuDNN's path returns the
// empty/zero result without a launch.
bool use_depthwise(ConvKind kind, const ConvGeometry& g) {
  return kind == ConvKind::depthwise && g.in_channels > 0;
}

ConvForward conv_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                         const ConvGeometry& g, ConvKind kind, Accumulation accumulation,
                         SaveForBackward save) {
  ConvForward r;
  if (use_depthwise(kind, g)) {
    r.y = cuda::depthwise_forward(x, filters, bias, g, accumulation);
    if (save == SaveForBackward::yes) r.saved = ConvSaved{x, filters, ConvSavedForm::as_given};
    return r;
  }
  ConvPrepared prepared;
  r.y = cuda::conv2d_forward(x, filters, bias, g, accumulation,
                             save == SaveForBackward::yes ? &prepared : nullptr);
  if (save == SaveForBackward::no) return r;
  // The forward prepares nothing when there are no products (an empty convolution).
  r.saved = prepared.input.defined()
                ? ConvSaved{prepared.input, prepared.krsc, ConvSavedForm::prepared}
                : ConvSaved{x, filters, ConvSavedForm::as_given};
  return r;
}

Tensor conv_backward_data(const Tensor& dy, const ConvSaved& saved, const ConvGeometry& g,
                          ConvKind kind, Accumulation accumulation) {
  if (use_depthwise(kind, g))
    return cuda::depthwise_backward_data(dy, saved.filters, g, accumulation);
  if (saved.form == ConvSavedForm::prepared) {
    return cuda::conv2d_backward_data(dy, Tensor(), g, accumulation, saved.filters);
  }
  return cuda::conv2d_backward_data(dy, saved.filters, g, accumulation);
}

Tensor conv_backward_filters(const Tensor& dy, const ConvSaved& saved, const ConvGeometry& g,
                             ConvKind kind, Accumulation accumulation) {
  if (use_depthwise(kind, g))
    return cuda::depthwise_backward_filters(saved.input, dy, g, accumulation);
  if (saved.form == ConvSavedForm::prepared) {
    return cuda::conv2d_backward_filters(Tensor(), dy, g, accumulation, saved.input);
  }
  return cuda::conv2d_backward_filters(saved.input, dy, g, accumulation);
}

// ---- pooling ----

Tensor pool_backward(PoolKind kind, const Tensor& dy, const PoolSaved& saved,
                     const PoolGeometry& g) {
  return cuda::pool2d_backward(kind, dy, saved.argmax, g);
}

// ---- images ----

Tensor pad_entry(const Tensor& x, const Padding2d& p) {
  return cuda::zero_pad2d(x, p.top, p.bottom, p.left, p.right);
}

}  // namespace

extern const NnKernels kNnKernels;
const NnKernels kNnKernels{
    .matmul = matmul_entry,
    .matmul_summed = matmul_summed,
    .matmul_epilogue = cuda::matmul_epilogue,
    // A cast and a matmul: the cast is one cheap kernel, and cuBLASLt multiplies the 16-bit
    // operands natively with float32 accumulation.
    .autocast_matmul = nullptr,
    .autocast_matmul_backward_data = nullptr,
    .autocast_matmul_backward_kernel = nullptr,
    .conv2d_forward = conv_forward,
    .conv2d_backward_data = conv_backward_data,
    .conv2d_backward_filters = conv_backward_filters,
    .activation_in_place = nullptr,  // Conv2D composes its activation
    .pool2d_forward = cuda::pool2d_forward,
    .pool2d_backward = pool_backward,
    .batch_norm_training = cuda::batch_norm_training,
    .batch_norm_inference = cuda::batch_norm_inference,
    .batch_norm_backward = cuda::batch_norm_backward,
    .batch_norm_activation_training = cuda::batch_norm_activation_training,
    .batch_norm_activation_inference = cuda::batch_norm_activation_inference,
    .batch_norm_activation_backward = cuda::batch_norm_activation_backward,
    .row_norm_forward = cuda::row_norm_forward,
    .row_norm_backward = cuda::row_norm_backward,
    .add_row_norm_forward = cuda::add_row_norm_forward,
    .embedding_gather = cuda::embedding_gather,
    .embedding_scatter_add = cuda::embedding_scatter_add,
    .channel_gate_backward = cuda::channel_gate_backward,
    .accumulate_gradient = nullptr,  // autograd adds out of place
    .attention_forward = cuda::attention_forward,
    .attention_backward = cuda::attention_backward,
    .zero_pad2d = pad_entry,
    .resize_bilinear = cuda::resize_bilinear,
    .resize_bilinear_backward = cuda::resize_bilinear_backward,
};

}  // namespace mixprec::cuda
