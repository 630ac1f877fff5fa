// cuda::matmul and cuda::matmul_epilogue (matmul.h) as compositions of describe
// (matmul_layout.h: shapes and layouts, plus the copies a layout needs), plan and launch
// (matmul_plan.h); and the epilogue's unfused fallback through the elementwise and reduction
// kernels.
#include "backend/cuda/matmul.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/binary.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/matmul_plan.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/unary.h"
#include "core/tensor_impl.h"
#include "mixprec/cuda.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

using detail::BatchBroadcast;
using detail::LaunchStatus;
using detail::OperandCopy;
using detail::ProductShape;

std::atomic<detail::EpilogueMode> epilogue_mode{detail::EpilogueMode::fused};

// The operand and result checks every product shares; throws what the message says.
void check_operands(const Tensor& a, const Tensor& b, DType out_dtype, Accumulation accumulation) {
  if (a.dtype() != b.dtype() || !(a.device() == b.device()) || !a.device().is_cuda() ||
      a.rank() != b.rank() || a.rank() < 2) {
    throw ValueError(
        "cuda::matmul: operands must share a floating dtype and a CUDA device and have "
        "the same rank >= 2; got " +
        std::string(dtype_name(a.dtype())) + " " + a.shape().to_string() + " on " +
        a.device().to_string() + " and " + std::string(dtype_name(b.dtype())) + " " +
        b.shape().to_string() + " on " + b.device().to_string());
  }
  const DType dtype = a.dtype();
  detail::data_type(dtype);  // throws for non-floating dtypes
  if (!(out_dtype == dtype || (is_16bit_float(dtype) && out_dtype == DType::float32))) {
    throw DTypeError("cuda::matmul: the result dtype must be the operands' (" +
                     std::string(dtype_name(dtype)) + ") or float32 for 16-bit operands, got " +
                     std::string(dtype_name(out_dtype)));
  }
  if (accumulation == Accumulation::compute_dtype && out_dtype != dtype) {
    throw DTypeError(
        "cuda::matmul: 16-bit accumulation rounds to the operands' dtype; a float32 "
        "result needs Accumulation::float32");
  }
}

// cuBLASLt takes 32-bit extents and batch counts.
void check_32bit_extents(const ProductShape& p, const Tensor& a, const Tensor& b, const char* who) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  if (p.batch.numel() > kMax || std::max({p.m, p.n, p.k}) > kMax) {
    throw ShapeError(std::string(who) + ": extents and batch count must fit in 32 bits, got " +
                     a.shape().to_string() + " x " + b.shape().to_string());
  }
}

// ---- describe: the operands as cuBLASLt reads them ----

// x's memory in the layout `copy` asks for: x itself, its contiguous copy, or a contiguous copy
// with the broadcast batch axes (extent 1 or stride 0) expanded to `batch`.
Tensor storage_for(const Tensor& x, OperandCopy copy, const Shape& batch) {
  if (copy == OperandCopy::none) return x;
  Tensor src = x;
  if (copy == OperandCopy::expand_batch) {
    const int r = x.rank();
    std::vector<std::int64_t> dims(batch.begin(), batch.end());
    std::vector<std::int64_t> strides;
    for (int i = 0; i < batch.rank(); ++i)
      strides.push_back(x.shape()[i] == 1 ? 0 : x.strides()[static_cast<std::size_t>(i)]);
    for (int i = r - 2; i < r; ++i) {
      dims.push_back(x.shape()[i]);
      strides.push_back(x.strides()[static_cast<std::size_t>(i)]);
    }
    src = core::make_view(x, Shape(dims), strides, x.offset());
  }
  Tensor copied = core::make_tensor(src.shape(), src.dtype(), src.device());
  copy_strided(src, copied);
  return copied;
}

// One operand ready for cuBLASLt: where it reads it, and the tensor that owns that memory (a copy
// when the layout needed one), kept alive until the launch is enqueued.
struct PreparedOperand {
  detail::OperandView view;
  Tensor storage;
};

PreparedOperand prepare(const Tensor& x, Transpose t, const Shape& batch,
                        BatchBroadcast broadcast) {
  const Tensor src = x.detach();
  detail::OperandLayout layout =
      detail::describe_operand(src.shape(), src.strides(), t, batch, broadcast);
  PreparedOperand p;
  p.storage = storage_for(src, layout.copy, batch);
  layout.copy = OperandCopy::none;
  p.view = {p.storage.data_ptr(), layout};
  return p;
}

