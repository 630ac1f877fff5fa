// CPU matmul. Operands are described as oneDNN sees them: a logical (..., rows, cols) geometry
// with strides, so a transposed operand is the same memory with its last two strides swapped and
// never a transposed copy. Layouts oneDNN's fast kernels do not take (both matrix strides != 1,
// batch axes interleaved with the matrix, stride-0 broadcast views) are copied to row-major first.
#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/cast.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/matmul_long_inner.h"
#include "backend/cpu/scratch.h"
#include "core/tensor_impl.h"
#include "mixprec/convert.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// (..., R, C) as the matmul reads it: the tensor's geometry with the last two axes swapped when
// the operand is transposed.
struct Layout {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> strides;

  int rank() const { return static_cast<int>(dims.size()); }
  std::int64_t rows() const { return dims[dims.size() - 2]; }
  std::int64_t cols() const { return dims[dims.size() - 1]; }
  std::int64_t row_stride() const { return strides[strides.size() - 2]; }
  std::int64_t col_stride() const { return strides[strides.size() - 1]; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;
    return n;
  }
  // Elements from the first to one past the last element addressed.
  std::int64_t span() const {
    std::int64_t last = 0;
    for (std::size_t i = 0; i < dims.size(); ++i) last += (dims[i] - 1) * strides[i];
    return last + 1;
  }
};

Layout logical_layout(const Tensor& t, Transpose transpose) {
  Layout layout{t.shape().dims(), t.strides()};
  if (transpose == Transpose::yes) {
    const std::size_t r = layout.dims.size();
    std::swap(layout.dims[r - 2], layout.dims[r - 1]);
    std::swap(layout.strides[r - 2], layout.strides[r - 1]);
  }
  return layout;
}

// Gives extent-1 axes strides that keep the layout plain (their stride is never used), then tells
// whether oneDNN's fast kernels take the layout: the matrix row-major (column stride 1) or
// column-major (row stride 1) with a leading dimension of at least its extent, and every batch
// axis of extent > 1 outside the matrix and outside the batch axes after it.
bool normalize_plain(Layout& layout) {
  const std::size_t r = layout.dims.size();
  const std::int64_t rows = layout.dims[r - 2], cols = layout.dims[r - 1];
  std::int64_t& rs = layout.strides[r - 2];
  std::int64_t& cs = layout.strides[r - 1];
  if (rows == 1 && cols == 1) {
    rs = cs = 1;
  } else if (rows == 1) {
    rs = cs == 1 ? cols : 1;
  } else if (cols == 1) {
    cs = rs == 1 ? rows : 1;
  }
  const bool row_major = cs == 1 && rs >= cols;
  const bool col_major = rs == 1 && cs >= rows;
  if (!row_major && !col_major) return false;
  std::int64_t span = row_major ? rs * rows : cs * cols;
  for (std::size_t i = r - 2; i-- > 0;) {
    if (layout.dims[i] == 1) {
      layout.strides[i] = span;
      continue;
    }
    if (layout.strides[i] < span) return false;
    span = layout.strides[i] * layout.dims[i];
  }
  return true;
}

// An operand ready for the kernels: `data` holds the elements `layout` addresses from its first
// element (data.data_ptr()).
struct Operand {
  Tensor data;
  Layout layout;
};

Operand prepare(const Tensor& t, Transpose transpose) {
  Operand op{t, logical_layout(t, transpose)};
  if (normalize_plain(op.layout)) return op;
  // A layout oneDNN has no fast kernel for: copy to row-major (..., rows, cols) of the stored
  // tensor, then apply the transpose as strides again.
  op.data = core::make_tensor(t.shape(), t.dtype(), t.device());
  strided_to_contiguous(t.data_ptr(), t.shape(), t.strides(), dtype_size(t.dtype()),
                        op.data.data_ptr());
  op.layout = logical_layout(op.data, transpose);
  normalize_plain(op.layout);
  return op;
}

