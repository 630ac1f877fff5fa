#include "backend/cuda/matmul.h"

#include <cublasLt.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"
#include "mixprec/cuda.h"
#include "mixprec/error.h"
#include "mixprec/float16.h"

namespace mixprec::cuda {

namespace {

// cuBLASLt's recommended workspace on Hopper; the heuristic picks algorithms that fit it.
constexpr std::uint64_t kMaxWorkspace = 32u << 20;

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw DeviceError(std::string(what) + " failed: " + cublasLtGetStatusString(status));
  }
}

// ---- operands as cuBLASLt sees them ----

// One operand as a batch of row-major matrices: `rows` x `cols` with row stride `ld`, matrix t of
// the batch at ptr + t * batch_stride (0: the same matrix for every t), and the transpose applied
// to the stored matrix. `keep` holds a copy when the tensor's layout had to be materialised.
struct Operand {
  const void* ptr = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0, batch_stride = 0;
  Transpose t = Transpose::no;
  Tensor keep;
};

Transpose flip(Transpose t) { return t == Transpose::yes ? Transpose::no : Transpose::yes; }

// x (batch..., R, C) with x's batch extents equal to `batch` or 1, seen as a batch of row-major
// matrices. `materialise` copies broadcast batch axes out (for a cuBLASLt without stride-0 support
// for this case).
Operand describe(const Tensor& x, Transpose t, const Shape& batch, bool materialise) {
  Tensor src = x.detach();
  const int r = src.rank();
  const std::vector<std::int64_t> batch_extents(src.shape().begin(), src.shape().end() - 2);
  const std::vector<std::int64_t> batch_strides(src.strides().begin(), src.strides().end() - 2);
  std::int64_t batch_stride = detail::single_batch_stride(batch_extents, batch_strides, batch);
  if (batch_stride < 0 || (materialise && batch_stride == 0 && batch.numel() > 1)) {
    // Expand the broadcast batch axes (stride 0) and copy: a contiguous batch.
    std::vector<std::int64_t> dims(batch.begin(), batch.end());
    std::vector<std::int64_t> strides;
    for (int i = 0; i < batch.rank(); ++i)
      strides.push_back(src.shape()[i] == 1 ? 0 : src.strides()[static_cast<std::size_t>(i)]);
    dims.push_back(src.shape()[r - 2]);
    dims.push_back(src.shape()[r - 1]);
    strides.push_back(src.strides()[static_cast<std::size_t>(r - 2)]);
    strides.push_back(src.strides()[static_cast<std::size_t>(r - 1)]);
    const Tensor expanded = core::make_view(src, Shape(dims), strides, src.offset());
    src = core::make_tensor(expanded.shape(), src.dtype(), src.device());
    copy_strided(expanded, src);
    batch_stride = src.shape()[r - 2] * src.shape()[r - 1];
  }
  const detail::MatrixLayout layout = detail::classify_matrix(
      src.shape()[r - 2], src.shape()[r - 1], src.strides()[static_cast<std::size_t>(r - 2)],
      src.strides()[static_cast<std::size_t>(r - 1)]);
  if (layout.kind == detail::MatrixKind::copy) {
    Tensor copy = core::make_tensor(src.shape(), src.dtype(), src.device());
    copy_strided(src, copy);
    return describe(copy, t, batch, materialise);
  }
  Operand op;
  op.batch_stride = batch_stride;
  op.rows = layout.rows, op.cols = layout.cols, op.ld = layout.ld;
  op.t = layout.kind == detail::MatrixKind::transposed ? flip(t) : t;
  op.ptr = src.data_ptr();
  op.keep = src;
  return op;
}

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return CUDA_R_32F;
    case DType::float16: return CUDA_R_16F;
    case DType::bfloat16: return CUDA_R_16BF;
    case DType::float64: return CUDA_R_64F;
    default:
      throw DTypeError("matmul on CUDA does not support dtype " + std::string(dtype_name(dtype)) +
                       "; supported: float32, float16, bfloat16, float64");
  }
}

