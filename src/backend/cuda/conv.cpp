// CUDA convolution on cuDNN: descriptor/algorithm cache and the three passes. See conv.h; the
// host-side decisions (plan keys, fallbacks, screening of cuDNN's results) are in
// conv_decisions.cpp.
#include "backend/cuda/conv.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/binary.h"
#include "backend/cuda/cast.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/host_waits.h"
#include "core/tensor_impl.h"
#include "mixprec/cuda.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

#if defined(MIXPREC_HAVE_CUDNN)
#include "backend/cuda/cudnn_handle.h"
#endif

namespace mixprec::cuda {

namespace {

using detail::ConvPass;
using detail::ConvPlanKey;

std::mutex& stats_mutex() {
  static std::mutex m;
  return m;
}
ConvCacheStats& stats() {
  static ConvCacheStats s;
  return s;
}

}  // namespace

#if defined(MIXPREC_HAVE_CUDNN)

namespace {

Shape x_shape(const ConvGeometry& g) { return Shape{g.batch, g.in_h, g.in_w, g.in_channels}; }
Shape y_shape(const ConvGeometry& g) { return Shape{g.batch, g.out_h, g.out_w, g.out_channels}; }
Shape filters_shape(const ConvGeometry& g) {
  return Shape{g.kernel_h, g.kernel_w, g.in_per_group(), g.out_channels};
}

void check_operand(const char* what, const Tensor& t, const Shape& expected, DType dtype,
                   Device device) {
  if (!t.defined() || t.shape() != expected || t.dtype() != dtype || !(t.device() == device) ||
      !is_floating(dtype)) {
    throw Error(std::string("cuda::conv2d: ") + what + " must be a " + device.to_string() + " " +
                std::string(dtype_name(dtype)) + " tensor of shape " + expected.to_string() +
                ", got " +
                (t.defined() ? std::string(dtype_name(t.dtype())) + " " + t.shape().to_string() +
                                   " on " + t.device().to_string()
                             : std::string("an undefined tensor")));
  }
}

// cuDNN's legacy API takes int sizes and indexes with 32 bits: larger tensors are refused.
void check_int_range(const Shape& shape) {
  if (shape.numel() > std::numeric_limits<int>::max()) {
    throw ValueError("conv2d on CUDA: a tensor of shape " + shape.to_string() +
                     " has more than 2^31 - 1 elements, more than cuDNN's convolution takes; use "
                     "a smaller batch");
  }
}

// x (N, H, W, C) contiguous, zero-padded by extra_bottom rows and extra_right columns when the
// symmetric cuDNN padding needs them (conv.h, CudnnPadding).
Tensor cudnn_input(const Tensor& x, const detail::CudnnPadding& p) {
  const Tensor xc = contiguous(x.detach());
  if (p.extra_bottom == 0 && p.extra_right == 0) return xc;
  {
    std::lock_guard<std::mutex> s(stats_mutex());
    stats().padded_inputs += 1;
  }
  Tensor padded =
      full(Shape{x.dim(0), x.dim(1) + p.extra_bottom, x.dim(2) + p.extra_right, x.dim(3)}, 0.0,
           x.dtype(), x.device());
  copy_strided(xc, padded.slice(1, 0, x.dim(1)).slice(2, 0, x.dim(2)));
  return padded;
}

// Keras stores filters HWIO: (KH, KW, Cin / G, Cout), Cout innermost. cuDNN's NHWC filter format
// is KRSC: (Cout, KH, KW, Cin / G) with the input channel innermost and the output channel
// outermost. HWIO -> KRSC is the permutation (3, 0, 1, 2), copied contiguous here (a transpose of
// KH * KW * Cin/G * Cout elements: tiny next to the convolution); the filter gradient comes back
// in KRSC and goes home with the inverse permutation (1, 2, 3, 0).
Tensor to_krsc(const Tensor& hwio) {
  {
    std::lock_guard<std::mutex> s(stats_mutex());
    stats().krsc_filters += 1;
  }
  return contiguous(hwio.detach().permute({3, 0, 1, 2}));
}
Tensor to_hwio(const Tensor& krsc) { return contiguous(krsc.permute({1, 2, 3, 0})); }

bool tf32_allowed() { return tensor_float_32_execution_enabled(); }

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return CUDNN_DATA_FLOAT;
    case DType::float16: return CUDNN_DATA_HALF;
    case DType::bfloat16: return CUDNN_DATA_BFLOAT16;
    case DType::float64: return CUDNN_DATA_DOUBLE;
    default:
      throw DTypeError("conv2d on CUDA does not support dtype " + std::string(dtype_name(dtype)) +
                       "; supported: float32, float16, bfloat16, float64");
  }
}

