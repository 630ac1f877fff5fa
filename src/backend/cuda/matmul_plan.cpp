// The "plan" and "launch" steps of the CUDA matmul: plan keys, the cache of cuBLASLt descriptors
// and algorithms, the per-device handles and persistent workspaces, and the one cublasLtMatmul
// call (see matmul_plan.h).
#include "backend/cuda/matmul_plan.h"

#include <string>
#include <utility>

#include "backend/cuda/allocator.h"
#include "backend/cuda/context.h"
#include "mixprec/error.h"
#include "mixprec/float16.h"

namespace mixprec::cuda::detail {

namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw DeviceError(std::string(what) + " failed: " + cublasLtGetStatusString(status));
  }
}

cublasOperation_t operation(Transpose t) { return t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N; }

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value,
              const char* what) {
  check_lt(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), what);
}

// The operation descriptor of `key` with the epilogue's pointers set (they are per call; the
// heuristic reads only their alignments, which are part of the key).
cublasLtMatmulDesc_t make_desc(const PlanKey& key, const EpilogueBinding& ep) {
  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, static_cast<cublasComputeType_t>(key.compute),
                                    static_cast<cudaDataType_t>(key.scale)),
           "cublasLtMatmulDescCreate");
  try {
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<cublasOperation_t>(key.op_a),
             "cublasLtMatmulDescSetAttribute(TRANSA)");
    set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<cublasOperation_t>(key.op_b),
             "cublasLtMatmulDescSetAttribute(TRANSB)");
    if (key.epilogue != 0 && key.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<cublasLtEpilogue_t>(key.epilogue),
               "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    }
    // The bias (and the bias gradient) has D's type, cuBLASLt's default for these epilogues.
    if (const void* bias = ep.bias_pointer(); bias != nullptr) {
      set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias,
               "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    }
    if (ep.aux != nullptr) {
      set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ep.aux,
               "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
      set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ep.ld_aux,
               "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)");
    }
  } catch (...) {
    cublasLtMatmulDescDestroy(desc);
    throw;
  }
  return desc;
}

cublasLtMatrixLayout_t make_layout(int type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                                   std::int64_t batch, std::int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&layout, static_cast<cudaDataType_t>(type),
                                      static_cast<std::uint64_t>(rows),
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

// The heuristic's best algorithm for `plan`'s descriptors within the workspace and the key's
// pointer alignments; leaves plan.has_algorithm false when there is none.
void choose_algorithm(cublasLtHandle_t handle, const PlanKey& key, Plan& plan) {
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::uint64_t workspace = kWorkspaceBytes;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d}};
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  const std::uint32_t reductions = reduction_scheme_mask(key);
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &reductions, sizeof(reductions));
  }
  for (const auto& [attribute, value] : alignments) {
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value));
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulPreferenceDestroy(pref);
    check_lt(status, "cublasLtMatmulPreferenceSetAttribute");
  }
  // The best of the heuristic's first few answers that rounds once (the mask should leave no other;
  // algorithm_rounds_once checks its answer).
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int returned = 0;
  status = cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref,
                                          kCandidates, results, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS) return;
  for (int i = 0; i < returned && i < kCandidates; ++i) {
    const cublasLtMatmulHeuristicResult_t& result = results[i];
    if (result.state == CUBLAS_STATUS_SUCCESS && algorithm_rounds_once(key, result.algo)) {
      plan.algo = result.algo;
      plan.workspace = result.workspaceSize;
      plan.has_algorithm = true;
      return;
    }
  }
}