// The largest power of two (up to 256) dividing the address: cuBLASLt picks kernels by alignment.
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// ---- the cache ----

struct Key {
  int device = 0;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;  // cuBLASLt's: D (m, n) = op(A) (m, k) op(B) (k, n)
  int op_a = 0, op_b = 0;
  std::int64_t lda = 0, ldb = 0, ldd = 0;
  std::int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  int type_ab = 0, type_d = 0, compute = 0, scale = 0;
  std::uint32_t align_a = 0, align_b = 0, align_d = 0;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  std::size_t operator()(const Key& k) const {
    std::size_t h = 0;
    const auto mix = [&h](std::int64_t v) {
      h ^= std::hash<std::int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    for (std::int64_t v : {std::int64_t{k.device},
                           k.m,
                           k.n,
                           k.k,
                           k.batch,
                           std::int64_t{k.op_a},
                           std::int64_t{k.op_b},
                           k.lda,
                           k.ldb,
                           k.ldd,
                           k.stride_a,
                           k.stride_b,
                           k.stride_d,
                           std::int64_t{k.type_ab},
                           std::int64_t{k.type_d},
                           std::int64_t{k.compute},
                           std::int64_t{k.scale},
                           std::int64_t{k.align_a},
                           std::int64_t{k.align_b},
                           std::int64_t{k.align_d}})
      mix(v);
    return h;
  }
};

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace = 0;
  bool found = false;  // false: the heuristic returned no algorithm for this key
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<Key, Plan, KeyHash> plans;
  std::vector<cublasLtHandle_t> handles;  // per device, created on first use
  MatmulCacheStats stats;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: descriptors live for the process
  return *c;
}

// Called with the cache mutex held.
cublasLtHandle_t handle_for(Cache& c, int device) {
  if (c.handles.size() <= static_cast<std::size_t>(device))
    c.handles.resize(static_cast<std::size_t>(device) + 1, nullptr);
  auto& h = c.handles[static_cast<std::size_t>(device)];
  if (h == nullptr) {
    DeviceGuard guard(device);
    check_lt(cublasLtCreate(&h), "cublasLtCreate");
  }
  return h;
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols,
                                   std::int64_t ld, std::int64_t batch, std::int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                      static_cast<std::uint64_t>(cols), ld),
           "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const auto count = static_cast<std::int32_t>(batch);
    check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                              sizeof(count)),
             "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof(stride)),
             "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  }
  return layout;
}

Plan make_plan(cublasLtHandle_t handle, const Key& key) {
  Plan p;
  check_lt(cublasLtMatmulDescCreate(&p.op, static_cast<cublasComputeType_t>(key.compute),
                                    static_cast<cudaDataType_t>(key.scale)),
           "cublasLtMatmulDescCreate");
  const auto op_a = static_cast<cublasOperation_t>(key.op_a);
  const auto op_b = static_cast<cublasOperation_t>(key.op_b);
  check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
           "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_lt(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
           "cublasLtMatmulDescSetAttribute(TRANSB)");
  const auto ab = static_cast<cudaDataType_t>(key.type_ab);
  // Stored shapes (column-major rows x cols): A is (m, k) or, transposed, (k, m); likewise B.
  const bool ta = op_a == CUBLAS_OP_T, tb = op_b == CUBLAS_OP_T;
  p.a = make_layout(ab, ta ? key.k : key.m, ta ? key.m : key.k, key.lda, key.batch, key.stride_a);
  p.b = make_layout(ab, tb ? key.n : key.k, tb ? key.k : key.n, key.ldb, key.batch, key.stride_b);
  p.d = make_layout(static_cast<cudaDataType_t>(key.type_d), key.m, key.n, key.ldd, key.batch,
                    key.stride_d);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::uint64_t workspace = kMaxWorkspace;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace, sizeof(workspace)),
           "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d}};
  for (const auto& [attribute, value] : alignments) {
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)),
             "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, p.op, p.a, p.b, p.d, p.d, pref, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    p.algo = result.algo;
    p.workspace = result.workspaceSize;
    p.found = true;
  }
  return p;
}