cudnnDataType_t compute_type(detail::ConvCompute c) {
  switch (c) {
    case detail::ConvCompute::float16: return CUDNN_DATA_HALF;
    case detail::ConvCompute::float64: return CUDNN_DATA_DOUBLE;
    case detail::ConvCompute::float32: break;
  }
  return CUDNN_DATA_FLOAT;
}

int as_int(std::int64_t v) { return static_cast<int>(v); }

// One acceptable algorithm of a key, with the math type it was ranked under and its workspace.
struct Candidate {
  int algo = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of the key's pass
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
};

// Descriptors and the acceptable algorithms of one key, best first; created once, never destroyed
// (the cache lives for the process, like the cuBLASLt plans of matmul.cpp). `first` is the first
// candidate cuDNN has not refused at execution.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t bias = nullptr;            // forward_bias: (1, Cout, 1, 1)
  cudnnActivationDescriptor_t activation = nullptr;  // forward_bias: identity
  std::vector<Candidate> candidates;
  int first = 0;
  std::string log;  // MIXPREC_CUDNN_LOG: what became of each ranked result
  bool usable() const { return first < static_cast<int>(candidates.size()); }
};

// Device buffers of the first call, for the timed search (benchmark mode).
struct Buffers {
  const void* x = nullptr;  // x, or dx for backward data (written)
  const void* w = nullptr;  // filters, or dw for backward filters (written)
  const void* y = nullptr;  // y for forward (written), else dy
};

