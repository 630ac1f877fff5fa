// matmul with a chosen accumulation dtype (ops.h). Accumulation::float32, and any float32/float64
// operands, forward to the ordinary matmul. Accumulation::compute_dtype with float16/bfloat16
// operands runs the loop below, in which every partial sum is rounded to the 16-bit dtype:
//
//   sum = +0;  for k in 0..K-1:  sum = T(float(sum) + float(a[i,k]) * float(b[k,j]))
//
// It exists for two reasons: the DESIGN §2.4 dtype table (layers under
// MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE=0 compute with float16 accumulation, and that must be
// observable), and fidelity to 16-bit hardware accumulation (tensor cores with a float16
// accumulator), so that a user can see on the CPU what such accumulation does to a model: a float16
// sum of K terms of size ~1 stops growing at 2048, where adding 1 no longer changes it (1024 for
// ulp-sized terms; 256 in bfloat16). It is a reference path and slow: scalar, unblocked, two
// conversions per multiply-add, O(M N K) with no cache reuse; expect it to be 1-2 orders of
// magnitude slower than the oneDNN matmul.
//
// The product of two float16 (11-bit significand) or bfloat16 (8-bit) values is exact in float
// (24 bits), so float(sum) + product rounds once to float and once more to T; a compiler that
// contracts it into an FMA computes the same float, so the result does not depend on -ffp-contract.
#include <algorithm>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/cuda/matmul.h"
#include "core/tensor_impl.h"
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

// How the kernel walks op(x) under a batch shape: matrix t (row-major flat index into `batch`)
// starts at offsets[t]; element (r, c) of it is rs * r + cs * c further. Batch axes x lacks, or
// has with extent 1, get stride 0 (broadcast).
struct Walk {
  std::vector<std::int64_t> offsets;
  std::int64_t rs = 0, cs = 0;
};

Walk make_walk(const Tensor& x, Transpose t, const Shape& batch) {
  const int r = batch.rank(), xr = x.rank() - 2;
  std::vector<std::int64_t> strides(static_cast<std::size_t>(r), 0);
  for (int i = 0; i < xr; ++i) {
    if (x.shape()[i] != 1) strides[static_cast<std::size_t>(r - xr + i)] = x.strides()[i];
  }
  Walk w;
  w.offsets.resize(static_cast<std::size_t>(batch.numel()));
  std::vector<std::int64_t> index(static_cast<std::size_t>(r), 0);
  std::int64_t offset = 0;
  for (std::size_t t = 0; t < w.offsets.size(); ++t) {
    w.offsets[t] = offset;
    for (int d = r - 1; d >= 0; --d) {  // odometer increment of the multi-index
      const auto du = static_cast<std::size_t>(d);
      offset += strides[du];
      if (++index[du] < batch[d]) break;
      offset -= strides[du] * index[du];
      index[du] = 0;
    }
  }
  const std::int64_t s_row = x.strides()[static_cast<std::size_t>(x.rank() - 2)];
  const std::int64_t s_col = x.strides()[static_cast<std::size_t>(x.rank() - 1)];
  w.rs = t == Transpose::no ? s_row : s_col;
  w.cs = t == Transpose::no ? s_col : s_row;
  return w;
}

