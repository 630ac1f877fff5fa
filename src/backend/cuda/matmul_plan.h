// The "plan" and "launch" steps of the CUDA matmul (matmul.h), after "describe" (matmul_layout.h):
//   plan:   make_plan_key turns the described product into cuBLASLt's view of it (our B is its A,
//           see matmul.h); PlanCache holds, per key, the descriptors and the heuristic's algorithm,
//           and per device the cuBLASLt handle and the one persistent workspace;
//   launch: launch() enqueues cublasLtMatmul with a plan, the operand pointers, alpha = 1 and
//           beta = 0 in the scale type, and the device's workspace.
// Internal to src/backend/cuda (includes cuBLASLt's header); the pure parts (compute_mode,
// make_plan_key) are exercised by tests/unit/cuda_matmul_plan_test.cpp without a GPU.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/matmul.h"
#include "backend/cuda/matmul_layout.h"

namespace mixprec::cuda::detail {

// The largest workspace the heuristic may ask for (cuBLASLt's recommendation on Hopper), and the
// size of each device's persistent workspace: every cached algorithm fits it.
inline constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

// cuBLASLt's data type of a floating dtype; throws DTypeError for any other dtype.
cudaDataType_t data_type(DType dtype);

// Whether float32 products may use TensorFloat-32 (enable_tensor_float_32_execution).
enum class Tf32 { off, allowed };

// The compute type and the scale type (of alpha and beta) of a product; see matmul.h's
// accumulation rules.
struct ComputeMode {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
};
ComputeMode compute_mode(DType operands, Accumulation accumulation, Tf32 tf32);

// The dtypes of one product: operands, result, and the accumulation asked for.
struct ProductTypes {
  DType operands = DType::float32;
  DType out = DType::float32;
  Accumulation accumulation = Accumulation::float32;
};

// One operand where cuBLASLt reads it: the data pointer and its layout (OperandCopy::none: the
// copy, if one was needed, is already made).
struct OperandView {
  const void* data = nullptr;
  OperandLayout layout;
};

// The epilogue of one call and its device pointers: the bias read by the *_BIAS epilogues, or the
// bias gradient written by BGRADA (at most one of the two; both use cuBLASLt's BIAS_POINTER), and
// the GELU pre-activation buffer with its leading dimension.
struct EpilogueBinding {
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* bias_grad = nullptr;
  void* aux = nullptr;
  std::int64_t ld_aux = 0;
  const void* bias_pointer() const { return bias != nullptr ? bias : bias_grad; }
};

// The reduction schemes (cublasLtReductionScheme_t bits; CUBLASLT_REDUCTION_SCHEME_NONE, 0, is
// always allowed) the heuristic may pick for `key`, so that a product with float32 accumulation
// rounds once to a 16-bit D (DESIGN: one rounding):
//  - float32 or float64 D, or 16-bit accumulation (CUBLAS_COMPUTE_16F): every scheme;
//  - 16-bit D with float32 accumulation, no epilogue: NONE or COMPUTE_TYPE (split-K partials kept
//    in float32 and reduced once); INPLACE and OUTPUT_TYPE keep the partial sums in D's type and
//    round each one to 16 bits;
//  - 16-bit D with float32 accumulation and an epilogue: NONE only. A split-K algorithm finishes
//    the epilogue in a separate pass over D, already rounded to 16 bits: the bias is then added
//    to the 16-bit product and the sum rounded again. The first GPU run showed exactly that for
//    bfloat16 and float16 at (37, 21) x (21, 19) and (15, 13) x (13, 11) (every failing output
//    equals round16(round16(x W) + b), reproduced on the CPU from the test's inputs), while the
//    fp16 BIAS case of the same shape, on another algorithm, rounded once.
std::uint32_t reduction_scheme_mask(const PlanKey& key);

// Whether the heuristic's `algo` may run `key`: its split-K count and reduction scheme fit
// reduction_scheme_mask (a check of the heuristic's answer; false sends an epilogue product to the
// unfused path, which rounds once).
bool algorithm_rounds_once(const PlanKey& key, const cublasLtMatmulAlgo_t& algo);

// The plan key of C = op(A) op(B) (row-major terms, `shape`) into `out` on CUDA device `device`:
// cuBLASLt computes D = C^T (N, M) = op(B)^T op(A)^T, so its A is our b and its B our a.
PlanKey make_plan_key(int device, const ProductShape& shape, const OperandView& a,
                      const OperandView& b, const void* out, const ProductTypes& types, Tf32 tf32,
                      const EpilogueBinding& epilogue);

// The cuBLASLt objects of one key: created once, shared read-only by every call of that key.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace = 0;   // bytes the algorithm needs (<= kWorkspaceBytes)
  bool has_algorithm = false;  // false: the heuristic returned none, or the launch refused it
};

// A plan with what its launch needs on the key's device: the handle and, when the algorithm needs
// one, the device's persistent workspace (kWorkspaceBytes; nullptr otherwise).
struct ReadyPlan {
  Plan plan;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// The process-wide cache of plans, handles and workspaces (never destroyed: descriptors live for
// the process). Thread-safe. Each device's workspace is allocated once, from the caching allocator
// on the first algorithm that needs one, and reused by every launch on that device: every launch
// runs on the device's one compute stream, so launches use it one after another.
class PlanCache {
 public:
  // The plan of `key` (descriptors made and the heuristic queried on the key's first call, with
  // `epilogue`'s pointer alignments, which the key holds), counted as a hit or a miss.
  ReadyPlan find_or_create(const PlanKey& key, const EpilogueBinding& epilogue);
  // Later calls of `key` find no algorithm (the launch refused the heuristic's choice).
  void mark_no_algorithm(const PlanKey& key);
  void count_epilogue_fallback();
  MatmulCacheStats stats();

 private:
  struct DeviceState {
    cublasLtHandle_t handle = nullptr;  // created on first use
    void* workspace = nullptr;          // kWorkspaceBytes, allocated on first need
  };
  DeviceState& device_state(int device);  // with mutex_ held

  std::mutex mutex_;
  std::unordered_map<PlanKey, Plan, PlanKeyHash> plans_;
  std::vector<DeviceState> devices_;
  MatmulCacheStats stats_;
};
PlanCache& plan_cache();

// Whether the product ran, or cuBLASLt has no algorithm for it (the heuristic found none, or the
// launch refused an epilogue with CUBLAS_STATUS_NOT_SUPPORTED: the key is then marked so).
enum class LaunchStatus { done, no_algorithm };

// Our product's pointers: the operands in row-major terms (a, b) and the output C.
struct LaunchOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
};

// Enqueues D = op(A) op(B) (cuBLASLt's terms: A = our b) with `ready`'s plan on `stream`; throws
// DeviceError for any cuBLASLt failure other than the refusals above.
LaunchStatus launch(const PlanKey& key, const ReadyPlan& ready, const LaunchOperands& operands,
                    const EpilogueBinding& epilogue, cudaStream_t stream);

}  // namespace mixprec::cuda::detail