bool benchmark_mode() {
  static const bool on = [] {
    const char* v = std::getenv("MIXPREC_CUDNN_BENCHMARK");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

cudnnMathType_t math_of(detail::ConvMath m) {
  return m == detail::ConvMath::fma ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

// One result's line in the MIXPREC_CUDNN_LOG diagnostic.
void log_result(std::string& log, int algo, cudnnMathType_t math, std::size_t memory,
                const char* verdict) {
  if (!detail::conv_log_enabled()) return;
  log += " [algo " + std::to_string(algo) + " math " + std::to_string(static_cast<int>(math)) +
         " " + std::to_string(memory >> 20) + " MiB: " + verdict + "]";
}

// The most workspace one call may take on `device` (detail::conv_workspace_limit of its memory,
// read once per device by device_info), or MIXPREC_CUDNN_WORKSPACE_MIB's when set.
std::size_t workspace_limit(int device) {
  static const std::optional<std::size_t> override_bytes =
      detail::workspace_override(std::getenv("MIXPREC_CUDNN_WORKSPACE_MIB"));
  if (override_bytes) return *override_bytes;
  return detail::conv_workspace_limit(static_cast<std::size_t>(device_info(device).total_memory));
}

// Every acceptable result, in cuDNN's order (best first): never a down-conversion, no tensor cores
// where the key says fma, within the workspace limit re-read under the math type the result was
// ranked with (FMA where the key demands it).
template <typename Perf, typename WorkspaceOf>
void choose(const std::vector<Perf>& results, int count, const ConvPlanKey& key, std::size_t limit,
            Plan& p, WorkspaceOf&& workspace_of) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[static_cast<std::size_t>(i)];
    const int algo = static_cast<int>(r.algo);
    const detail::ConvScreen screen = detail::screen_result(
        r.status == CUDNN_STATUS_SUCCESS, r.memory, limit, r.mathType == CUDNN_TENSOR_OP_MATH,
        r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, key.math);
    if (screen != detail::ConvScreen::usable) {
      log_result(p.log, algo, r.mathType, r.memory, detail::screen_name(screen));
      continue;
    }
    const cudnnMathType_t m = key.math == detail::ConvMath::fma ? CUDNN_FMA_MATH : r.mathType;
    if (cudnnSetConvolutionMathType(p.conv, m) != CUDNN_STATUS_SUCCESS) {
      log_result(p.log, algo, m, r.memory, "math type refused");
      continue;
    }
    std::size_t bytes = 0;
    if (!workspace_of(algo, bytes) || bytes > limit) {
      log_result(p.log, algo, m, bytes, "workspace under this math type");
      continue;
    }
    log_result(p.log, algo, m, bytes, "candidate");
    p.candidates.push_back(Candidate{algo, m, bytes});
  }
}

// The one candidate of a convolution fused with its bias: cudnnConvolutionBiasActivationForward
// runs the identity activation with IMPLICIT_PRECOMP_GEMM only (cuDNN's documentation).
void add_fused_candidate(cudnnHandle_t handle, const ConvPlanKey& k, cudnnDataType_t dt, int c,
                         std::size_t limit, Plan& p) {
  check_cudnn(cudnnCreateTensorDescriptor(&p.bias), "cudnnCreateTensorDescriptor(bias)");
  check_cudnn(cudnnSetTensor4dDescriptor(p.bias, CUDNN_TENSOR_NHWC, dt, 1, c, 1, 1),
              "cudnnSetTensor4dDescriptor(bias)");
  check_cudnn(cudnnCreateActivationDescriptor(&p.activation), "cudnnCreateActivationDescriptor");
  check_cudnn(cudnnSetActivationDescriptor(p.activation, CUDNN_ACTIVATION_IDENTITY,
                                           CUDNN_PROPAGATE_NAN, 0.0),
              "cudnnSetActivationDescriptor");
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  std::size_t bytes = 0;
  if (cudnnGetConvolutionForwardWorkspaceSize(handle, p.x, p.w, p.conv, p.y, algo, &bytes) ==
          CUDNN_STATUS_SUCCESS &&
      bytes <= limit) {
    p.candidates.push_back(Candidate{static_cast<int>(algo), math_of(k.math), bytes});
  }
}

// The candidates of a forward, backward-data or backward-filter pass: cuDNN's timed search
// (cudnnFind*AlgorithmEx, which runs every algorithm on `buffers` and waits for each: one host
// wait counted) or its heuristic (cudnnGet*Algorithm_v7), filtered by choose().
void search_algorithms(cudnnHandle_t handle, const ConvPlanKey& k, const Buffers& buffers,
                       bool timed, void* scratch, std::size_t scratch_bytes, std::size_t limit,
                       Plan& p) {
  int max_count = 0, returned = 0;
  if (timed) count_host_wait();
  if (k.pass == ConvPass::forward) {
    check_cudnn(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionFwdAlgoPerf_t> r(static_cast<std::size_t>(max_count));
    check_cudnn(timed ? cudnnFindConvolutionForwardAlgorithmEx(
                            handle, p.x, buffers.x, p.w, buffers.w, p.conv, p.y,
                            const_cast<void*>(buffers.y), max_count, &returned, r.data(), scratch,
                            scratch_bytes)
                      : cudnnGetConvolutionForwardAlgorithm_v7(handle, p.x, p.w, p.conv, p.y,
                                                               max_count, &returned, r.data()),
                "choosing a cuDNN forward convolution algorithm");
    choose(r, returned, k, limit, p, [&](int algo, std::size_t& bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(handle, p.x, p.w, p.conv, p.y,
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                                     &bytes) == CUDNN_STATUS_SUCCESS;
    });
  } else if (k.pass == ConvPass::backward_data) {
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(static_cast<std::size_t>(max_count));
    check_cudnn(timed ? cudnnFindConvolutionBackwardDataAlgorithmEx(
                            handle, p.w, buffers.w, p.y, buffers.y, p.conv, p.x,
                            const_cast<void*>(buffers.x), max_count, &returned, r.data(), scratch,
                            scratch_bytes)
                      : cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, p.w, p.y, p.conv, p.x,
                                                                    max_count, &returned, r.data()),
                "choosing a cuDNN backward-data convolution algorithm");
    choose(r, returned, k, limit, p, [&](int algo, std::size_t& bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
                 handle, p.w, p.y, p.conv, p.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                 &bytes) == CUDNN_STATUS_SUCCESS;
    });
  } else {
    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(static_cast<std::size_t>(max_count));
    check_cudnn(timed ? cudnnFindConvolutionBackwardFilterAlgorithmEx(
                            handle, p.x, buffers.x, p.y, buffers.y, p.conv, p.w,
                            const_cast<void*>(buffers.w), max_count, &returned, r.data(), scratch,
                            scratch_bytes)
                      : cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                            handle, p.x, p.y, p.conv, p.w, max_count, &returned, r.data()),
                "choosing a cuDNN backward-filter convolution algorithm");
    choose(r, returned, k, limit, p, [&](int algo, std::size_t& bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                 handle, p.x, p.y, p.conv, p.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
                 &bytes) == CUDNN_STATUS_SUCCESS;
    });
  }
}