// out[g] = sum over the batch entries t of group g, in order, of op(l)[t] op(r)[t], every partial
// sum rounded to T. l: (M, K) per entry, r: (K, N), out: (M, N) per group at groups_offset[g].
template <typename T>
void accumulate16(const T* l, const Walk& wl, const T* r, const Walk& wr, T* out, const Walk& wo,
                  const std::vector<std::vector<std::int64_t>>& groups,
                  const std::vector<std::int64_t>& group_offset, std::int64_t m, std::int64_t n,
                  std::int64_t k) {
  const auto g_count = static_cast<std::int64_t>(groups.size());
  const std::int64_t rows = g_count * m;
  // One (group, row) per iteration: the rows are independent, and each output element's running
  // sum stays in one thread in the fixed order (batch entry, then k), so results do not depend on
  // the thread count. Parallel only when there is enough work to pay for the threads.
  const bool parallel = rows > 1 && rows * n * k > (1 << 14);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t gi = 0; gi < rows; ++gi) {
    const std::int64_t g = gi / m, i = gi % m;
    const auto& entries = groups[static_cast<std::size_t>(g)];
    T* out_row = out + group_offset[static_cast<std::size_t>(g)] + i * wo.rs;
    for (std::int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;  // always a value of T: rounded after each step
      for (const std::int64_t t : entries) {
        const T* lp = l + wl.offsets[static_cast<std::size_t>(t)] + i * wl.rs;
        const T* rp = r + wr.offsets[static_cast<std::size_t>(t)] + j * wr.cs;
        for (std::int64_t kk = 0; kk < k; ++kk) {
          const float product =
              static_cast<float>(lp[kk * wl.cs]) * static_cast<float>(rp[kk * wr.rs]);
          sum = static_cast<float>(T(sum + product));
        }
      }
      out_row[j * wo.cs] = T(sum);
    }
  }
}

// A new tensor of `out_shape` (contiguous) holding, for each of its matrices, op_o^-1 of the sum of
// op_l(l) op_r(r) over the batch entries of `batch` that map onto it: for the forward out_shape is
// batch + (M, N) and each matrix gets one product; for a gradient out_shape is an operand's shape,
// and the products of the batch axes it was broadcast along are summed in the same running 16-bit
// sum. `to` = yes writes the (M, N) result transposed into an (N, M) matrix of out.
Tensor accumulate(const Tensor& l, Transpose tl, const Tensor& r, Transpose tr,
                  const Shape& out_shape, Transpose to, const Shape& batch) {
  Tensor out = core::make_tensor(out_shape, l.dtype(), l.device());
  if (out.numel() == 0) return out;
  const std::int64_t m = op_rows(l, tl), k = op_cols(l, tl), n = op_cols(r, tr);
  const Walk wl = make_walk(l, tl, batch), wr = make_walk(r, tr, batch);
  const Walk wo = make_walk(out, to, batch);
  // out is contiguous, so its matrix number is its offset / (M N); entries of `batch` along which
  // out is broadcast share one matrix, and are summed into it in increasing order.
  const std::int64_t matrix = m * n;
  std::vector<std::vector<std::int64_t>> groups(static_cast<std::size_t>(out.numel() / matrix));
  for (std::size_t t = 0; t < wo.offsets.size(); ++t) {
    groups[static_cast<std::size_t>(wo.offsets[t] / matrix)].push_back(
        static_cast<std::int64_t>(t));
  }
  std::vector<std::int64_t> group_offset(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g)
    group_offset[g] = static_cast<std::int64_t>(g) * matrix;
  if (l.dtype() == DType::float16) {
    accumulate16(static_cast<const float16*>(l.data_ptr()), wl,
                 static_cast<const float16*>(r.data_ptr()), wr,
                 static_cast<float16*>(out.data_ptr()), wo, groups, group_offset, m, n, k);
  } else {
    accumulate16(static_cast<const bfloat16*>(l.data_ptr()), wl,
                 static_cast<const bfloat16*>(r.data_ptr()), wr,
                 static_cast<bfloat16*>(out.data_ptr()), wo, groups, group_offset, m, n, k);
  }
  return out;
}

Shape output_shape(const Shape& batch, std::int64_t m, std::int64_t n) {
  std::vector<std::int64_t> dims(batch.begin(), batch.end());
  dims.push_back(m);
  dims.push_back(n);
  return Shape(dims);
}

