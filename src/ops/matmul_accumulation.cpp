// matmul with a chosen accumulation dtype (ops.h). Accumulation::float32, and any float32/float64
// operands, forward to the ordinary matmul. Accumulation::compute_dtype with float16/bfloat16
// operands runs the backend's 16-bit accumulation product (backend/nn_kernels.h: matmul with
// Accumulation::compute_dtype, and matmul_summed for the gradients): on the CPU a loop in which
// every partial sum is rounded to the 16-bit dtype (backend/cpu/matmul_accumulation.h), on CUDA
// cuBLASLt's 16-bit compute type. It exists for two reasons: the DESIGN §2.4 dtype table (layers
// under MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE=0 compute with float16 accumulation, and that must be
// observable), and fidelity to 16-bit hardware accumulation, so that a user can see on the CPU what
// such accumulation does to a model. It is a reference path and slow on the CPU.
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/ops.h"
#include "ops/checks.h"
#include "ops/matmul_views.h"

namespace mixprec {

namespace {

Transpose flip(Transpose t) { return t == Transpose::yes ? Transpose::no : Transpose::yes; }

// (rows, cols) of op(x): the last two extents, swapped when transposed.
std::int64_t op_rows(const Tensor& x, Transpose t) {
  return t == Transpose::no ? x.dim(-2) : x.dim(-1);
}
std::int64_t op_cols(const Tensor& x, Transpose t) {
  return t == Transpose::no ? x.dim(-1) : x.dim(-2);
}

std::string op_shape_string(const Tensor& x, Transpose t) {
  Shape s = x.shape();
  if (t == Transpose::yes) std::swap(s[s.rank() - 2], s[s.rank() - 1]);
  return s.to_string();
}

// The broadcast batch shape of a (Ba..., *, *) and b (Bb..., *, *): NumPy rules, right-aligned.
// Throws ShapeError when an axis does not broadcast.
Shape broadcast_batch(const Tensor& a, Transpose ta, const Tensor& b, Transpose tb) {
  const int ra = a.rank() - 2, rb = b.rank() - 2, r = std::max(ra, rb);
  std::vector<std::int64_t> dims(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - ra), ib = i - (r - rb);
    const std::int64_t da = ia >= 0 ? a.shape()[ia] : 1, db = ib >= 0 ? b.shape()[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(std::string("matmul: batch dimensions do not broadcast: ") +
                       op_shape_string(a, ta) + " x " + op_shape_string(b, tb) +
                       " (after transposes); each batch extent must match or be 1");
    }
    dims[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(dims);
}

void check_shapes(const Tensor& a, Transpose ta, const Tensor& b, Transpose tb) {
  if (a.rank() < 2 || b.rank() < 2) {
    throw ShapeError("matmul: operands need rank >= 2, got " + a.shape().to_string() + " x " +
                     b.shape().to_string() +
                     "; reshape a vector to (1, K) or (K, 1) to multiply it as a matrix");
  }
  if (op_cols(a, ta) != op_rows(b, tb)) {
    throw ShapeError("matmul: inner dimensions do not match: " + op_shape_string(a, ta) + " x " +
                     op_shape_string(b, tb) +
                     " (after transposes); the last extent of the first operand must equal the "
                     "second-to-last extent of the second");
  }
  broadcast_batch(a, ta, b, tb);
}

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

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, Transpose transpose_a, Transpose transpose_b,
              Accumulation accumulation) {
  ops::check_same_dtype_device("matmul", a, b);
  ops::check_floating("matmul", a);
  if (accumulation == Accumulation::float32 || !is_16bit_float(a.dtype())) {
    // float32 accumulation, or operands whose compute dtype already is float32/float64.
    return matmul(a, b, transpose_a, transpose_b);
  }
  check_shapes(a, transpose_a, b, transpose_b);
  const Tensor ad = a.detach(), bd = b.detach();
  const int rank = std::max(a.rank(), b.rank());
  Tensor out = backend_for(a.device())
                   .nn->matmul(ops::pad_rank(ad, rank), ops::pad_rank(bd, rank), transpose_a,
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
