// matmul (ops.h), with float32 accumulation and with Accumulation::compute_dtype: checks, batch
// broadcasting and the backward passes, the products run by the operands' backend
// (backend/nn_kernels.h: matmul, matmul_summed). With op(X) = X or X^T:
//   C = op(A) op(B);  d op(A) = dC op(B)^T;  d op(B) = op(A)^T dC.
// Every gradient is itself a matmul with transposes (no transposed copies), in the operands'
// dtype, summed over the batch axes an operand was broadcast along (16-bit products are summed in
// float32 and rounded once).
//
// Accumulation::compute_dtype with float16/bfloat16 operands rounds partial sums to the 16-bit
// dtype (on the CPU every partial sum, in a loop: backend/cpu/matmul_accumulation.h; on CUDA
// cuBLASLt's 16-bit compute type). It exists for two reasons: the DESIGN §2.4 dtype table (layers
// under MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE=0 compute with float16 accumulation, and that must be
// observable), and fidelity to 16-bit hardware accumulation, so that a user can see on the CPU what
// such accumulation does to a model. It is a reference path, slow on the CPU.
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

Transpose flip(Transpose t) { return t == Transpose::yes ? Transpose::no : Transpose::yes; }

// The shape op(x) has: the last two extents swapped when transposed.
Shape op_shape(const Shape& shape, Transpose t) {
  Shape s = shape;
  if (t == Transpose::yes) std::swap(s[s.rank() - 2], s[s.rank() - 1]);
  return s;
}

Shape batch_shape(const Shape& shape) {
  return Shape(std::vector<std::int64_t>(shape.begin(), shape.end() - 2));
}

// x (B..., M, K) viewed as (B*...*M, K) when its batch and row axes merge without a copy;
// undefined otherwise.
Tensor fold_rows(const Tensor& x) {
  const int r = x.rank();
  std::int64_t rows = 1, stride = -1;  // stride of the merged axis
  for (int i = r - 2; i >= 0; --i) {
    const std::int64_t d = x.shape()[i];
    if (d == 1) continue;
    const std::int64_t s = x.strides()[static_cast<std::size_t>(i)];
    if (stride != -1 && s != stride * rows) return Tensor();
    if (stride == -1) stride = s;
    rows *= d;
  }
  if (stride == -1) stride = x.strides()[static_cast<std::size_t>(r - 1)] * x.shape()[r - 1];
  return core::make_view(x, Shape{rows, x.shape()[r - 1]},
                         {stride, x.strides()[static_cast<std::size_t>(r - 1)]}, x.offset());
}

// The backend's product (backend/nn_kernels.h: cuBLASLt on CUDA, oneDNN or the float64 loop on
// the CPU), accumulating in float32 (float64 for float64).
Tensor backend_matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                      DType out_dtype) {
  return backend_for(a.device()).nn->matmul(a, b, ta, tb, out_dtype, Accumulation::float32);
}

std::int64_t batch_count(const Shape& shape) {
  std::int64_t n = 1;
  for (int i = 0; i < shape.rank() - 2; ++i) n *= shape[i];
  return n;
}

// The forward without checks or autograd: broadcasting resolved, then the backend. `out_dtype` is
// the operands' dtype or, for 16-bit operands, float32 (see cpu::matmul).
Tensor matmul_impl(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype) {
  // A batched A times an unbatched B is one 2-D product over the folded rows when A's layout
  // allows: (B*M, K) x (K, N), one large GEMM rather than B small ones.
  if (a.rank() > 2 && ta == Transpose::no && batch_count(b.shape()) == 1) {
    if (const Tensor a2 = fold_rows(a.detach()); a2.defined()) {
      // B without its extent-1 batch axes (a view; a transposed B stays transposed).
      const auto& bs = b.strides();
      const Tensor b2 = core::make_view(b, Shape{b.dim(-2), b.dim(-1)},
                                        {bs[bs.size() - 2], bs[bs.size() - 1]}, b.offset());
      Tensor out2 = backend_matmul(a2, b2, ta, tb, out_dtype);
      std::vector<std::int64_t> dims(a.shape().begin(), a.shape().end() - 1);
      for (int i = 0; i < b.rank() - a.rank(); ++i) dims.insert(dims.begin(), 1);
      dims.push_back(out2.dim(-1));
      return core::make_view(out2, Shape(dims), contiguous_strides(Shape(dims)), 0);
    }
  }
  const int rank = std::max(a.rank(), b.rank());
  return backend_matmul(core::pad_rank(a.detach(), rank), core::pad_rank(b.detach(), rank), ta, tb,
                        out_dtype);
}