// Runs the product for one pair of described operands; false when cuBLASLt has no algorithm.
bool run(const Operand& oa, const Operand& ob, std::int64_t m_rows, std::int64_t n_cols,
         std::int64_t k_inner, std::int64_t batch, DType dtype, DType out_dtype,
         Accumulation accumulation, Tensor& out, int device, cudaStream_t stream) {
  Key key;
  key.device = device;
  // cuBLASLt's A is our B (stored), its B our A; D = C^T (N, M) with ld N.
  key.m = n_cols, key.n = m_rows, key.k = k_inner, key.batch = batch;
  key.op_a = ob.t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  key.op_b = oa.t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  key.lda = ob.ld, key.ldb = oa.ld, key.ldd = n_cols;
  key.stride_a = ob.batch_stride, key.stride_b = oa.batch_stride, key.stride_d = m_rows * n_cols;
  key.type_ab = data_type(dtype);
  key.type_d = data_type(out_dtype);
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  if (dtype == DType::float64) {
    compute = CUBLAS_COMPUTE_64F, scale = CUDA_R_64F;
  } else if (dtype == DType::float32 && tensor_float_32_execution_enabled()) {
    compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  } else if (dtype == DType::float16 && accumulation == Accumulation::compute_dtype) {
    compute = CUBLAS_COMPUTE_16F, scale = CUDA_R_16F;
  }
  key.compute = compute, key.scale = scale;
  key.align_a = alignment_of(ob.ptr), key.align_b = alignment_of(oa.ptr);
  key.align_d = alignment_of(out.data_ptr());

  Cache& c = cache();
  Plan plan;
  cublasLtHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    handle = handle_for(c, device);
    auto it = c.plans.find(key);
    if (it == c.plans.end()) {
      c.stats.misses += 1;
      it = c.plans.emplace(key, make_plan(handle, key)).first;
    } else {
      c.stats.hits += 1;
    }
    c.stats.entries = static_cast<std::int64_t>(c.plans.size());
    plan = it->second;
  }
  if (!plan.found) return false;

  // alpha = 1, beta = 0 in the scale type.
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const float16 one_h(1.0f), zero_h(0.0f);
  const void* alpha = scale == CUDA_R_64F   ? static_cast<const void*>(&one_d)
                      : scale == CUDA_R_16F ? static_cast<const void*>(&one_h)
                                            : static_cast<const void*>(&one_f);
  const void* beta = scale == CUDA_R_64F   ? static_cast<const void*>(&zero_d)
                     : scale == CUDA_R_16F ? static_cast<const void*>(&zero_h)
                                           : static_cast<const void*>(&zero_f);
  void* workspace = nullptr;
  const Device dev = Device::cuda(device);
  if (plan.workspace > 0) workspace = allocate(dev, plan.workspace);
  const cublasStatus_t status =
      cublasLtMatmul(handle, plan.op, alpha, ob.ptr, plan.a, oa.ptr, plan.b, beta, out.data_ptr(),
                     plan.d, out.data_ptr(), plan.d, &plan.algo, workspace, plan.workspace, stream);
  // Stream-ordered: the next user of the workspace block on this stream runs after the matmul.
  if (workspace != nullptr) deallocate(dev, workspace, plan.workspace);
  check_lt(status, "cublasLtMatmul");
  return true;
}

}  // namespace

namespace detail {

MatrixLayout classify_matrix(std::int64_t rows, std::int64_t cols, std::int64_t sr,
                             std::int64_t sc) {
  MatrixLayout m;
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= cols)) {
    m.kind = MatrixKind::row_major;
    m.rows = rows, m.cols = cols, m.ld = rows == 1 ? cols : sr;
  } else if ((rows == 1 || sr == 1) && (cols == 1 || sc >= rows)) {
    m.kind = MatrixKind::transposed;  // x = S^T with S (cols, rows) row-major, row stride sc
    m.rows = cols, m.cols = rows, m.ld = cols == 1 ? rows : sc;
  } else {
    m.kind = MatrixKind::copy;
    m.rows = rows, m.cols = cols, m.ld = cols;
  }
  m.ld = std::max<std::int64_t>(m.ld, 1);
  return m;
}