struct PreparedOperands {
  PreparedOperand a, b;
};

PreparedOperands describe(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                          const Shape& batch, BatchBroadcast broadcast) {
  return {prepare(a, ta, batch, broadcast), prepare(b, tb, batch, broadcast)};
}

// ---- plan and launch ----

// C = op(a) op(b) into `out` (contiguous, (batch..., M, N)) with the epilogue, if any, on the
// device's compute stream.
LaunchStatus plan_and_launch(const ProductShape& shape, const PreparedOperands& operands,
                             const detail::ProductTypes& types, Tensor& out,
                             const detail::EpilogueBinding& epilogue, const StreamScope& scope) {
  const detail::Tf32 tf32 =
      tensor_float_32_execution_enabled() ? detail::Tf32::allowed : detail::Tf32::off;
  const detail::PlanKey key =
      detail::make_plan_key(scope.index(), shape, operands.a.view, operands.b.view, out.data_ptr(),
                            types, tf32, epilogue);
  const detail::ReadyPlan ready = detail::plan_cache().find_or_create(key, epilogue);
  return detail::launch(key, ready, {operands.a.view.data, operands.b.view.data, out.data_ptr()},
                        epilogue, scope.stream());
}

Shape output_shape(const ProductShape& p) {
  std::vector<std::int64_t> dims(p.batch.begin(), p.batch.end());
  dims.push_back(p.m);
  dims.push_back(p.n);
  return Shape(dims);
}

}  // namespace

namespace detail {

std::int64_t gelu_aux_ld(std::int64_t n) { return std::max<std::int64_t>(8, (n + 7) / 8 * 8); }

void set_epilogue_mode(EpilogueMode mode) { epilogue_mode.store(mode); }

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype,
              Accumulation accumulation) {
  check_operands(a, b, out_dtype, accumulation);
  const ProductShape shape = detail::product_shape(a.shape(), b.shape(), ta, tb, "cuda::matmul");
  Tensor out = core::make_tensor(output_shape(shape), out_dtype, a.device());
  if (out.numel() == 0) return out;
  if (shape.k == 0) {  // an empty sum: zeros
    fill(out, 0.0);
    return out;
  }
  check_32bit_extents(shape, a, b, "cuda::matmul");
  StreamScope scope(a.device());
  const detail::ProductTypes types{a.dtype(), out_dtype, accumulation};
  for (BatchBroadcast broadcast : {BatchBroadcast::stride_zero, BatchBroadcast::copy_out}) {
    const PreparedOperands operands = describe(a, b, ta, tb, shape.batch, broadcast);
    if (plan_and_launch(shape, operands, types, out, {}, scope) == LaunchStatus::done) return out;
    // No algorithm: retry once with broadcast batches copied out (stride-0 batches are the one
    // layout feature cuBLASLt may refuse); a second refusal is an error.
    const bool has_stride_zero_batch =
        operands.a.view.layout.batch_stride == 0 || operands.b.view.layout.batch_stride == 0;
    if (broadcast == BatchBroadcast::copy_out || !has_stride_zero_batch || shape.batch.numel() == 1)
      break;
  }
  throw DeviceError("cuda::matmul: cuBLASLt found no algorithm for " + a.shape().to_string() +
                    " x " + b.shape().to_string() + " (" + std::string(dtype_name(a.dtype())) +
                    "); please report this shape");
}

Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb) {
  return matmul(a, b, ta, tb, a.dtype());
}

bool epilogue_adds_bias(Epilogue epilogue) {
  return epilogue == Epilogue::bias || epilogue == Epilogue::relu_bias ||
         epilogue == Epilogue::gelu_tanh_bias || epilogue == Epilogue::gelu_tanh_aux_bias;
}

bool epilogue_keeps_aux(Epilogue epilogue) {
  return epilogue == Epilogue::gelu_tanh_aux_bias || epilogue == Epilogue::gelu_tanh_aux;
}

