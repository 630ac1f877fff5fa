// Matmul, convolution, pooling, batch normalization and image kernels of one device kind: the
// NnKernels table (backend/backend.h). The ops in src/ops/ (matmul.cpp, autocast_matmul.cpp,
// dense_op.cpp, conv.cpp, pooling.cpp, batch_norm.cpp, image.cpp) check their arguments, build the
// geometry, call one entry through backend_for(x.device()).nn, and record the autograd node; each
// backend chooses its own implementation behind the entry (oneDNN or the reference loops on the
// CPU, cuBLASLt / cuDNN / own kernels on CUDA).
//
// The vocabulary below (Epilogue, ConvKind, the result and saved-state structs) is shared by both
// backends; accumulation is always mixprec::Accumulation (mixprec/ops.h), pooling kinds PoolKind
// (core/op_kinds.h), window sizes ConvGeometry / PoolGeometry (core/window_geometry.h).
//
// Capabilities (entries that may be null): activation_in_place (CPU only: Conv2D composes its
// activation where it is null), matmul_epilogue (CUDA only: the Dense op composes
// separate ops where it is null) and the three autocast_* entries (CPU only: autocast_matmul
// composes cast + matmul where they are null) and channel_gate_backward (set by both backends: the
// product's gradient composes mul and sum_to where it is null) and the three
// batch_norm_activation_* entries (set by both backends: the op composes batch norm and the
// activation where they are null) and add_row_norm_forward (set by both backends: the op composes
// add and the normalization where it is null) and the two attention_* entries (set by both
// backends: the op composes attention_reference where they are null) and accumulate_gradient (CPU
// only: autograd adds out of place where it is null). Every other entry is set by every backend.
#pragma once

#include <cstdint>

#include "core/op_kinds.h"
#include "core/window_geometry.h"
#include "mixprec/nn_ops.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec {

// ---- matmul ----

// An epilogue applied to the float32 accumulator of C (M, N) = op(A) (M, K) op(B) (K, N) before
// its one rounding to the output dtype (cuBLASLt's epilogues; src/ops/dense_op.cpp says which
// product of the Dense layer carries which).
enum class Epilogue {
  none,                // C
  bias,                // C + bias, bias (N,) broadcast over the M rows
  relu_bias,           // relu(C + bias); cuBLASLt's max(z, 0) maps NaN to 0 (Dense does not use
                       // it for that reason: see src/ops/dense_op.cpp)
  gelu_tanh_bias,      // gelu_tanh(C + bias): the tanh approximation only
  gelu_tanh_aux_bias,  // gelu_tanh(C + bias), and Z = C + bias kept in `aux` for the backward
  relu,                // relu(C), NaN to 0 likewise
  gelu_tanh,           // gelu_tanh(C)
  gelu_tanh_aux,       // gelu_tanh(C), and Z = C kept in `aux`
  bias_grad,           // C, and the column sums of op(B), sum over k of op(B)[k, n] (N,), in
                       // `bias_grad` (cuBLASLt's BGRADA: in its column-major mapping our B is
                       // its A)
};

struct EpilogueResult {
  Tensor out;        // (M, N) contiguous, out_dtype
  Tensor aux;        // the pre-activation Z (M, N) in out_dtype (gelu_tanh_aux*): a view whose row
                     // stride may exceed N (cuBLASLt: cuda::detail::gelu_aux_ld(N))
  Tensor bias_grad;  // (N,) in out_dtype (bias_grad)
};

// How autocast_matmul's 16-bit product holds the kernel it multiplies: a 16-bit tensor (the
// backend multiplies 16-bit operands natively), or float32 values rounded to the 16-bit dtype (the
// product runs in float32 on exactly widened operands).
enum class AutocastForm { native, widened };

struct AutocastProduct {
  Tensor y;  // (M, N) in x's dtype
  Tensor w;  // (K, N): the kernel as multiplied (see AutocastForm), for the backward
  AutocastForm form = AutocastForm::widened;
};