// out (..., M, N), contiguous = a (..., M, K) x b (..., K, N) on oneDNN. The data types of the
// operands and of `out` are given by their storage (float32 or bfloat16).
// `bias32` (N), when defined, is added to the float32 accumulator before the rounding.
void run_dnnl(const Operand& a, const Operand& b, dnnl::memory::data_type in_type, Tensor& out,
              dnnl::memory::data_type out_type, const Tensor& bias32 = Tensor()) {
  MatmulGeometry geometry;
  geometry.src = {a.layout.dims, a.layout.strides, in_type};
  geometry.weights = {b.layout.dims, b.layout.strides, in_type};
  geometry.dst = {out.shape().dims(), out.strides(), out_type};
  geometry.bias = bias32.defined();
  const auto primitive = matmul_primitive(geometry);
  dnnl::engine& engine = dnnl_engine();
  // oneDNN takes non-const handles; it only reads src and weights.
  dnnl::memory src(primitive->src, engine, const_cast<void*>(a.data.data_ptr()));
  dnnl::memory weights(primitive->weights, engine, const_cast<void*>(b.data.data_ptr()));
  dnnl::memory dst(primitive->dst, engine, out.data_ptr());
  const Scratchpad pad = dnnl_scratchpad(primitive->scratchpad_bytes);
  dnnl::stream& stream = dnnl_stream();
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src},
                                             {DNNL_ARG_WEIGHTS, weights},
                                             {DNNL_ARG_DST, dst},
                                             {DNNL_ARG_SCRATCHPAD, pad.memory}};
  if (geometry.bias) {
    args[DNNL_ARG_BIAS] =
        dnnl::memory(primitive->bias, engine, const_cast<void*>(bias32.data_ptr()));
  }
  primitive->primitive.execute(stream, args);
  stream.wait();
}

// One bulk conversion of a 16-bit <-> float32 pair of arrays.
template <typename From, typename To>
struct Conversion {
  const From* src;
  To* dst;
  std::int64_t n;
};

// Runs the conversions in one OpenMP region, split into blocks of kBlock elements. The work is
// memory-bound and short next to the multiply (three 1M-element conversions around a 1024^3
// product), so the number of parallel regions matters as much as the bandwidth: each region is a
// fork and a barrier, and on a shared VM a barrier waits out a scheduler tick whenever a thread was
// preempted. Both operands therefore convert in one region and the result in a second. float16 /
// float32 time at 1024^3, quiet 2-core VM, interleaved runs: 1.08 like this, 1.13 with one region
// per conversion, 1.17 converting on the calling thread.
template <typename From, typename To>
void convert_parallel(const std::vector<Conversion<From, To>>& jobs) {
  constexpr std::int64_t kBlock = 1 << 15;
  std::vector<std::int64_t> first_block{0};  // prefix sums of the jobs' block counts
  for (const auto& job : jobs)
    first_block.push_back(first_block.back() + (job.n + kBlock - 1) / kBlock);
  const std::int64_t blocks = first_block.back();
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const auto j = static_cast<std::size_t>(
        std::upper_bound(first_block.begin(), first_block.end(), b) - first_block.begin() - 1);
    const std::int64_t start = (b - first_block[j]) * kBlock;
    const std::int64_t n = std::min(kBlock, jobs[j].n - start);
    convert(jobs[j].src + start, jobs[j].dst + start, static_cast<std::size_t>(n));
  }
}

// A 16-bit operand as float32 with the same layout where that costs little: the addressed span is
// converted in one pass (padding included) when it is at most twice the element count, as a job
// appended to `jobs` for the caller to run; otherwise (a narrow slice of a wide matrix) the
// elements are gathered into a row-major float32 copy at once.
template <typename T>
Operand to_float32(const Operand& op, Transpose transpose, ScratchSlot slot,
                   std::vector<Conversion<T, float>>& jobs) {
  const std::int64_t span = op.layout.span();
  if (span <= 2 * op.layout.numel()) {
    Operand out{scratch(slot, DType::float32, span), op.layout};
    jobs.push_back({static_cast<const T*>(op.data.data_ptr()), out.data.data<float>(), span});
    return out;
  }
  Operand out{cpu::cast(op.data, DType::float32), {}};
  out.layout = logical_layout(out.data, transpose);
  normalize_plain(out.layout);
  return out;
}

// The float16 (or non-native bfloat16) product: the operands widened exactly to float32, the
// float32 primitive, and the float32 result rounded once into `out` (or returned in it unrounded
// when `out` is float32). oneDNN 2.6 has no float16 matmul on CPU (no primitive for f16 src,
// weights or dst), and bf16 without AVX512_BF16 would be emulated.
template <typename T>
void matmul_via_float32(const Operand& a, Transpose ta, const Operand& b, Transpose tb,
                        Tensor& out) {
  using dt = dnnl::memory::data_type;
  std::vector<Conversion<T, float>> jobs;
  const Operand a32 = to_float32<T>(a, ta, ScratchSlot::operand_a, jobs);
  const Operand b32 = to_float32<T>(b, tb, ScratchSlot::operand_b, jobs);
  convert_parallel(jobs);
  if (out.dtype() == DType::float32) {
    run_dnnl(a32, b32, dt::f32, out, dt::f32);
    return;
  }
  Tensor out32 = core::make_view(scratch(ScratchSlot::result, DType::float32, out.numel()),
                                 out.shape(), out.strides(), 0);
  run_dnnl(a32, b32, dt::f32, out32, dt::f32);
  convert_parallel<float, T>({{out32.data<float>(), static_cast<T*>(out.data_ptr()), out.numel()}});
}

