#include "backend/cuda/matmul.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/binary.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/unary.h"
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

using Key = detail::PlanKey;
using KeyHash = detail::PlanKeyHash;

// The epilogue of one call: the cuBLASLt epilogue and its pointers (bias or bias gradient, aux).
struct EpilogueCall {
  int epilogue = 0;  // 0: none
  const void* bias = nullptr;
  void* aux = nullptr;
  std::int64_t ld_aux = 0;
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

// The operation descriptor of `key` with the epilogue's pointers set (they are per call; the
// heuristic reads only their alignments, which are part of the key).
cublasLtMatmulDesc_t make_desc(const Key& key, const EpilogueCall& ep) {
  cublasLtMatmulDesc_t op = nullptr;
  check_lt(cublasLtMatmulDescCreate(&op, static_cast<cublasComputeType_t>(key.compute),
                                    static_cast<cudaDataType_t>(key.scale)),
           "cublasLtMatmulDescCreate");
  const auto op_a = static_cast<cublasOperation_t>(key.op_a);
  const auto op_b = static_cast<cublasOperation_t>(key.op_b);
  try {
    check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
             "cublasLtMatmulDescSetAttribute(TRANSA)");
    check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
             "cublasLtMatmulDescSetAttribute(TRANSB)");
    if (key.epilogue != 0) {
      const auto epilogue = static_cast<cublasLtEpilogue_t>(key.epilogue);
      check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof(epilogue)),
               "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    }
    if (ep.bias != nullptr) {
      // The bias (and the bias gradient) has D's type, cuBLASLt's default for these epilogues.
      check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep.bias,
                                              sizeof(ep.bias)),
               "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    }
    if (ep.aux != nullptr) {
      check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                              &ep.aux, sizeof(ep.aux)),
               "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
      check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ep.ld_aux,
                                              sizeof(ep.ld_aux)),
               "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)");
    }
  } catch (...) {
    cublasLtMatmulDescDestroy(op);
    throw;
  }
  return op;
}

Plan make_plan(cublasLtHandle_t handle, const Key& key, const EpilogueCall& ep) {
  Plan p;
  p.op = make_desc(key, ep);
  const auto ab = static_cast<cudaDataType_t>(key.type_ab);
  // Stored shapes (column-major rows x cols): A is (m, k) or, transposed, (k, m); likewise B.
  const bool ta = key.op_a == CUBLAS_OP_T, tb = key.op_b == CUBLAS_OP_T;
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

// Runs the product for one pair of described operands (with `ep`'s epilogue, if any); false when
// cuBLASLt has no algorithm, or refuses the epilogue at launch (CUBLAS_STATUS_NOT_SUPPORTED).
bool run(const Operand& oa, const Operand& ob, std::int64_t m_rows, std::int64_t n_cols,
         std::int64_t k_inner, std::int64_t batch, DType dtype, DType out_dtype,
         Accumulation accumulation, Tensor& out, int device, cudaStream_t stream,
         const EpilogueCall& ep = {}) {
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
  key.epilogue = ep.epilogue;
  key.align_bias = ep.bias != nullptr ? alignment_of(ep.bias) : 0;
  key.align_aux = ep.aux != nullptr ? alignment_of(ep.aux) : 0;
  key.ld_aux = ep.ld_aux;

  Cache& c = cache();
  Plan plan;
  cublasLtHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    handle = handle_for(c, device);
    auto it = c.plans.find(key);
    if (it == c.plans.end()) {
      c.stats.misses += 1;
      it = c.plans.emplace(key, make_plan(handle, key, ep)).first;
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
  // An epilogue's pointers change from call to call, and a cached descriptor is shared by every
  // thread: each such call gets its own descriptor with the same attributes (a host-side object;
  // cublasLtMatmul reads it when it enqueues, so it is destroyed right after).
  cublasLtMatmulDesc_t op = plan.op;
  if (ep.epilogue != 0) {
    try {
      op = make_desc(key, ep);
    } catch (...) {
      if (workspace != nullptr) deallocate(dev, workspace, plan.workspace);
      throw;
    }
  }
  const cublasStatus_t status =
      cublasLtMatmul(handle, op, alpha, ob.ptr, plan.a, oa.ptr, plan.b, beta, out.data_ptr(),
                     plan.d, out.data_ptr(), plan.d, &plan.algo, workspace, plan.workspace, stream);
  if (op != plan.op) cublasLtMatmulDescDestroy(op);
  // Stream-ordered: the next user of the workspace block on this stream runs after the matmul.
  if (workspace != nullptr) deallocate(dev, workspace, plan.workspace);
  // An epilogue the heuristic accepted but the launch refuses: the caller's unfused path. The
  // cached plan is marked not found, so later calls of this key go there without a failed launch.
  if (ep.epilogue != 0 && status == CUBLAS_STATUS_NOT_SUPPORTED) {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.plans.at(key).found = false;
    return false;
  }
  check_lt(status, "cublasLtMatmul");
  return true;
}

}  // namespace

namespace {

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
}

std::atomic<detail::EpilogueMode> epilogue_mode{detail::EpilogueMode::fused};

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

std::size_t PlanKeyHash::operator()(const PlanKey& k) const {
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
                         std::int64_t{k.align_d},
                         std::int64_t{k.epilogue},
                         std::int64_t{k.align_bias},
                         std::int64_t{k.align_aux},
                         k.ld_aux})
    mix(v);
  return h;
}

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