struct MatmulBackward final : autograd::Node {
  Tensor a, b;  // each saved only when the other operand needs a gradient
  Shape a_shape, b_shape;
  Transpose ta = Transpose::no, tb = Transpose::no;

  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor ga, gb;
    if (next[0]) ga = grad_a(g);
    if (next[1]) gb = grad_b(g);
    return {ga, gb};
  }

  // d op(A) = dC op(B)^T: with ta = no that is dA = dC op(B)^T (an op(B) that is B^T is B again);
  // with ta = yes, dA = (dC op(B)^T)^T = op(B) dC^T.
  Tensor grad_a(const Tensor& g) const {
    const DType acc = accumulation_dtype(g, a_shape);
    const Tensor ga = ta == Transpose::no ? matmul_impl(g, b, Transpose::no, flip(tb), acc)
                                          : matmul_impl(b, g, tb, Transpose::yes, acc);
    return cast(sum_to(ga, a_shape), g.dtype());
  }

  // d op(B) = op(A)^T dC: with tb = no that is dB = op(A)^T dC; with tb = yes, dB = dC^T op(A).
  Tensor grad_b(const Tensor& g) const {
    // A rank-2 (unbatched) B under a batched A (a Dense layer on (batch, time, features), say):
    // the sum over the batch is one matmul over the folded rows, (K, B*M) x (B*M, N), instead of
    // B products summed afterwards. Needs op(A) = A so that the rows of A fold.
    const std::int64_t k = a_shape[a_shape.rank() - 1];
    if (ta == Transpose::no && batch_count(b_shape) == 1 && batch_count(g.shape()) > 1 &&
        batch_count(a_shape) == batch_count(g.shape())) {
      const std::int64_t rows = batch_count(g.shape()) * g.dim(-2);  // B*M
      const Tensor a2 = reshape(a, Shape{rows, k});
      const Tensor g2 = reshape(g, Shape{rows, g.dim(-1)});
      const Tensor gb = tb == Transpose::no
                            ? matmul_impl(a2, g2, Transpose::yes, Transpose::no, g.dtype())
                            : matmul_impl(g2, a2, Transpose::yes, Transpose::no, g.dtype());
      return reshape(gb, b_shape);
    }
    const DType acc = accumulation_dtype(g, b_shape);
    const Tensor gb = tb == Transpose::no ? matmul_impl(a, g, flip(ta), Transpose::no, acc)
                                          : matmul_impl(g, a, Transpose::yes, ta, acc);
    return cast(sum_to(gb, b_shape), g.dtype());
  }

  // The batched products of a 16-bit gradient that is summed over broadcast batch axes stay in
  // float32 until the sum is done, so the gradient is rounded once, as the forward is.
  static DType accumulation_dtype(const Tensor& g, const Shape& operand_shape) {
    const bool sums = batch_count(g.shape()) != batch_count(operand_shape);
    return sums && is_16bit_float(g.dtype()) ? DType::float32 : g.dtype();
  }

  std::string name() const override { return "MatmulBackward"; }
  void release_saved() override { a = b = Tensor(); }
};