Plan make_plan(cublasLtHandle_t handle, const PlanKey& key, const EpilogueBinding& ep) {
  Plan p;
  p.desc = make_desc(key, ep);
  // Stored shapes (column-major rows x cols): A is (m, k) or, transposed, (k, m); likewise B.
  const bool ta = key.op_a == CUBLAS_OP_T, tb = key.op_b == CUBLAS_OP_T;
  p.a = make_layout(key.type_ab, ta ? key.k : key.m, ta ? key.m : key.k, key.lda, key.batch,
                    key.stride_a);
  p.b = make_layout(key.type_ab, tb ? key.n : key.k, tb ? key.k : key.n, key.ldb, key.batch,
                    key.stride_b);
  p.d = make_layout(key.type_d, key.m, key.n, key.ldd, key.batch, key.stride_d);
  choose_algorithm(handle, key, p);
  return p;
}

// alpha = 1 and beta = 0 in the scale type (host memory: cuBLASLt reads them while enqueueing).
enum class Unit { one, zero };
const void* scalar(cudaDataType_t scale, Unit unit) {
  static const float f[2] = {1.0f, 0.0f};
  static const double d[2] = {1.0, 0.0};
  static const float16 h[2] = {float16(1.0f), float16(0.0f)};
  const int i = unit == Unit::one ? 0 : 1;
  switch (scale) {
    case CUDA_R_64F: return &d[i];
    case CUDA_R_16F: return &h[i];
    default: return &f[i];
  }
}

}  // namespace

std::uint32_t reduction_scheme_mask(const PlanKey& key) {
  const bool d16 = key.type_d == CUDA_R_16F || key.type_d == CUDA_R_16BF;
  if (!d16 || key.compute == CUBLAS_COMPUTE_16F) return CUBLASLT_REDUCTION_SCHEME_MASK;
  const bool epilogue = key.epilogue != 0 && key.epilogue != CUBLASLT_EPILOGUE_DEFAULT;
  return epilogue ? CUBLASLT_REDUCTION_SCHEME_NONE : CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
}

bool algorithm_rounds_once(const PlanKey& key, const cublasLtMatmulAlgo_t& algo) {
  std::int32_t splits = 1;
  std::uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  std::size_t written = 0;
  // An algorithm whose configuration cannot be read is left to the mask the heuristic applied.
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                           sizeof(splits), &written) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                           sizeof(scheme), &written) != CUBLAS_STATUS_SUCCESS) {
    return true;
  }
  if (splits <= 1) return true;  // one sequence per output: the scheme does not apply
  const std::uint32_t allowed = reduction_scheme_mask(key);
  return scheme != CUBLASLT_REDUCTION_SCHEME_NONE && (scheme & allowed) == scheme;
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

ComputeMode compute_mode(DType operands, Accumulation accumulation, Tf32 tf32) {
  if (operands == DType::float64) return {CUBLAS_COMPUTE_64F, CUDA_R_64F};
  if (operands == DType::float32 && tf32 == Tf32::allowed)
    return {CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F};
  if (operands == DType::float16 && accumulation == Accumulation::compute_dtype)
    return {CUBLAS_COMPUTE_16F, CUDA_R_16F};
  return {CUBLAS_COMPUTE_32F, CUDA_R_32F};  // bfloat16 has no 16-bit accumulation in cuBLASLt
}

PlanKey make_plan_key(int device, const ProductShape& shape, const OperandView& a,
                      const OperandView& b, const void* out, const ProductTypes& types, Tf32 tf32,
                      const EpilogueBinding& epilogue) {
  PlanKey key;
  key.device = device;
  // cuBLASLt's A is our B (stored), its B our A; D = C^T (N, M) with ld N.
  key.m = shape.n, key.n = shape.m, key.k = shape.k, key.batch = shape.batch.numel();
  key.op_a = operation(b.layout.op), key.op_b = operation(a.layout.op);
  key.lda = b.layout.ld, key.ldb = a.layout.ld, key.ldd = shape.n;
  key.stride_a = b.layout.batch_stride, key.stride_b = a.layout.batch_stride;
  key.stride_d = shape.m * shape.n;
  key.type_ab = data_type(types.operands);
  key.type_d = data_type(types.out);
  const ComputeMode mode = compute_mode(types.operands, types.accumulation, tf32);
  key.compute = mode.compute, key.scale = mode.scale;
  key.align_a = alignment_of(b.data), key.align_b = alignment_of(a.data);
  key.align_d = alignment_of(out);
  key.epilogue = epilogue.epilogue;
  const void* bias = epilogue.bias_pointer();
  key.align_bias = bias != nullptr ? alignment_of(bias) : 0;
  key.align_aux = epilogue.aux != nullptr ? alignment_of(epilogue.aux) : 0;
  key.ld_aux = epilogue.ld_aux;
  return key;
}