// ---- convolution ----

// general: any groups (cuDNN / oneDNN); depthwise: groups == in_channels with the Keras depthwise
// filters seen as grouped HWIO (KH, KW, 1, C * M) (own kernels on CUDA).
enum class ConvKind { general, depthwise };

// Whether a forward keeps what its backward needs.
enum class SaveForBackward { no, yes };

// The form of what a convolution forward saved: `as_given`: x and the HWIO filters; `prepared`:
// what the backend built from them for its library (cuDNN: the zero-padded input and the KRSC
// filters, of the same sizes), so that the backward passes do not build them again.
enum class ConvSavedForm { as_given, prepared };

// What a convolution forward keeps for its backward passes: backward_filters reads `input`,
// backward_data reads `filters`; the op layer drops the one it does not need.
struct ConvSaved {
  Tensor input;
  Tensor filters;
  ConvSavedForm form = ConvSavedForm::as_given;
};

struct ConvForward {
  Tensor y;         // (batch, out_h, out_w, out_channels), contiguous, x's dtype
  ConvSaved saved;  // empty unless SaveForBackward::yes
};

// ---- pooling ----

// What a pooling forward keeps for its backward (max pooling; average needs nothing).
struct PoolSaved {
  Tensor argmax;  // where each window's maximum was: oneDNN's workspace bytes (CPU), window
                  // offsets kh * window_w + kw, uint8 or int32 (CUDA: cuda::pool_argmax_dtype)
  Tensor x;       // the input, where the backend finds the maxima again (CPU float64 loops)
  bool native_bf16 = false;  // CPU: the forward ran oneDNN's bf16 primitive, not the float32 one
};

struct PoolForward {
  Tensor y;         // (batch, out_h, out_w, channels), x's dtype
  PoolSaved saved;  // empty unless SaveForBackward::yes
};

// ---- attention (mixprec/attention.h) ----

// The geometry and options of one scaled_dot_product_attention call, resolved by the op:
// q (batch, q_len, heads, head_dim), k (batch, k_len, heads, head_dim),
// v (batch, k_len, heads, value_dim).
struct AttentionGeometry {
  std::int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0, value_dim = 0;
  double scale = 1.0;   // multiplies q k^T
  bool causal = false;  // key j visible to query i only when j <= i + (k_len - q_len)
  // Dropout on the probabilities (training): element (b, h, i, j) of the (batch, heads, q_len,
  // k_len) probabilities is kept when core::counter_keeps(dropout_base, its row-major index,
  // dropout_threshold) and then multiplied by keep_scale.
  bool dropout = false;
  std::uint64_t dropout_base = 0;
  std::uint64_t dropout_threshold = 0;
  double keep_scale = 1.0;
};

struct AttentionForward {
  Tensor out;  // (batch, q_len, heads, value_dim), contiguous, q's dtype
  Tensor lse;  // (batch, heads, q_len): log of the softmax's sum of exp(score), float32 (float64
               // for float64); -inf for a query that sees no key
};

struct AttentionGradients {
  Tensor dq, dk, dv;  // the shapes and dtype of q, k, v, contiguous
};

// ---- batch normalization ----

// What the backward differentiates through: `batch` statistics are functions of x (training);
// `moving` statistics are constants (inference mode).
enum class BatchNormStats { batch, moving };

struct BatchNormTrainingResult {
  Tensor y;         // x's shape and dtype, contiguous
  Tensor mean;      // (C), float32 (float64 for float64 x)
  Tensor variance;  // (C), biased, likewise
};

struct BatchNormGradients {
  Tensor dx;      // x's shape and dtype
  Tensor dgamma;  // (C), float32 (float64 for float64 x)
  Tensor dbeta;   // (C), likewise
};

// ---- row normalization (layer_norm, rms_norm) over the last axis of x (..., C) ----

enum class RowNorm { layer, rms };