// The scratch of a timed search: the largest workspace among the heuristic's results within the
// limit, so that every algorithm the limit allows can be timed, and no more (the limit itself may
// be GiBs).
std::size_t search_scratch_bytes(cudnnHandle_t handle, const ConvPlanKey& k, const Plan& p,
                                 std::size_t limit) {
  int max_count = 0, returned = 0;
  const auto largest = [&](const auto& results) {
    std::size_t most = 0;
    for (int i = 0; i < returned; ++i) {
      const auto& r = results[static_cast<std::size_t>(i)];
      if (r.status == CUDNN_STATUS_SUCCESS && r.memory <= limit && r.memory > most) most = r.memory;
    }
    return most;
  };
  const char* what = "sizing the scratch of cuDNN's timed algorithm search";
  if (k.pass == ConvPass::forward) {
    check_cudnn(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionFwdAlgoPerf_t> r(static_cast<std::size_t>(max_count));
    check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(handle, p.x, p.w, p.conv, p.y, max_count,
                                                       &returned, r.data()),
                what);
    return largest(r);
  }
  if (k.pass == ConvPass::backward_data) {
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count), "MaxCount");
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(static_cast<std::size_t>(max_count));
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, p.w, p.y, p.conv, p.x,
                                                            max_count, &returned, r.data()),
                what);
    return largest(r);
  }
  check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count), "MaxCount");
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(static_cast<std::size_t>(max_count));
  check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, p.x, p.y, p.conv, p.w,
                                                            max_count, &returned, r.data()),
              what);
  return largest(r);
}

Plan make_plan(cudnnHandle_t handle, const ConvPlanKey& k, const Buffers& buffers, Device device) {
  Plan p;
  const cudnnDataType_t dt = data_type(k.dtype);
  check_cudnn(cudnnCreateTensorDescriptor(&p.x), "cudnnCreateTensorDescriptor");
  check_cudnn(cudnnCreateTensorDescriptor(&p.y), "cudnnCreateTensorDescriptor");
  check_cudnn(cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor");
  check_cudnn(cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor");
  // NHWC activations: cudnnSetTensor4dDescriptor takes (n, c, h, w) whatever the format.
  check_cudnn(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, dt, as_int(k.batch),
                                         as_int(k.in_channels), as_int(k.in_h), as_int(k.in_w)),
              "cudnnSetTensor4dDescriptor(x)");
  // Filters (k, c, r, s) = (Cout, Cin / G, KH, KW) in the NHWC (KRSC) format: see to_krsc.
  check_cudnn(cudnnSetFilter4dDescriptor(p.w, dt, CUDNN_TENSOR_NHWC, as_int(k.out_channels),
                                         as_int(k.in_channels / k.groups), as_int(k.kernel_h),
                                         as_int(k.kernel_w)),
              "cudnnSetFilter4dDescriptor");
  check_cudnn(cudnnSetConvolution2dDescriptor(p.conv, as_int(k.pad_h), as_int(k.pad_w),
                                              as_int(k.stride_h), as_int(k.stride_w),
                                              as_int(k.dilation_h), as_int(k.dilation_w),
                                              CUDNN_CROSS_CORRELATION, compute_type(k.compute)),
              "cudnnSetConvolution2dDescriptor");
  check_cudnn(cudnnSetConvolutionGroupCount(p.conv, as_int(k.groups)),
              "cudnnSetConvolutionGroupCount");
  check_cudnn(cudnnSetConvolutionMathType(p.conv, math_of(k.math)), "cudnnSetConvolutionMathType");
  int n = 0, c = 0, h = 0, w = 0;
  check_cudnn(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w),
              "cudnnGetConvolution2dForwardOutputDim");
  // The caller allocated y (N, OH, OW, Cout) from the CPU's geometry; cuDNN must agree, or it
  // would read or write past it.
  const std::int64_t expect_h =
      (k.in_h + 2 * k.pad_h - (k.dilation_h * (k.kernel_h - 1) + 1)) / k.stride_h + 1;
  const std::int64_t expect_w =
      (k.in_w + 2 * k.pad_w - (k.dilation_w * (k.kernel_w - 1) + 1)) / k.stride_w + 1;
  if (n != k.batch || c != k.out_channels || h != expect_h || w != expect_w) {
    throw Error("conv2d on CUDA: cuDNN computes an output of (" + std::to_string(n) + ", " +
                std::to_string(h) + ", " + std::to_string(w) + ", " + std::to_string(c) +
                ") where (" + std::to_string(k.batch) + ", " + std::to_string(expect_h) + ", " +
                std::to_string(expect_w) + ", " + std::to_string(k.out_channels) +
                ") was expected (an internal geometry error)");
  }
  check_cudnn(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, dt, n, c, h, w),
              "cudnnSetTensor4dDescriptor(y)");

  // A timed search needs scratch: what its algorithms within the limit want, if the pool has it.
  const std::size_t limit = workspace_limit(k.device);
  void* scratch = nullptr;
  std::size_t scratch_bytes = 0;
  const bool timed = benchmark_mode() && buffers.x != nullptr && k.pass != ConvPass::forward_bias;
  if (timed) {
    const std::size_t wanted = search_scratch_bytes(handle, k, p, limit);
    // Out of memory: search with no workspace (other device errors still throw).
    scratch = wanted > 0 ? try_allocate(device, wanted) : nullptr;
    scratch_bytes = scratch != nullptr ? wanted : 0;
  }
  const auto release = [&] {
    if (scratch != nullptr) deallocate(device, scratch, scratch_bytes);
  };
  try {
    if (k.pass == ConvPass::forward_bias) {
      add_fused_candidate(handle, k, dt, c, limit, p);
    } else {
      search_algorithms(handle, k, buffers, timed, scratch, scratch_bytes, limit, p);
    }
  } catch (...) {
    release();
    throw;
  }
  release();
  return p;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<ConvPlanKey, Plan, detail::ConvPlanKeyHash> plans;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: descriptors live for the process
  return *c;
}

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::forward: return "forward";
    case ConvPass::backward_data: return "backward-data";
    case ConvPass::backward_filters: return "backward-filter";
    case ConvPass::forward_bias: return "forward (bias fused)";
  }
  return "";
}

