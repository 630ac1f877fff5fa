#include "backend/cpu/dnnl_context.h"

#include <oneapi/dnnl/dnnl_debug.h>

#include <atomic>
#include <sstream>

#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// Enough for every (layer, batch size, pass) of a large model; beyond it the least recently used
// primitive is dropped (oneDNN compiles a new one in about a millisecond).
constexpr std::size_t kCacheCapacity = 1024;

std::atomic<Bf16Path> g_bf16_path{Bf16Path::when_available};

// The cache key: every integer of the geometry in one flat vector (rank, dims, strides, data type
// of src, weights and dst in turn).
using Key = std::vector<std::int64_t>;

void append(Key& key, const MatmulGeometry::Operand& operand) {
  key.push_back(static_cast<std::int64_t>(operand.dims.size()));
  key.insert(key.end(), operand.dims.begin(), operand.dims.end());
  key.insert(key.end(), operand.strides.begin(), operand.strides.end());
  key.push_back(static_cast<std::int64_t>(operand.data_type));
}

std::string describe(const MatmulGeometry::Operand& operand) {
  std::ostringstream os;
  os << "dims (";
  for (std::size_t i = 0; i < operand.dims.size(); ++i) os << (i ? ", " : "") << operand.dims[i];
  os << ") strides (";
  for (std::size_t i = 0; i < operand.strides.size(); ++i) {
    os << (i ? ", " : "") << operand.strides[i];
  }
  os << ") " << dnnl_dt2str(static_cast<dnnl_data_type_t>(operand.data_type));
  return os.str();
}

dnnl::memory::desc make_desc(const MatmulGeometry::Operand& operand) {
  return dnnl::memory::desc(dnnl::memory::dims(operand.dims.begin(), operand.dims.end()),
                            operand.data_type,
                            dnnl::memory::dims(operand.strides.begin(), operand.strides.end()));
}

std::shared_ptr<const MatmulPrimitive> create(const MatmulGeometry& geometry) {
  auto result = std::make_shared<MatmulPrimitive>();
  try {
    result->src = make_desc(geometry.src);
    result->weights = make_desc(geometry.weights);
    result->dst = make_desc(geometry.dst);
    dnnl::primitive_attr attr;
    // The caller provides the scratchpad (kept per-thread scratch from the mixprec allocator, so
    // it shows up in memory_stats() and concurrent calls of one primitive never share a buffer).
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (geometry.bias) {
      // (1, ..., 1, N): broadcast over the batch axes and the rows.
      dnnl::memory::dims dims(geometry.dst.dims.size(), 1);
      dims.back() = geometry.dst.dims.back();
      dnnl::memory::dims strides(dims.size(), dims.back());
      strides.back() = 1;
      result->bias = dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
    }
    dnnl::matmul::desc desc =
        geometry.bias ? dnnl::matmul::desc(result->src, result->weights, result->bias, result->dst)
                      : dnnl::matmul::desc(result->src, result->weights, result->dst);
    dnnl::matmul::primitive_desc pd(desc, attr, dnnl_engine());
    result->scratchpad_bytes = pd.scratchpad_desc().get_size();
    result->implementation = pd.impl_info_str();
    result->primitive = dnnl::matmul(pd);
  } catch (const dnnl::error& e) {
    throw Error("matmul: oneDNN cannot create a primitive for src " + describe(geometry.src) +
                ", weights " + describe(geometry.weights) + ", dst " + describe(geometry.dst) +
                (geometry.bias ? ", float32 bias" : "") + ": " + e.what());
  }
  return result;
}

PrimitiveCache<Key, MatmulPrimitive>& cache() {
  static PrimitiveCache<Key, MatmulPrimitive> instance(kCacheCapacity);
  return instance;
}

}  // namespace

dnnl::engine& dnnl_engine() {
  // A function-local static: initialised once, thread-safely, on first use.
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

bool cpu_has_native_bf16() {
  static const bool native = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    // The ISA values are bit sets; every ISA at or above avx512_core_bf16 (AMX included)
    // contains all of its bits.
    return (isa & bf16) == bf16;
  }();
  return native;
}

Bf16Path set_bf16_path(Bf16Path path) { return g_bf16_path.exchange(path); }

bool use_native_bf16() {
  return cpu_has_native_bf16() && g_bf16_path.load() == Bf16Path::when_available;
}

std::shared_ptr<const MatmulPrimitive> matmul_primitive(const MatmulGeometry& geometry) {
  Key key;
  key.reserve(3 * (1 + 2 * geometry.src.dims.size() + 1));
  append(key, geometry.src);
  append(key, geometry.weights);
  append(key, geometry.dst);
  key.push_back(geometry.bias ? 1 : 0);
  return cache().get(key, [&] { return create(geometry); });
}

PrimitiveCacheStats matmul_cache_stats() { return cache().stats(); }

void clear_matmul_cache() { cache().clear(); }

}  // namespace mixprec::cpu