namespace detail {

int cublaslt_epilogue(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::relu_bias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::gelu_tanh_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::gelu_tanh_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::relu: return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::gelu_tanh: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::gelu_tanh_aux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::bias_grad: return CUBLASLT_EPILOGUE_BGRADA;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

DType unfused_epilogue_dtype(DType operand_dtype, DType out_dtype) {
  (void)operand_dtype;  // 16-bit operands always have a float32 product (cuda::matmul)
  return is_16bit_float(out_dtype) ? DType::float32 : out_dtype;
}

}  // namespace detail

namespace {

// The activation an epilogue applies after the bias, if any.
std::optional<UnaryOp> epilogue_activation(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::relu_bias:
    case Epilogue::relu: return UnaryOp::relu;
    case Epilogue::gelu_tanh_bias:
    case Epilogue::gelu_tanh_aux_bias:
    case Epilogue::gelu_tanh:
    case Epilogue::gelu_tanh_aux: return UnaryOp::gelu_tanh;
    default: return std::nullopt;
  }
}

// The epilogue's function without cuBLASLt's, rounding as the fused epilogue does: the product
// is kept in float32 (cuda::matmul's float32 output of 16-bit operands: the accumulator
// unrounded), the bias (exact in float32) is added and the activation applied in float32, and the
// result is rounded once to out_dtype (aux, the pre-activation z, likewise once). Rounding the
// product to 16 bits first and adding the bias afterwards would differ from the CPU composition
// by half an ulp of the pre-bias sum near cancellation.
EpilogueResult unfused_epilogue(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                                DType out_dtype, Epilogue epilogue, const Tensor& bias) {
  EpilogueResult r;
  const DType wide = detail::unfused_epilogue_dtype(a.dtype(), out_dtype);
  Tensor z = cuda::matmul(a, b, ta, tb, wide);  // (M, N)
  if (epilogue_adds_bias(epilogue)) {
    const Tensor b_wide = bias.dtype() == wide ? bias : cuda::cast(bias, wide);
    z = cuda::binary(BinaryOp::add, z, b_wide);  // (N,) over the rows
  }
  const std::optional<UnaryOp> activation = epilogue_activation(epilogue);
  const Tensor y = activation ? cuda::unary(*activation, z) : z;
  r.out = y.dtype() == out_dtype ? y : cuda::cast(y, out_dtype);
  if (epilogue_keeps_aux(epilogue)) r.aux = z.dtype() == out_dtype ? z : cuda::cast(z, out_dtype);
  if (epilogue == Epilogue::bias_grad) {
    // op(B) (K, N): the sum over K is axis 0 of a stored (K, N) B, axis 1 of a stored (N, K) one,
    // accumulated in float32 and rounded once to out_dtype (B widened first when out_dtype is
    // float32, as cuBLASLt's sums are).
    const std::size_t k_axis = tb == Transpose::no ? 0 : 1;
    std::vector<bool> reduce_axis(2, false);
    reduce_axis[k_axis] = true;
    const Tensor src = b.dtype() == out_dtype ? b : cuda::cast(b, out_dtype);
    const Tensor sums = cuda::reduce(ReduceOp::sum, src, reduce_axis);
    r.bias_grad = core::make_view(sums, Shape{sums.numel()}, {1}, 0);
  }
  return r;
}

// The epilogue through cuBLASLt: the outputs it writes (out; aux, the pre-activation with row
// stride gelu_aux_ld(N); the bias gradient) bound to the launch. Empty when cuBLASLt has no
// algorithm for it.
std::optional<EpilogueResult> fused_epilogue(const Tensor& a, const Tensor& b, Transpose ta,
                                             Transpose tb, const ProductShape& shape,
                                             DType out_dtype, Epilogue epilogue,
                                             const Tensor& bias) {
  const Device device = a.device();
  EpilogueResult r;
  r.out = core::make_tensor(Shape{shape.m, shape.n}, out_dtype, device);
  detail::EpilogueBinding binding;
  binding.epilogue = static_cast<cublasLtEpilogue_t>(detail::cublaslt_epilogue(epilogue));
  Tensor bias_in, aux;
  if (epilogue_adds_bias(epilogue)) {
    bias_in = bias.contiguous();
    binding.bias = bias_in.data_ptr();
  }
  if (epilogue_keeps_aux(epilogue)) {
    // Z (M, N) row-major with row stride ld_aux: cuBLASLt's column-major (N, M), ld = ld_aux.
    binding.ld_aux = detail::gelu_aux_ld(shape.n);
    aux = core::make_tensor(Shape{shape.m, binding.ld_aux}, out_dtype, device);
    binding.aux = aux.data_ptr();
  }
  if (epilogue == Epilogue::bias_grad) {
    r.bias_grad = core::make_tensor(Shape{shape.n}, out_dtype, device);
    binding.bias_grad = r.bias_grad.data_ptr();
  }
  StreamScope scope(device);
  const PreparedOperands operands =
      describe(a, b, ta, tb, shape.batch, BatchBroadcast::stride_zero);
  const detail::ProductTypes types{a.dtype(), out_dtype, Accumulation::float32};
  if (plan_and_launch(shape, operands, types, r.out, binding, scope) != LaunchStatus::done)
    return std::nullopt;
  if (aux.defined()) r.aux = core::make_view(aux, Shape{shape.m, shape.n}, {binding.ld_aux, 1}, 0);
  return r;
}

// The bias matmul_epilogue takes: (N,) of out_dtype on the product's device for the *_bias
// epilogues, none for the others.
void check_bias(Epilogue epilogue, const Tensor& bias, std::int64_t n, DType out_dtype,
                Device device) {
  if (epilogue_adds_bias(epilogue) && (!bias.defined() || bias.rank() != 1 || bias.dim(0) != n ||
                                       bias.dtype() != out_dtype || !(bias.device() == device))) {
    throw ValueError(
        "cuda::matmul_epilogue: the bias epilogue needs a bias of shape (" + std::to_string(n) +
        ",) in " + std::string(dtype_name(out_dtype)) + " on " + device.to_string() + ", got " +
        (bias.defined() ? std::string(dtype_name(bias.dtype())) + " " + bias.shape().to_string() +
                              " on " + bias.device().to_string()
                        : std::string("none")) +
        "; cast the bias to the result dtype first");
  }
  if (!epilogue_adds_bias(epilogue) && bias.defined()) {
    throw ValueError(
        "cuda::matmul_epilogue: a bias was given to an epilogue that does not add one; use "
        "Epilogue::bias, relu_bias or gelu_tanh_bias (or pass no bias)");
  }
}

}  // namespace