// The cached plan of `key`, made on a miss.
Plan plan_for(const ConvPlanKey& key, Device device, cudnnHandle_t handle, const Buffers& buffers) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.plans.find(key);
  const bool miss = it == c.plans.end();
  if (miss) {
    it = c.plans.emplace(key, make_plan(handle, key, buffers, device)).first;
    if (detail::conv_log_enabled()) {
      const ConvPlanKey& k = key;
      std::fprintf(stderr,
                   "mixprec cudnn plan: %s %s %s x (%lld, %lld, %lld, %lld) -> %lld, kernel "
                   "%lldx%lld stride %lld pad %lld,%lld groups %lld, workspace limit %llu MiB:%s\n",
                   pass_name(k.pass), std::string(dtype_name(k.dtype)).c_str(),
                   k.math == detail::ConvMath::fma ? "fma" : "tensor-op",
                   static_cast<long long>(k.batch), static_cast<long long>(k.in_h),
                   static_cast<long long>(k.in_w), static_cast<long long>(k.in_channels),
                   static_cast<long long>(k.out_channels), static_cast<long long>(k.kernel_h),
                   static_cast<long long>(k.kernel_w), static_cast<long long>(k.stride_h),
                   static_cast<long long>(k.pad_h), static_cast<long long>(k.pad_w),
                   static_cast<long long>(k.groups),
                   static_cast<unsigned long long>(workspace_limit(k.device) >> 20),
                   it->second.log.empty() ? " (one fixed candidate)" : it->second.log.c_str());
    }
  }
  std::lock_guard<std::mutex> s(stats_mutex());
  (miss ? stats().misses : stats().hits) += 1;
  stats().entries = static_cast<std::int64_t>(c.plans.size());
  return it->second;
}

// Records that cuDNN refused the candidates of `key` before `next` at execution: later calls
// start at `next` (and go straight to the fallback when none is left).
void mark_refused(const ConvPlanKey& key, int next, int refused) {
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.plans.find(key);
    if (it != c.plans.end() && it->second.first < next) it->second.first = next;
  }
  std::lock_guard<std::mutex> s(stats_mutex());
  stats().refusals += refused;
}

// Device pointers of one pass: the padded input (dx for backward data), the KRSC filters (dw for
// backward filters), the output (dy for the backward passes) and the bias (forward_bias).
struct Operands {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* y = nullptr;
  const void* bias = nullptr;
};

