// The CPU's 16-bit accumulation product (cpu/matmul_accumulation.h): every partial sum rounded to
// the 16-bit dtype,
//
//   sum = +0;  for k in 0..K-1:  sum = T(float(sum) + float(a[i,k]) * float(b[k,j]))
//
// the path of Accumulation::compute_dtype on the CPU (DESIGN §2.4), so that a user can see on the
// CPU what 16-bit hardware accumulation (tensor cores with a float16 accumulator) does to a model:
// a float16 sum of K terms of size ~1 stops growing at 2048, where adding 1 no longer changes it
// (1024 for ulp-sized terms; 256 in bfloat16). A reference path and slow: scalar, unblocked, two
// conversions per multiply-add, O(M N K) with no cache reuse; expect 1-2 orders of magnitude below
// the oneDNN matmul.
//
// The product of two float16 (11-bit significand) or bfloat16 (8-bit) values is exact in float
// (24 bits), so float(sum) + product rounds once to float and once more to T; a compiler that
// contracts it into an FMA computes the same float, so the result does not depend on -ffp-contract.
#include "backend/cpu/matmul_accumulation.h"

#include <algorithm>
#include <vector>

#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// (rows, cols) of op(x): the last two extents, swapped when transposed.
std::int64_t op_rows(const Tensor& x, Transpose t) {
  return t == Transpose::no ? x.dim(-2) : x.dim(-1);
}
std::int64_t op_cols(const Tensor& x, Transpose t) {
  return t == Transpose::no ? x.dim(-1) : x.dim(-2);
}

// The broadcast batch shape of l (Bl..., *, *) and r (Br..., *, *), right-aligned (the op layer
// has checked that they broadcast).
Shape broadcast_batch(const Tensor& l, const Tensor& r) {
  const int rl = l.rank() - 2, rr = r.rank() - 2, n = std::max(rl, rr);
  std::vector<std::int64_t> dims(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int il = i - (n - rl), ir = i - (n - rr);
    const std::int64_t dl = il >= 0 ? l.shape()[il] : 1, dr = ir >= 0 ? r.shape()[ir] : 1;
    dims[static_cast<std::size_t>(i)] = dl == 1 ? dr : dl;
  }
  return Shape(dims);
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

}  // namespace

Tensor matmul_accumulate16(const Tensor& l, Transpose tl, const Tensor& r, Transpose tr,
                           const Shape& out_shape, Transpose to) {
  if (l.dtype() != r.dtype() || !is_16bit_float(l.dtype())) {
    throw DTypeError(
        "cpu::matmul_accumulate16: expected float16 or bfloat16 operands of one "
        "dtype");
  }
  return accumulate(l, tl, r, tr, out_shape, to, broadcast_batch(l, r));
}

}  // namespace mixprec::cpu