EpilogueResult matmul_epilogue(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                               DType out_dtype, Epilogue epilogue, const Tensor& bias) {
  check_operands(a, b, out_dtype, Accumulation::float32);
  if (a.rank() != 2) {
    throw ShapeError("cuda::matmul_epilogue: expected rank-2 operands, got " +
                     a.shape().to_string() + " x " + b.shape().to_string() +
                     "; fold the batch axes into the rows first");
  }
  const ProductShape shape =
      detail::product_shape(a.shape(), b.shape(), ta, tb, "cuda::matmul_epilogue");
  check_bias(epilogue, bias, shape.n, out_dtype, a.device());
  if (epilogue == Epilogue::none)
    return {cuda::matmul(a, b, ta, tb, out_dtype), Tensor(), Tensor()};
  if (std::max({shape.m, shape.n, shape.k}) > std::numeric_limits<std::int32_t>::max()) {
    throw ShapeError("cuda::matmul_epilogue: extents must fit in 32 bits, got " +
                     a.shape().to_string() + " x " + b.shape().to_string());
  }
  // cuBLASLt's GELU epilogues with a 16-bit result round the product to that dtype before they
  // add the bias and apply GELU (measured on an H100 and an H200 with cuBLASLt 13.0: every
  // differing element of GpuDenseEpilogueTest equals round(gelu(round(x W) + b)), 2-4 float16
  // ulps and up to 18 bfloat16 ulps from the once-rounded value), so that product goes the
  // unfused way, which keeps float32 until its one rounding (DESIGN §2). By design, not a
  // fallback.
  if (is_16bit_float(out_dtype) && epilogue_activation(epilogue) == UnaryOp::gelu_tanh) {
    return unfused_epilogue(a, b, ta, tb, out_dtype, epilogue, bias);
  }
  // Empty products (no rows, columns or inner extent) and float64 go the unfused way.
  const bool fusable = epilogue_mode.load() == detail::EpilogueMode::fused && shape.m > 0 &&
                       shape.n > 0 && shape.k > 0 && a.dtype() != DType::float64;
  if (fusable) {
    if (std::optional<EpilogueResult> r =
            fused_epilogue(a, b, ta, tb, shape, out_dtype, epilogue, bias))
      return *std::move(r);
  }
  detail::plan_cache().count_epilogue_fallback();
  return unfused_epilogue(a, b, ta, tb, out_dtype, epilogue, bias);
}

MatmulCacheStats matmul_cache_stats() { return detail::plan_cache().stats(); }

}  // namespace mixprec::cuda