struct RowNormResult {
  Tensor y;     // x's shape and dtype, contiguous
  Tensor mean;  // (rows) float32 (float64 for float64 x); zeros for RowNorm::rms
  Tensor rstd;  // (rows) 1 / sqrt(variance + epsilon) (rms: 1 / sqrt(mean(x^2) + epsilon))
};

// The residual sum and its normalization in one pass (NnKernels::add_row_norm_forward).
struct AddRowNormResult {
  Tensor sum;   // a + b in their dtype, contiguous, rounded as the backend's add rounds it
  Tensor y;     // row_norm_forward(kind, sum, ...).y, the same bits
  Tensor mean;  // and its statistics, likewise
  Tensor rstd;
};

struct RowNormGradients {
  Tensor dx;      // x's shape and dtype
  Tensor dgamma;  // (C) float32 (float64 for float64 x)
  Tensor dbeta;   // (C) likewise (zeros for RowNorm::rms)
};

struct NnKernels {
  // ---- matmul ----
  // op(a) (B..., M, K) x op(b) (B..., K, N): one floating dtype, one device, the same rank >= 2,
  // each batch extent equal or 1 (broadcast); any strides. A new contiguous (B..., M, N) tensor of
  // out_dtype: the operands' dtype, or float32 for 16-bit operands (the accumulator unrounded).
  // Accumulation::compute_dtype on 16-bit operands (out_dtype == their dtype) rounds partial sums
  // to the 16-bit dtype where the device can (CPU: every partial sum, the reference loop; CUDA:
  // cuBLASLt's 16-bit compute type for float16, float32 for bfloat16).
  Tensor (*matmul)(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype,
                   Accumulation accumulation);
  // The gradient form of a product with Accumulation::compute_dtype (16-bit l and r of one dtype,
  // any ranks >= 2, batch axes broadcasting): out (out_shape, contiguous, their dtype) holds, for
  // each of its matrices, the sum of op(l) op(r) over the batch entries that map onto it (the axes
  // along which out is broadcast), written transposed when `to` is yes.
  Tensor (*matmul_summed)(const Tensor& l, Transpose tl, const Tensor& r, Transpose tr,
                          const Shape& out_shape, Transpose to);
  // Capability (null where the device has no fused epilogues: the CPU). Rank-2 operands, float32
  // accumulation, `bias` (N,) of out_dtype for the *_bias epilogues, undefined otherwise.
  EpilogueResult (*matmul_epilogue)(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                                    DType out_dtype, Epilogue epilogue, const Tensor& bias);

  // Capability (null where a cast and a matmul are as good: CUDA): autocast_matmul's single-pass
  // product of x (M, K) 16-bit and a float32 kernel (K, N) read in x's dtype, and its gradients:
  // dx = g w^T in x's dtype; dw = x^T g accumulated in float32, rounded to x's precision and
  // returned in float32 (the gradient of the float32 kernel).
  AutocastProduct (*autocast_matmul)(const Tensor& x, const Tensor& kernel);
  Tensor (*autocast_matmul_backward_data)(const Tensor& g, const Tensor& w, AutocastForm form);
  Tensor (*autocast_matmul_backward_kernel)(const Tensor& x, const Tensor& g, AutocastForm form);

  // ---- convolution (NHWC, HWIO filters, geometry from the op layer) ----
  // x, filters, bias (out_channels) or undefined: contiguous, one floating dtype, one device.
  ConvForward (*conv2d_forward)(const Tensor& x, const Tensor& filters, const Tensor& bias,
                                const ConvGeometry& g, ConvKind kind, Accumulation accumulation,
                                SaveForBackward save);
  // dx (batch, in_h, in_w, in_channels) from dy (contiguous, x's dtype) and saved.filters.
  Tensor (*conv2d_backward_data)(const Tensor& dy, const ConvSaved& saved, const ConvGeometry& g,
                                 ConvKind kind, Accumulation accumulation);
  // dfilters (kernel_h, kernel_w, in_channels / groups, out_channels) from saved.input and dy.
  Tensor (*conv2d_backward_filters)(const Tensor& dy, const ConvSaved& saved, const ConvGeometry& g,
                                    ConvKind kind, Accumulation accumulation);