// Runs one candidate of a planned pass; returns cuDNN's status, or detail::kWorkspaceUnavailable
// when the device has no memory left for the candidate's workspace.
int execute(const Plan& plan, const Candidate& cand, const ConvPlanKey& key, Device device,
            cudnnHandle_t handle, const Operands& o) {
  // alpha = 1, beta = 0: float for every data type but double (cuDNN's scaling-parameter rule).
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool dbl = key.dtype == DType::float64;
  const void* one = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* zero = dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  // The descriptor is shared by the key's candidates: set the one this candidate was ranked with.
  cudnnStatus_t status = cudnnSetConvolutionMathType(plan.conv, cand.math);
  if (status != CUDNN_STATUS_SUCCESS) return static_cast<int>(status);
  void* workspace = nullptr;
  if (cand.workspace > 0) {
    workspace = try_allocate(device, cand.workspace);
    if (workspace == nullptr) return detail::kWorkspaceUnavailable;
  }
  void* x = const_cast<void*>(o.x);
  void* w = const_cast<void*>(o.w);
  void* y = const_cast<void*>(o.y);
  switch (key.pass) {
    case ConvPass::forward:
      status = cudnnConvolutionForward(handle, one, plan.x, x, plan.w, w, plan.conv,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(cand.algo), workspace,
                                       cand.workspace, zero, plan.y, y);
      break;
    case ConvPass::forward_bias:
      // y = identity(1 * conv(x) + 0 * z + bias), the sum formed in the float32 compute type and
      // rounded once to y's type; z aliases y (alpha2 = 0: not read for its value).
      status = cudnnConvolutionBiasActivationForward(
          handle, one, plan.x, x, plan.w, w, plan.conv,
          static_cast<cudnnConvolutionFwdAlgo_t>(cand.algo), workspace, cand.workspace, zero,
          plan.y, y, plan.bias, o.bias, plan.activation, plan.y, y);
      break;
    case ConvPass::backward_data:
      status = cudnnConvolutionBackwardData(handle, one, plan.w, w, plan.y, y, plan.conv,
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(cand.algo),
                                            workspace, cand.workspace, zero, plan.x, x);
      break;
    case ConvPass::backward_filters:
      status =
          cudnnConvolutionBackwardFilter(handle, one, plan.x, x, plan.y, y, plan.conv,
                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(cand.algo),
                                         workspace, cand.workspace, zero, plan.w, w);
      break;
  }
  // Stream-ordered: the next user of the workspace block on this stream runs after the call.
  if (workspace != nullptr) deallocate(device, workspace, cand.workspace);
  return static_cast<int>(status);
}

// Every candidate left was passed over for want of workspace memory: the out-of-memory error,
// naming the smallest workspace asked for.
[[noreturn]] void throw_workspace_out_of_memory(const ConvPlanKey& key, const Plan& plan,
                                                Device device) {
  std::size_t smallest = 0;
  for (const Candidate& c : plan.candidates) {
    if (c.workspace > 0 && (smallest == 0 || c.workspace < smallest)) smallest = c.workspace;
  }
  throw DeviceError("CUDA out of memory: no cuDNN " + std::string(pass_name(key.pass)) +
                    " algorithm for this convolution found its workspace (the smallest asked " +
                    format_bytes(static_cast<std::int64_t>(smallest)) + ") on " +
                    device.to_string() +
                    "; try a smaller --batch-size, or a lower MIXPREC_CUDNN_WORKSPACE_MIB");
}

[[noreturn]] void throw_no_algorithm(const ConvPlanKey& key) {
  throw DeviceError(std::string("conv2d on CUDA: cuDNN offers no ") + pass_name(key.pass) +
                    " algorithm for " + std::string(dtype_name(key.dtype)) + " input (" +
                    std::to_string(key.batch) + ", " + std::to_string(key.in_h) + ", " +
                    std::to_string(key.in_w) + ", " + std::to_string(key.in_channels) + ") with " +
                    std::to_string(key.out_channels) + " filters of " +
                    std::to_string(key.kernel_h) + "x" + std::to_string(key.kernel_w) +
                    " within a " + format_bytes(workspace_limit(key.device)) +
                    " workspace that it does not refuse; run this layer on the CPU or change its "
                    "shape");
}

// Runs `key`'s candidates until one is not refused (detail::run_candidates). Returns false when
// every candidate is refused or none was offered (the caller's fallback, detail::when_exhausted);
// a status outside the NOT_SUPPORTED category throws.
bool try_key(const ConvPlanKey& key, Device device, cudnnHandle_t handle, const Operands& o) {
  const Plan plan = plan_for(key, device, handle, Buffers{o.x, o.w, o.y});
  if (!plan.usable()) return false;
  const detail::CandidateRun r = detail::run_candidates(
      static_cast<int>(plan.candidates.size()), plan.first,
      [&](int i) {
        return execute(plan, plan.candidates[static_cast<std::size_t>(i)], key, device, handle, o);
      },
      detail::refusal_rule(key.pass));
  // Every candidate left was short of memory: the out-of-memory error, the plan unchanged (after
  // memory is freed the same call can succeed).
  if (r.ran < 0 && r.short_of_memory > 0) throw_workspace_out_of_memory(key, plan, device);
  if (r.refused + r.short_of_memory > 0) mark_refused(key, r.next, r.refused);
  if (r.ran < 0) return false;
  check_cudnn(static_cast<cudnnStatus_t>(r.status),
              std::string("cuDNN convolution ") + pass_name(key.pass));
  return true;
}

