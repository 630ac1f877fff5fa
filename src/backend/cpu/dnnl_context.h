// The process-wide oneDNN CPU context: one engine (created on first use), one stream per thread on
// it (a dnnl::stream must not be used by two threads at once), the bfloat16 path switch, and the
// matmul primitives (cached by the full geometry of the call in a PrimitiveCache, like the
// convolution, pooling and batch-norm ones). Everything here is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "backend/cpu/primitive_cache.h"

namespace mixprec::cpu {

dnnl::engine& dnnl_engine();
// This thread's stream on dnnl_engine() (in-order; the CPU engine executes synchronously with the
// OpenMP runtime, stream.wait() is still called after each primitive for clarity).
dnnl::stream& dnnl_stream();

// True when oneDNN runs bfloat16 primitives natively on this CPU (AVX512_BF16 or AMX): its
// effective ISA is avx512_core_bf16 or better. Computed once.
bool cpu_has_native_bf16();

// Whether every oneDNN bfloat16 primitive (matmul, convolution, pooling, batch norm) runs natively
// in bf16 (when the CPU has it) or the op computes in float32 instead: matmul, convolution and
// pooling on exactly widened float32 copies, batch norm in its float32 reference loops, each
// rounded once. The default is `when_available`; tests and benchmarks switch to
// `convert_to_float32` to exercise and measure the fallback on a CPU that has native bf16.
enum class Bf16Path { when_available, convert_to_float32 };
// Returns the previous setting. Process-wide; not meant to be flipped while bf16 primitives run.
Bf16Path set_bf16_path(Bf16Path path);
// cpu_has_native_bf16() and the setting allows it.
bool use_native_bf16();

// The geometry of one matmul call as oneDNN sees it: src (..., M, K), weights (..., K, N),
// dst (..., M, N), all of the same rank, batch extents equal or 1 (broadcast), strides in elements.
// Transposes and leading dimensions are part of the strides.
struct MatmulGeometry {
  struct Operand {
    std::vector<std::int64_t> dims;
    std::vector<std::int64_t> strides;
    dnnl::memory::data_type data_type;
  };
  Operand src, weights, dst;
  // A float32 bias (N) added to every row of the float32 accumulator before the one rounding to
  // dst's type (oneDNN's matmul bias argument).
  bool bias = false;
};

struct MatmulPrimitive {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, dst;
  dnnl::memory::desc bias;           // a zero desc without a bias
  std::size_t scratchpad_bytes = 0;  // the caller provides the scratchpad (user mode)
  std::string implementation;        // oneDNN's name for the kernel, e.g. "brg:avx512_core"
};

// The compiled primitive for `geometry`, created on the first request and reused afterwards.
// Throws mixprec::Error naming the geometry when oneDNN cannot build it.
std::shared_ptr<const MatmulPrimitive> matmul_primitive(const MatmulGeometry& geometry);

// The matmul primitive cache (the matmul keeps reference_implementations at zero).
PrimitiveCacheStats matmul_cache_stats();
void clear_matmul_cache();

}  // namespace mixprec::cpu