std::vector<std::int64_t> output_dims(const Layout& a, const Layout& b) {
  std::vector<std::int64_t> dims(a.dims.size());
  for (std::size_t i = 0; i + 2 < dims.size(); ++i) dims[i] = std::max(a.dims[i], b.dims[i]);
  dims[dims.size() - 2] = a.rows();
  dims[dims.size() - 1] = b.cols();
  return dims;
}

// float64 (gradient checks only): out[i, j] = sum_k a[i, k] b[k, j] with float64 accumulation,
// blocked over (k, j) so a block of b stays in cache while a block of rows of a streams past it.
void matmul_float64(const Operand& a, const Operand& b, Tensor& out) {
  constexpr std::int64_t kRowBlock = 16, kKBlock = 128, kColBlock = 256;
  const Layout& la = a.layout;
  const Layout& lb = b.layout;
  const int rank = la.rank();
  const std::int64_t m = la.rows(), k_total = la.cols(), n = lb.cols();
  const auto& out_dims = out.shape().dims();
  std::int64_t batches = 1;
  for (int i = 0; i < rank - 2; ++i) batches *= out_dims[static_cast<std::size_t>(i)];
  const double* pa = static_cast<const double*>(a.data.data_ptr());
  const double* pb = static_cast<const double*>(b.data.data_ptr());
  double* pc = out.data<double>();
  const std::int64_t sam = la.row_stride(), sak = la.col_stride();
  const std::int64_t sbk = lb.row_stride(), sbn = lb.col_stride();
  const std::int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  std::memset(pc, 0, static_cast<std::size_t>(out.numel()) * sizeof(double));
#pragma omp parallel for schedule(static) if (batches * m * n * k_total > (1 << 16))
  for (std::int64_t unit = 0; unit < batches * row_blocks; ++unit) {
    const std::int64_t batch = unit / row_blocks;
    const std::int64_t i0 = (unit % row_blocks) * kRowBlock, i1 = std::min(m, i0 + kRowBlock);
    // Offsets of this batch in a and b (an extent-1 batch axis broadcasts: index 0).
    std::int64_t rem = batch, offset_a = 0, offset_b = 0;
    for (int d = rank - 3; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      const std::int64_t idx = rem % out_dims[du];
      rem /= out_dims[du];
      if (la.dims[du] != 1) offset_a += idx * la.strides[du];
      if (lb.dims[du] != 1) offset_b += idx * lb.strides[du];
    }
    double* c = pc + batch * m * n;
    for (std::int64_t k0 = 0; k0 < k_total; k0 += kKBlock) {
      const std::int64_t k1 = std::min(k_total, k0 + kKBlock);
      for (std::int64_t j0 = 0; j0 < n; j0 += kColBlock) {
        const std::int64_t j1 = std::min(n, j0 + kColBlock);
        for (std::int64_t i = i0; i < i1; ++i) {
          double* crow = c + i * n;
          for (std::int64_t k = k0; k < k1; ++k) {
            const double aik = pa[offset_a + i * sam + k * sak];
            const double* brow = pb + offset_b + k * sbk;
            if (sbn == 1) {
              for (std::int64_t j = j0; j < j1; ++j) crow[j] += aik * brow[j];
            } else {
              for (std::int64_t j = j0; j < j1; ++j) crow[j] += aik * brow[j * sbn];
            }
          }
        }
      }
    }
  }
}

void check_operands(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb) {
  if (a.dtype() != b.dtype() || !is_floating(a.dtype()) || !a.device().is_cpu() ||
      !b.device().is_cpu()) {
    throw Error("cpu::matmul: expected two CPU tensors of one floating dtype, got " +
                std::string(dtype_name(a.dtype())) + " and " + std::string(dtype_name(b.dtype())));
  }
  bool ok = a.rank() >= 2 && a.rank() == b.rank();
  const Layout la = ok ? logical_layout(a, ta) : Layout{};
  const Layout lb = ok ? logical_layout(b, tb) : Layout{};
  ok = ok && la.cols() == lb.rows();
  for (int i = 0; ok && i < la.rank() - 2; ++i) {
    const auto u = static_cast<std::size_t>(i);
    ok = la.dims[u] == lb.dims[u] || la.dims[u] == 1 || lb.dims[u] == 1;
  }
  if (!ok) {
    throw ShapeError("cpu::matmul: operands " + a.shape().to_string() + " and " +
                     b.shape().to_string() +
                     " need the same rank >= 2, matching inner extents and batch extents that "
                     "are equal or 1");
  }
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb) {
  return matmul(a, b, ta, tb, a.dtype());
}