// With op(X) = X or X^T and C = op(A) op(B):  d op(A) = dC op(B)^T,  d op(B) = op(A)^T dC, each
// accumulated in the 16-bit dtype like the forward, and summed (in the same running sum) over the
// batch axes along which the operand was broadcast.
struct MatmulAccumulationBackward final : autograd::Node {
  Tensor a, b;  // each saved only when the other operand needs a gradient
  Shape a_shape, b_shape;
  Transpose ta = Transpose::no, tb = Transpose::no;

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const DType dtype = next[0] ? b.dtype() : a.dtype();
    const Tensor g = grad_output.dtype() == dtype ? grad_output : cast(grad_output, dtype);
    Shape batch(std::vector<std::int64_t>(g.shape().begin(), g.shape().end() - 2));
    Tensor ga, gb;
    // d op(A) (M, K) = dC (M, N) x op(B)^T (N, K); written into A's layout (transposed if ta).
    if (next[0]) ga = accumulate(g, Transpose::no, b, flip(tb), a_shape, ta, batch);
    // d op(B) (K, N) = op(A)^T (K, M) x dC (M, N).
    if (next[1]) gb = accumulate(a, flip(ta), g, Transpose::no, b_shape, tb, batch);
    return {ga, gb};
  }

  std::string name() const override { return "MatmulAccumulationBackward"; }
  void release_saved() override { a = b = Tensor(); }
};

// ---- CUDA: cuBLASLt with a 16-bit compute type (CUBLAS_COMPUTE_16F for float16; bfloat16 has
// none in cuBLASLt and accumulates in float32, see cuda/matmul.h). The products of batch axes an
// operand was broadcast along are summed by sum_to (float32 accumulation, rounded once), not in
// the running 16-bit sum of the CPU reference.

using ops::pad_rank;

Tensor cuda_accumulate16(const Tensor& l, Transpose tl, const Tensor& r, Transpose tr) {
  const int rank = std::max(l.rank(), r.rank());
  return cuda::matmul(pad_rank(l.detach(), rank), pad_rank(r.detach(), rank), tl, tr, l.dtype(),
                      Accumulation::compute_dtype);
}

// With op(X) = X or X^T and C = op(A) op(B): d op(A) = dC op(B)^T, d op(B) = op(A)^T dC (as in
// matmul.cpp), each a 16-bit-accumulated product.
struct CudaMatmulAccumulationBackward final : autograd::Node {
  Tensor a, b;
  Shape a_shape, b_shape;
  Transpose ta = Transpose::no, tb = Transpose::no;

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    const DType dtype = next[0] ? b.dtype() : a.dtype();
    const Tensor g = grad_output.dtype() == dtype ? grad_output : cast(grad_output, dtype);
    Tensor ga, gb;
    if (next[0]) {
      ga = ta == Transpose::no ? cuda_accumulate16(g, Transpose::no, b, flip(tb))
                               : cuda_accumulate16(b, tb, g, Transpose::yes);
      ga = sum_to(ga, a_shape);
    }
    if (next[1]) {
      gb = tb == Transpose::no ? cuda_accumulate16(a, flip(ta), g, Transpose::no)
                               : cuda_accumulate16(g, Transpose::yes, a, ta);
      gb = sum_to(gb, b_shape);
    }
    return {ga, gb};
  }
  std::string name() const override { return "MatmulAccumulationBackward"; }
  void release_saved() override { a = b = Tensor(); }
};

Tensor cuda_matmul_accumulation(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb) {
  const Tensor ad = a.detach(), bd = b.detach();
  Tensor out = cuda_accumulate16(ad, ta, bd, tb);
  if (!autograd::needs_record({&a, &b})) return out;
  auto node = std::make_shared<CudaMatmulAccumulationBackward>();
  node->a_shape = a.shape();
  node->b_shape = b.shape();
  node->ta = ta;
  node->tb = tb;
  if (b.requires_grad()) node->a = ad;
  if (a.requires_grad()) node->b = bd;
  return autograd::record(out, node, {a, b});
}

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
  const Shape batch = broadcast_batch(a, transpose_a, b, transpose_b);
  if (a.device().is_cuda()) return cuda_matmul_accumulation(a, b, transpose_a, transpose_b);
  const Tensor ad = a.detach(), bd = b.detach();
  Tensor out = accumulate(ad, transpose_a, bd, transpose_b,
                          output_shape(batch, op_rows(a, transpose_a), op_cols(b, transpose_b)),
                          Transpose::no, batch);
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