PlanCache::DeviceState& PlanCache::device_state(int device) {
  if (devices_.size() <= static_cast<std::size_t>(device))
    devices_.resize(static_cast<std::size_t>(device) + 1);
  DeviceState& state = devices_[static_cast<std::size_t>(device)];
  if (state.handle == nullptr) {
    DeviceGuard guard(device);
    check_lt(cublasLtCreate(&state.handle), "cublasLtCreate");
  }
  return state;
}

ReadyPlan PlanCache::find_or_create(const PlanKey& key, const EpilogueBinding& epilogue) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& state = device_state(key.device);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    stats_.misses += 1;
    it = plans_.emplace(key, make_plan(state.handle, key, epilogue)).first;
    stats_.entries = static_cast<std::int64_t>(plans_.size());
  } else {
    stats_.hits += 1;
  }
  ReadyPlan ready{it->second, state.handle, nullptr};
  if (ready.plan.has_algorithm && ready.plan.workspace > 0) {
    if (state.workspace == nullptr) {
      state.workspace = allocate(Device::cuda(key.device), kWorkspaceBytes);
      stats_.workspace_allocations += 1;
    }
    ready.workspace = state.workspace;
  }
  return ready;
}

void PlanCache::mark_no_algorithm(const PlanKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  plans_.at(key).has_algorithm = false;
}

void PlanCache::count_epilogue_fallback() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.epilogue_fallbacks += 1;
}

MatmulCacheStats PlanCache::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache();  // never destroyed: descriptors live for the process
  return *cache;
}

LaunchStatus launch(const PlanKey& key, const ReadyPlan& ready, const LaunchOperands& operands,
                    const EpilogueBinding& epilogue, cudaStream_t stream) {
  if (!ready.plan.has_algorithm) return LaunchStatus::no_algorithm;
  const Plan& plan = ready.plan;
  // An epilogue's pointers change from call to call, and a cached descriptor is shared by every
  // thread: each such call gets its own descriptor with the same attributes (a host-side object;
  // cublasLtMatmul reads it when it enqueues, so it is destroyed right after).
  cublasLtMatmulDesc_t desc = plan.desc;
  if (epilogue.epilogue != CUBLASLT_EPILOGUE_DEFAULT) desc = make_desc(key, epilogue);
  const auto scale = static_cast<cudaDataType_t>(key.scale);
  // cuBLASLt's A is our b, its B our a; C and D are our output.
  const cublasStatus_t status =
      cublasLtMatmul(ready.handle, desc, scalar(scale, Unit::one), operands.b, plan.a, operands.a,
                     plan.b, scalar(scale, Unit::zero), operands.out, plan.d, operands.out, plan.d,
                     &plan.algo, ready.workspace, plan.workspace, stream);
  if (desc != plan.desc) cublasLtMatmulDescDestroy(desc);
  // An epilogue the heuristic accepted but the launch refuses: the caller's unfused path. The
  // cached plan is marked, so later calls of this key go there without a failed launch.
  if (epilogue.epilogue != CUBLASLT_EPILOGUE_DEFAULT && status == CUBLAS_STATUS_NOT_SUPPORTED) {
    plan_cache().mark_no_algorithm(key);
    return LaunchStatus::no_algorithm;
  }
  check_lt(status, "cublasLtMatmul");
  return LaunchStatus::done;
}

}  // namespace mixprec::cuda::detail