  // Capability (null: a Conv2D layer applies its activation as a separate op). y = act(y) in
  // place, act relu or relu6, for a convolution's fresh output (contiguous, floating), with the
  // unfused ops' per-element function (NaN stays NaN): Conv2D + bias + relu as one op whose
  // backward differentiates from the output, as relu's does.
  void (*activation_in_place)(const Tensor& y, UnaryOp act);

  // ---- pooling (NHWC; semantics of Keras: padding never wins a max nor counts in an average) ----
  // x floating, (batch, in_h, in_w, channels) of g. The maximum of a window is its first in
  // row-major window order (the gradient goes there).
  PoolForward (*pool2d_forward)(PoolKind kind, const Tensor& x, const PoolGeometry& g,
                                SaveForBackward save);
  // dx (batch, in_h, in_w, channels) from dy (x's dtype) and what the forward saved.
  Tensor (*pool2d_backward)(PoolKind kind, const Tensor& dy, const PoolSaved& saved,
                            const PoolGeometry& g);

  // ---- batch normalization over the last axis of x (..., C) ----
  // x floating, at least one row; gamma, beta and statistics (C) in float32 or x's dtype (float64
  // for float64 x); epsilon > 0 (the op layer checks all of it).
  BatchNormTrainingResult (*batch_norm_training)(const Tensor& x, const Tensor& gamma,
                                                 const Tensor& beta, double epsilon);
  Tensor (*batch_norm_inference)(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& mean, const Tensor& variance, double epsilon);
  // dy of x's dtype; `mean` and `variance` are the statistics the forward used.
  BatchNormGradients (*batch_norm_backward)(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                            const Tensor& mean, const Tensor& variance,
                                            double epsilon, BatchNormStats stats);
  // Capability (null: the op composes batch_norm_* and the activation): batch normalization
  // followed by the activation `act` (relu, relu6, sigmoid or silu) in one kernel, for float32,
  // float16 and bfloat16 x (float64 composes). Arguments, results and statistics as the entries
  // above; y = act(bn(x)). The backward takes dy of y and recomputes bn(x) from x, gamma, beta and
  // the statistics the forward used.
  BatchNormTrainingResult (*batch_norm_activation_training)(const Tensor& x, const Tensor& gamma,
                                                            const Tensor& beta, double epsilon,
                                                            UnaryOp act);
  Tensor (*batch_norm_activation_inference)(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, const Tensor& mean,
                                            const Tensor& variance, double epsilon, UnaryOp act);
  BatchNormGradients (*batch_norm_activation_backward)(const Tensor& dy, const Tensor& x,
                                                       const Tensor& gamma, const Tensor& beta,
                                                       const Tensor& mean, const Tensor& variance,
                                                       double epsilon, BatchNormStats stats,
                                                       UnaryOp act);