std::int64_t single_batch_stride(const std::vector<std::int64_t>& extents,
                                 const std::vector<std::int64_t>& strides, const Shape& batch) {
  std::int64_t stride = -1, span = 1;  // span: the batch positions the inner axes cover
  for (int i = batch.rank() - 1; i >= 0; --i) {
    const std::int64_t extent = batch[i];
    if (extent == 1) continue;
    const auto u = static_cast<std::size_t>(i);
    const std::int64_t s = extents[u] == 1 ? 0 : strides[u];
    if (stride == -1) {
      stride = s;
    } else if (s != stride * span) {
      return -1;
    }
    span *= extent;
  }
  return stride == -1 ? 0 : stride;
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype,
              Accumulation accumulation) {
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
  data_type(dtype);  // throws for non-floating dtypes
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
  const int r = a.rank();
  const std::int64_t m = ta == Transpose::no ? a.shape()[r - 2] : a.shape()[r - 1];
  const std::int64_t k = ta == Transpose::no ? a.shape()[r - 1] : a.shape()[r - 2];
  const std::int64_t kb = tb == Transpose::no ? b.shape()[r - 2] : b.shape()[r - 1];
  const std::int64_t n = tb == Transpose::no ? b.shape()[r - 1] : b.shape()[r - 2];
  if (k != kb) {
    throw ShapeError("cuda::matmul: inner dimensions do not match: " + a.shape().to_string() +
                     " x " + b.shape().to_string());
  }
  std::vector<std::int64_t> dims;
  for (int i = 0; i < r - 2; ++i) {
    const std::int64_t da = a.shape()[i], db = b.shape()[i];
    if (da != db && da != 1 && db != 1) {
      throw ShapeError("cuda::matmul: batch dimensions do not broadcast: " + a.shape().to_string() +
                       " x " + b.shape().to_string());
    }
    dims.push_back(da == 1 ? db : da);
  }
  const Shape batch(dims);
  dims.push_back(m);
  dims.push_back(n);
  Tensor out = core::make_tensor(Shape(dims), out_dtype, a.device());
  if (out.numel() == 0) return out;
  if (k == 0) {  // an empty sum: zeros
    fill(out, 0.0);
    return out;
  }
  const std::int64_t batch_count = batch.numel();
  if (batch_count > std::numeric_limits<std::int32_t>::max() ||
      std::max({m, n, k}) > std::numeric_limits<std::int32_t>::max()) {
    throw ShapeError("cuda::matmul: extents and batch count must fit in 32 bits, got " +
                     a.shape().to_string() + " x " + b.shape().to_string());
  }
  StreamScope scope(a.device());
  for (bool materialise : {false, true}) {
    const Operand oa = describe(a, ta, batch, materialise);
    const Operand ob = describe(b, tb, batch, materialise);
    if (run(oa, ob, m, n, k, batch_count, dtype, out_dtype, accumulation, out, scope.index(),
            scope.stream()))
      return out;
    // No algorithm: retry once with broadcast batches copied out (stride-0 batches are the one
    // layout feature cuBLASLt may refuse); a second refusal is an error.
    if (materialise || (oa.batch_stride != 0 && ob.batch_stride != 0) || batch_count == 1) break;
  }
  throw DeviceError("cuda::matmul: cuBLASLt found no algorithm for " + a.shape().to_string() +
                    " x " + b.shape().to_string() + " (" + std::string(dtype_name(dtype)) +
                    "); please report this shape");
}

Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb) {
  return matmul(a, b, ta, tb, a.dtype());
}

MatmulCacheStats matmul_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

}  // namespace mixprec::cuda