std::int64_t gelu_aux_ld(std::int64_t n) { return std::max<std::int64_t>(8, (n + 7) / 8 * 8); }

void set_epilogue_mode(EpilogueMode mode) { epilogue_mode.store(mode); }

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype,
              Accumulation accumulation) {
  check_operands(a, b, out_dtype, accumulation);
  const DType dtype = a.dtype();
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

bool epilogue_adds_bias(Epilogue epilogue) {
  return epilogue == Epilogue::bias || epilogue == Epilogue::relu_bias ||
         epilogue == Epilogue::gelu_tanh_bias || epilogue == Epilogue::gelu_tanh_aux_bias;
}

bool epilogue_keeps_aux(Epilogue epilogue) {
  return epilogue == Epilogue::gelu_tanh_aux_bias || epilogue == Epilogue::gelu_tanh_aux;
}

namespace {

UnaryOp epilogue_activation(Epilogue epilogue, bool* has_activation) {
  *has_activation = true;
  switch (epilogue) {
    case Epilogue::relu_bias:
    case Epilogue::relu: return UnaryOp::relu;
    case Epilogue::gelu_tanh_bias:
    case Epilogue::gelu_tanh_aux_bias:
    case Epilogue::gelu_tanh:
    case Epilogue::gelu_tanh_aux: return UnaryOp::gelu_tanh;
    default: *has_activation = false; return UnaryOp::relu;
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
  bool has_activation = false;
  const UnaryOp op = epilogue_activation(epilogue, &has_activation);
  const Tensor y = has_activation ? cuda::unary(op, z) : z;
  r.out = y.dtype() == out_dtype ? y : cuda::cast(y, out_dtype);
  if (epilogue_keeps_aux(epilogue)) r.aux = z.dtype() == out_dtype ? z : cuda::cast(z, out_dtype);
  if (epilogue == Epilogue::bias_grad) {
    // op(B) (K, N): the sum over K is axis 0 of a stored (K, N) B, axis 1 of a stored (N, K) one,
    // accumulated in float32 and rounded once to out_dtype (B widened first when out_dtype is
    // float32, as cuBLASLt's sums are).
    const bool stored_kn = tb == Transpose::no;
    const Tensor src = b.dtype() == out_dtype ? b : cuda::cast(b, out_dtype);
    const Tensor sums = cuda::reduce(ReduceOp::sum, src, {stored_kn, !stored_kn});
    r.bias_grad = core::make_view(sums, Shape{sums.numel()}, {1}, 0);
  }
  return r;
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
  const DType dtype = a.dtype();
  const std::int64_t m = ta == Transpose::no ? a.dim(0) : a.dim(1);
  const std::int64_t k = ta == Transpose::no ? a.dim(1) : a.dim(0);
  const std::int64_t kb = tb == Transpose::no ? b.dim(0) : b.dim(1);
  const std::int64_t n = tb == Transpose::no ? b.dim(1) : b.dim(0);
  if (k != kb) {
    throw ShapeError("cuda::matmul_epilogue: inner dimensions do not match: " +
                     a.shape().to_string() + " x " + b.shape().to_string());
  }
  const bool adds_bias = epilogue_adds_bias(epilogue);
  if (adds_bias && (!bias.defined() || bias.rank() != 1 || bias.dim(0) != n ||
                    bias.dtype() != out_dtype || !(bias.device() == a.device()))) {
    throw ValueError(
        "cuda::matmul_epilogue: the bias epilogue needs a bias of shape (" + std::to_string(n) +
        ",) in " + std::string(dtype_name(out_dtype)) + " on " + a.device().to_string() + ", got " +
        (bias.defined() ? std::string(dtype_name(bias.dtype())) + " " + bias.shape().to_string() +
                              " on " + bias.device().to_string()
                        : std::string("none")) +
        "; cast the bias to the result dtype first");
  }
  if (!adds_bias && bias.defined()) {
    throw ValueError(
        "cuda::matmul_epilogue: a bias was given to an epilogue that does not add one; use "
        "Epilogue::bias, relu_bias or gelu_tanh_bias (or pass no bias)");
  }
  if (epilogue == Epilogue::none)
    return {cuda::matmul(a, b, ta, tb, out_dtype), Tensor(), Tensor()};
  if (std::max({m, n, k}) > std::numeric_limits<std::int32_t>::max()) {
    throw ShapeError("cuda::matmul_epilogue: extents must fit in 32 bits, got " +
                     a.shape().to_string() + " x " + b.shape().to_string());
  }
  // Empty products (no rows, columns or inner extent) and float64 go the unfused way.
  if (epilogue_mode.load() == detail::EpilogueMode::fused && m > 0 && n > 0 && k > 0 &&
      dtype != DType::float64) {
    Tensor out = core::make_tensor(Shape{m, n}, out_dtype, a.device());
    EpilogueCall ep;
    ep.epilogue = detail::cublaslt_epilogue(epilogue);
    Tensor bias_in, aux, bias_grad;
    if (adds_bias) {
      bias_in = bias.contiguous();
      ep.bias = bias_in.data_ptr();
    }
    std::int64_t ld_aux = 0;
    if (epilogue_keeps_aux(epilogue)) {
      // Z (M, N) row-major with row stride ld_aux: cuBLASLt's column-major (N, M), ld = ld_aux.
      ld_aux = detail::gelu_aux_ld(n);
      aux = core::make_tensor(Shape{m, ld_aux}, out_dtype, a.device());
      ep.aux = aux.data_ptr();
      ep.ld_aux = ld_aux;
    }
    if (epilogue == Epilogue::bias_grad) {
      bias_grad = core::make_tensor(Shape{n}, out_dtype, a.device());
      ep.bias = bias_grad.data_ptr();
    }
    StreamScope scope(a.device());
    const Shape no_batch;
    const Operand oa = describe(a, ta, no_batch, false);
    const Operand ob = describe(b, tb, no_batch, false);
    if (run(oa, ob, m, n, k, 1, dtype, out_dtype, Accumulation::float32, out, scope.index(),
            scope.stream(), ep)) {
      EpilogueResult r;
      r.out = out;
      if (aux.defined()) r.aux = core::make_view(aux, Shape{m, n}, {ld_aux, 1}, 0);
      r.bias_grad = bias_grad;
      return r;
    }
  }
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.epilogue_fallbacks += 1;
  }
  return unfused_epilogue(a, b, ta, tb, out_dtype, epilogue, bias);
}

MatmulCacheStats matmul_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

}  // namespace mixprec::cuda