  // ---- row normalization and embeddings (mixprec/transformer_ops.h) ----
  // x floating, rank >= 1, C = x.dim(-1) >= 1 (rows may be 0); gamma, beta (C) in float32 or x's
  // dtype (float64 for float64 x) or undefined (gamma 1, beta 0; beta ignored for rms);
  // epsilon > 0. Statistics per row in float32 (float64), two passes for RowNorm::layer.
  RowNormResult (*row_norm_forward)(RowNorm kind, const Tensor& x, const Tensor& gamma,
                                    const Tensor& beta, double epsilon);
  // dy of x's shape and dtype; mean, rstd what the forward returned. dgamma and dbeta are the
  // sums over rows in a fixed order (independent of the thread count).
  RowNormGradients (*row_norm_backward)(RowNorm kind, const Tensor& dy, const Tensor& x,
                                        const Tensor& gamma, const Tensor& mean,
                                        const Tensor& rstd);
  // Capability (null: the op composes add and row_norm_forward; set by both backends). The
  // pre-norm residual step s = a + b, y = norm(s) reading a and b once: a and b of one shape,
  // floating dtype and device (no broadcast), any strides; the other arguments and every result
  // bit for bit those of add(a, b) followed by row_norm_forward on the sum. The backward is add's
  // and row_norm_backward's (the op records both nodes).
  AddRowNormResult (*add_row_norm_forward)(RowNorm kind, const Tensor& a, const Tensor& b,
                                           const Tensor& gamma, const Tensor& beta, double epsilon);
  // table (V, C) floating, ids int32/int64 (any shape), out_dtype floating (table float32 or
  // out_dtype); ids.shape + (C) in out_dtype. The CPU throws ValueError for an id outside [0, V);
  // CUDA writes a NaN row for it (never reads out of bounds).
  Tensor (*embedding_gather)(const Tensor& table, const Tensor& ids, DType out_dtype);
  // The table gradient (vocab, C) in table_dtype from g (ids.shape + (C), floating): row v is the
  // sum of g over the positions holding id v, in position order, accumulated in float32 (float64
  // for float64); out-of-range ids are skipped. Deterministic.
  Tensor (*embedding_scatter_add)(const Tensor& g, const Tensor& ids, std::int64_t vocab,
                                  DType table_dtype);

  // ---- per-channel broadcast (backend/channel_geometry.h) ----
  // Capability (null: compose mul and sum_to). The gradient of the small operand of
  // out = full * small, small of `small_shape` broadcast per channel over full
  // (channel_geometry(full.shape(), small_shape) defined): the sum over the broadcast axes of
  // g * full in g's dtype, without materialising the product. g and full contiguous, one shape
  // and dtype.
  Tensor (*channel_gate_backward)(const Tensor& g, const Tensor& full, const Shape& small_shape);
  // Capability (null: autograd adds out of place). acc += g in place, for autograd's gradient
  // accumulation into a sum that nothing else holds: one shape and floating dtype, acc contiguous,
  // g contiguous or a broadcast view (stride 0 along some axes: a reduction's gradient), not
  // overlapping.
  void (*accumulate_gradient)(const Tensor& acc, const Tensor& g);

  // ---- attention (AttentionGeometry) ----
  // Capability (null: the op composes attention_reference). q, k, v contiguous, one floating
  // dtype; mask undefined or a bool view of shape (batch, heads, q_len, k_len), any strides
  // (broadcast axes have stride 0), true = attend. Scores, softmax and sums in float32 (float64
  // for float64); a query that sees no key gets zeros. Memory O(q_len + k_len) per head besides
  // the results: the q_len x k_len probabilities are never stored.
  AttentionForward (*attention_forward)(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& mask, const AttentionGeometry& g);
  // The gradients from dout (contiguous, q's dtype), the inputs, the forward's out and lse, and
  // the same mask and geometry. Deterministic: the sums run in a fixed order for any thread count.
  AttentionGradients (*attention_backward)(const Tensor& dout, const Tensor& q, const Tensor& k,
                                           const Tensor& v, const Tensor& out, const Tensor& lse,
                                           const Tensor& mask, const AttentionGeometry& g);

  // ---- images (NHWC) ----
  // x (N, H, W, C) of any dtype -> (N, top + H + bottom, left + W + right, C), zeros around it.
  Tensor (*zero_pad2d)(const Tensor& x, const Padding2d& padding);
  // x floating, H, W, height, width >= 1 -> (N, height, width, C): half-pixel centers, no
  // antialiasing, computed in float32 (float64 for float64), rounded once.
  Tensor (*resize_bilinear)(const Tensor& x, std::int64_t height, std::int64_t width);
  // The adjoint: dy (N, height, width, C) -> dx (N, in_height, in_width, C) in dy's dtype.
  Tensor (*resize_bilinear_backward)(const Tensor& dy, std::int64_t in_height,
                                     std::int64_t in_width);
};

}  // namespace mixprec