// With op(X) = X or X^T and C = op(A) op(B):  d op(A) = dC op(B)^T,  d op(B) = op(A)^T dC, each
// accumulated in the 16-bit dtype like the forward, and summed over the batch axes along which the
// operand was broadcast (CPU: in the same running 16-bit sum; CUDA: by sum_to, see the backend).
struct MatmulAccumulationBackward final : autograd::Node {
  Tensor a, b;  // each saved only when the other operand needs a gradient
  Shape a_shape, b_shape;
  Transpose ta = Transpose::no, tb = Transpose::no;

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const DType dtype = next[0] ? b.dtype() : a.dtype();
    const Tensor g = grad_output.dtype() == dtype ? grad_output : cast(grad_output, dtype);
    const NnKernels& nn = *backend_for(g.device()).nn;
    Tensor ga, gb;
    // d op(A) (M, K) = dC (M, N) x op(B)^T (N, K); written into A's layout (transposed if ta).
    if (next[0]) ga = nn.matmul_summed(g, Transpose::no, b, flip(tb), a_shape, ta);
    // d op(B) (K, N) = op(A)^T (K, M) x dC (M, N).
    if (next[1]) gb = nn.matmul_summed(a, flip(ta), g, Transpose::no, b_shape, tb);
    return {ga, gb};
  }

  std::string name() const override { return "MatmulAccumulationBackward"; }
  void release_saved() override { a = b = Tensor(); }
};

void check_matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb) {
  ops::check_same_dtype_device("matmul", a, b);
  ops::check_floating("matmul", a);
  if (a.rank() < 2 || b.rank() < 2) {
    throw ShapeError("matmul: operands need rank >= 2, got " + a.shape().to_string() + " x " +
                     b.shape().to_string() +
                     "; reshape a vector to (1, K) or (K, 1) to multiply it as a matrix");
  }
  const Shape sa = op_shape(a.shape(), ta), sb = op_shape(b.shape(), tb);
  if (sa[sa.rank() - 1] != sb[sb.rank() - 2]) {
    throw ShapeError("matmul: inner dimensions do not match: " + sa.to_string() + " x " +
                     sb.to_string() +
                     " (after transposes); the last extent of the first operand must equal the "
                     "second-to-last extent of the second");
  }
  const Shape ba = batch_shape(sa), bb = batch_shape(sb);
  for (int i = 1; i <= std::min(ba.rank(), bb.rank()); ++i) {
    const std::int64_t da = ba[ba.rank() - i], db = bb[bb.rank() - i];
    if (da != db && da != 1 && db != 1) {
      throw ShapeError("matmul: batch dimensions do not broadcast: " + sa.to_string() + " x " +
                       sb.to_string() +
                       " (after transposes); each batch extent must match or be 1");
    }
  }
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, Transpose transpose_a, Transpose transpose_b) {
  check_matmul(a, b, transpose_a, transpose_b);
  Tensor out = matmul_impl(a, b, transpose_a, transpose_b, a.dtype());
  if (!autograd::needs_record({&a, &b})) return out;
  auto node = std::make_shared<MatmulBackward>();
  node->a_shape = a.shape();
  node->b_shape = b.shape();
  node->ta = transpose_a;
  node->tb = transpose_b;
  if (b.requires_grad()) node->a = a.detach();
  if (a.requires_grad()) node->b = b.detach();
  return autograd::record(out, node, {a, b});
}

Tensor matmul(const Tensor& a, const Tensor& b, Transpose transpose_a, Transpose transpose_b,
              Accumulation accumulation) {
  ops::check_same_dtype_device("matmul", a, b);
  ops::check_floating("matmul", a);
  if (accumulation == Accumulation::float32 || !is_16bit_float(a.dtype())) {
    // float32 accumulation, or operands whose compute dtype already is float32/float64.
    return matmul(a, b, transpose_a, transpose_b);
  }
  check_matmul(a, b, transpose_a, transpose_b);
  const Tensor ad = a.detach(), bd = b.detach();
  const int rank = std::max(a.rank(), b.rank());
  Tensor out = backend_for(a.device())
                   .nn->matmul(core::pad_rank(ad, rank), core::pad_rank(bd, rank), transpose_a,
                               transpose_b, a.dtype(), Accumulation::compute_dtype);
  if (!autograd::needs_record({&a, &b})) return out;
  auto node = std::make_shared<MatmulAccumulationBackward>();
  node->a_shape = a.shape();
  node->b_shape = b.shape();
  node->ta = transpose_a;
  node->tb = transpose_b;
  if (b.requires_grad()) node->a = ad;
  if (a.requires_grad()) node->b = bd;
  return autograd::record(out, node, {a, b});
}

}  // namespace mixprec