// Runs one pass without a bias (forward, backward data, backward filters): the key, else its
// float32-accumulating fallback for a 16-bit-accumulating key, else DeviceError.
void run(const ConvPlanKey& key, Device device, cudnnHandle_t handle, const Operands& o) {
  if (try_key(key, device, handle, o)) return;
  if (detail::when_exhausted(key) == detail::WhenExhausted::accumulate_in_float32) {
    // cuDNN's float16-accumulating (TRUE_HALF) configuration has few NHWC kernels; where it has
    // none for a shape, accumulate in float32 instead (as bfloat16 always does) rather than fail.
    const ConvPlanKey wide = detail::fallback_key(key);
    if (try_key(wide, device, handle, o)) return;
    throw_no_algorithm(wide);
  }
  throw_no_algorithm(key);
}

// True when the convolution has no products to sum (an empty reduction): the caller fills zeros.
bool no_products(const ConvGeometry& g) {
  return g.batch == 0 || g.in_channels == 0 || g.out_channels == 0 || g.out_h == 0 || g.out_w == 0;
}

Shape padded_x_shape(const ConvGeometry& g) {
  const detail::CudnnPadding pad = detail::cudnn_padding(g);
  return Shape{g.batch, g.in_h + pad.extra_bottom, g.in_w + pad.extra_right, g.in_channels};
}
Shape krsc_shape(const ConvGeometry& g) {
  return Shape{g.out_channels, g.kernel_h, g.kernel_w, g.in_per_group()};
}

// A prepared operand handed back by the op layer: contiguous, of the expected shape, dtype and
// device (else an internal error).
void check_prepared(const char* what, const Tensor& t, const Shape& expected, DType dtype,
                    Device device) {
  check_operand(what, t, expected, dtype, device);
  if (!t.is_contiguous()) {
    throw Error(std::string("cuda::conv2d: the prepared ") + what + " must be contiguous");
  }
}

// The float32-output path of a biased 16-bit forward: the padded input and the KRSC filters
// widened to float32 (exact), convolved in float32 (TF32 tensor cores are exact on these values),
// the bias added in float32, rounded once to the data type.
Tensor forward_bias_in_float32(const Tensor& xin, const Tensor& w, const Tensor& bias,
                               const ConvGeometry& g, const ConvPlanKey& key, Device device,
                               cudnnHandle_t handle) {
  const ConvPlanKey wide_key = detail::fallback_key(key);
  const Tensor x32 = cuda::cast(xin, DType::float32);
  const Tensor w32 = cuda::cast(w, DType::float32);
  Tensor y32 = core::make_tensor(y_shape(g), DType::float32, device);
  run(wide_key, device, handle, Operands{x32.data_ptr(), w32.data_ptr(), y32.data_ptr()});
  y32 = cuda::binary(BinaryOp::add, y32, cuda::cast(bias.detach(), DType::float32));
  {
    std::lock_guard<std::mutex> s(stats_mutex());
    stats().float32_bias_paths += 1;
  }
  return cuda::cast(y32, key.dtype);
}

}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                      const ConvGeometry& g, Accumulation accumulation, ConvPrepared* prepared) {
  const DType dtype = x.dtype();
  const Device device = x.device();
  check_operand("x", x, x_shape(g), dtype, device);
  check_operand("filters", filters, filters_shape(g), dtype, device);
  if (bias.defined()) check_operand("bias", bias, Shape{g.out_channels}, dtype, device);
  const detail::ConvBias bias_route = detail::conv_bias(dtype, accumulation, bias.defined());
  Tensor y;
  if (no_products(g)) {
    y = full(y_shape(g), 0.0, dtype, device);
  } else {
    const detail::CudnnPadding pad = detail::cudnn_padding(g);
    check_int_range(padded_x_shape(g));
    check_int_range(y_shape(g));
    StreamScope scope(device);
    const cudnnHandle_t handle = cudnn_handle(scope.index());
    const Tensor xin = cudnn_input(x, pad);
    const Tensor w = to_krsc(filters);
    if (prepared != nullptr) *prepared = ConvPrepared{xin, w};
    if (bias_route == detail::ConvBias::fused) {
      const ConvPlanKey key = detail::make_plan_key(scope.index(), ConvPass::forward_bias, g, dtype,
                                                    accumulation, tf32_allowed());
      y = core::make_tensor(y_shape(g), dtype, device);
      const Tensor b = contiguous(bias.detach());
      if (try_key(key, device, handle,
                  Operands{xin.data_ptr(), w.data_ptr(), y.data_ptr(), b.data_ptr()})) {
        return y;
      }
      return forward_bias_in_float32(xin, w, b, g, key, device, handle);
    }
    y = core::make_tensor(y_shape(g), dtype, device);
    run(detail::make_plan_key(scope.index(), ConvPass::forward, g, dtype, accumulation,
                              tf32_allowed()),
        device, handle, Operands{xin.data_ptr(), w.data_ptr(), y.data_ptr()});
  }
  // float32 / float64 (one rounding either way) and 16-bit accumulation: a separate broadcast
  // add. A 16-bit result with float32 accumulation never gets here (ConvBias::fused).
  if (bias.defined() && y.numel() > 0) y = add(y, bias.detach());
  return y;
}