void release_matmul_scratch() { release_cpu_scratch(); }

Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype) {
  check_operands(a, b, ta, tb);
  const DType dtype = a.dtype();
  if (out_dtype != dtype && !(is_16bit_float(dtype) && out_dtype == DType::float32)) {
    throw Error("cpu::matmul: " + std::string(dtype_name(dtype)) + " operands cannot produce a " +
                std::string(dtype_name(out_dtype)) + " result");
  }
  const Layout la = logical_layout(a, ta), lb = logical_layout(b, tb);
  Tensor out = core::make_tensor(Shape(output_dims(la, lb)), out_dtype, a.device());
  if (out.numel() == 0) return out;
  if (la.cols() == 0) {  // an empty sum: all zeros (all-zero bits in every floating dtype)
    std::memset(out.data_ptr(), 0, out.nbytes());
    return out;
  }
  if (a.rank() == 2 && ta == Transpose::yes && tb == Transpose::no && a.is_contiguous() &&
      b.is_contiguous() && takes_long_inner(dtype, la.rows(), lb.cols(), la.cols())) {
    // x^T . dy, a filter gradient: matmul_long_inner.h.
    long_inner_product(a, b, out);
    return out;
  }
  const Operand pa = prepare(a, ta), pb = prepare(b, tb);
  using dt = dnnl::memory::data_type;
  const dt out_type = out_dtype == DType::float32 ? dt::f32 : dt::bf16;
  switch (dtype) {
    case DType::float64: matmul_float64(pa, pb, out); break;
    case DType::float32: run_dnnl(pa, pb, dt::f32, out, dt::f32); break;
    case DType::bfloat16:
      if (use_native_bf16()) {
        // bf16 x bf16 with float32 accumulation inside oneDNN, rounded once to bf16 on store
        // (or stored as float32).
        run_dnnl(pa, pb, dt::bf16, out, out_type);
        break;
      }
      matmul_via_float32<bfloat16>(pa, ta, pb, tb, out);
      break;
    case DType::float16: matmul_via_float32<float16>(pa, ta, pb, tb, out); break;
    default: break;  // excluded by check_operands
  }
  return out;
}

}  // namespace mixprec::cpu

namespace mixprec::cpu {

Tensor matmul_bias(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                   const Tensor& bias32) {
  check_operands(a, b, ta, tb);
  const DType dtype = a.dtype();
  const Layout la = logical_layout(a, ta), lb = logical_layout(b, tb);
  if (la.rank() != 2 || !bias32.defined() || bias32.dtype() != DType::float32 ||
      !bias32.is_contiguous() || bias32.shape() != Shape{lb.cols()}) {
    throw Error("cpu::matmul_bias: rank-2 operands and a contiguous float32 bias (" +
                std::to_string(lb.cols()) + ") are needed, got operands " + a.shape().to_string() +
                " and " + b.shape().to_string() + " and a bias " +
                (bias32.defined()
                     ? std::string(dtype_name(bias32.dtype())) + " " + bias32.shape().to_string()
                     : std::string("that is undefined")));
  }
  const bool native = dtype == DType::float32 || (dtype == DType::bfloat16 && use_native_bf16());
  if (!native) {
    // float16 (and bf16 without native support): exactly widened, float32, rounded once.
    return cpu::cast(
        matmul_bias(cpu::cast(a, DType::float32), cpu::cast(b, DType::float32), ta, tb, bias32),
        dtype);
  }
  Tensor out = core::make_tensor(Shape(output_dims(la, lb)), dtype, a.device());
  if (out.numel() == 0) return out;
  using dt = dnnl::memory::data_type;
  const dt type = dtype == DType::float32 ? dt::f32 : dt::bf16;
  if (la.cols() == 0) {  // an empty sum: the bias in every row
    return cpu::cast(core::make_view(bias32, out.shape(), {0, 1}, 0), dtype);
  }
  run_dnnl(prepare(a, ta), prepare(b, tb), type, out, type, bias32);
  return out;
}

}  // namespace mixprec::cpu