Tensor conv2d_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g,
                            Accumulation accumulation, const Tensor& krsc) {
  const DType dtype = dy.dtype();
  const Device device = dy.device();
  check_operand("dy", dy, y_shape(g), dtype, device);
  if (krsc.defined()) {
    check_prepared("KRSC filters", krsc, krsc_shape(g), dtype, device);
  } else {
    check_operand("filters", filters, filters_shape(g), dtype, device);
  }
  if (no_products(g)) return full(x_shape(g), 0.0, dtype, device);
  const detail::CudnnPadding pad = detail::cudnn_padding(g);
  const Shape padded = padded_x_shape(g);
  check_int_range(padded);
  check_int_range(y_shape(g));
  StreamScope scope(device);
  const cudnnHandle_t handle = cudnn_handle(scope.index());
  const Tensor dyc = contiguous(dy.detach());
  const Tensor w = krsc.defined() ? krsc : to_krsc(filters);
  Tensor dx = core::make_tensor(padded, dtype, device);
  run(detail::make_plan_key(scope.index(), ConvPass::backward_data, g, dtype, accumulation,
                            tf32_allowed()),
      device, handle, Operands{dx.data_ptr(), w.data_ptr(), dyc.data_ptr()});
  if (pad.extra_bottom == 0 && pad.extra_right == 0) return dx;
  // The explicitly padded rows/columns are not inputs: their gradient is dropped.
  return contiguous(dx.slice(1, 0, g.in_h).slice(2, 0, g.in_w));
}

Tensor conv2d_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g,
                               Accumulation accumulation, const Tensor& prepared_input) {
  const DType dtype = dy.dtype();
  const Device device = dy.device();
  if (prepared_input.defined()) {
    check_prepared("padded input", prepared_input, padded_x_shape(g), dtype, device);
  } else {
    check_operand("x", x, x_shape(g), dtype, device);
  }
  check_operand("dy", dy, y_shape(g), dtype, device);
  if (no_products(g)) return full(filters_shape(g), 0.0, dtype, device);
  const detail::CudnnPadding pad = detail::cudnn_padding(g);
  check_int_range(padded_x_shape(g));
  check_int_range(y_shape(g));
  StreamScope scope(device);
  const cudnnHandle_t handle = cudnn_handle(scope.index());
  const Tensor xin = prepared_input.defined() ? prepared_input : cudnn_input(x, pad);
  const Tensor dyc = contiguous(dy.detach());
  Tensor dw = core::make_tensor(krsc_shape(g), dtype, device);
  run(detail::make_plan_key(scope.index(), ConvPass::backward_filters, g, dtype, accumulation,
                            tf32_allowed()),
      device, handle, Operands{xin.data_ptr(), dw.data_ptr(), dyc.data_ptr()});
  return to_hwio(dw);
}

#else  // no cuDNN in this build

namespace {
[[noreturn]] void no_cudnn(const Tensor& t) {
  throw DeviceError("conv2d on " + t.device().to_string() +
                    ": this build of mixprec found no cuDNN (cudnn.h and libcudnn); install "
                    "cuDNN 9 next to the CUDA toolkit and reconfigure, or run on the CPU");
}
}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor&, const Tensor&, const ConvGeometry&,
                      Accumulation, ConvPrepared*) {
  no_cudnn(x);
}
Tensor conv2d_backward_data(const Tensor& dy, const Tensor&, const ConvGeometry&, Accumulation,
                            const Tensor&) {
  no_cudnn(dy);
}
Tensor conv2d_backward_filters(const Tensor&, const Tensor& dy, const ConvGeometry&, Accumulation,
                               const Tensor&) {
  no_cudnn(dy);
}

#endif  // MIXPREC_HAVE_CUDNN

ConvCacheStats conv_cache_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex());
  return stats();
}

}  // namespace mixprec::cuda
