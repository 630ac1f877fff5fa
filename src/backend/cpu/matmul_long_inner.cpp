// x^T . dy as oneDNN's inner-product backward-weights primitive (matmul_long_inner.h).
#include "backend/cpu/matmul_long_inner.h"

#include <array>
#include <memory>
#include <string>

#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/primitive_cache.h"
#include "backend/cpu/scratch.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// Below this inner extent, or above this result size, oneDNN's matmul is as fast or faster
// (bf16 K 1152, 128 x 192: 0.10 ms as a matmul against 0.12 ms here; same machine and method as
// the header's figures).
constexpr std::int64_t kLongInnerMinK = 2048;
constexpr std::int64_t kLongInnerMaxResult = std::int64_t{1} << 14;

struct LongInnerPrimitive {
  dnnl::inner_product_backward_weights primitive;
  dnnl::memory::desc src, diff_dst, diff_weights;
  std::size_t scratchpad_bytes = 0;
  std::string implementation;
};

// (K, M, N, operand type, result type)
using Key = std::array<std::int64_t, 5>;

std::shared_ptr<const LongInnerPrimitive> create(std::int64_t k, std::int64_t m, std::int64_t n,
                                                 dnnl::memory::data_type in,
                                                 dnnl::memory::data_type out) {
  using tag = dnnl::memory::format_tag;
  auto result = std::make_shared<LongInnerPrimitive>();
  dnnl::engine& engine = dnnl_engine();
  // src = x (K rows of M), diff_dst = dy (K rows of N), diff_weights (N, M) stored M-major
  // ("ba"): that is out (M, N) row-major.
  result->src = dnnl::memory::desc({k, m}, in, tag::ab);
  result->diff_dst = dnnl::memory::desc({k, n}, in, tag::ab);
  result->diff_weights = dnnl::memory::desc({n, m}, out, tag::ba);
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::memory::desc weights_any({n, m}, in, tag::any);
    const dnnl::inner_product_forward::primitive_desc hint(
        dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, result->src,
                                          weights_any, result->diff_dst),
        engine);
    const dnnl::inner_product_backward_weights::primitive_desc pd(
        dnnl::inner_product_backward_weights::desc(result->src, result->diff_weights,
                                                   result->diff_dst),
        attr, engine, hint);
    result->scratchpad_bytes = pd.scratchpad_desc().get_size();
    result->implementation = pd.impl_info_str();
    result->primitive = dnnl::inner_product_backward_weights(pd);
  } catch (const dnnl::error& e) {
    throw Error("matmul: oneDNN cannot create an inner-product backward-weights primitive for " +
                std::to_string(m) + " x " + std::to_string(k) + " x " + std::to_string(n) + ": " +
                e.what());
  }
  return result;
}

PrimitiveCache<Key, LongInnerPrimitive>& cache() {
  static PrimitiveCache<Key, LongInnerPrimitive> instance(256);
  return instance;
}

dnnl::memory::data_type onednn_type(DType dtype) {
  return dtype == DType::float32 ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
}

}  // namespace

bool takes_long_inner(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k) {
  const bool type_ok = dtype == DType::float32 || (dtype == DType::bfloat16 && use_native_bf16());
  return type_ok && k >= kLongInnerMinK && m > 0 && n > 0 && m * n <= kLongInnerMaxResult;
}

void long_inner_product(const Tensor& x, const Tensor& dy, Tensor& out) {
  const bool ranks_ok = x.rank() == 2 && dy.rank() == 2 && out.rank() == 2;
  const std::int64_t k = ranks_ok ? x.dim(0) : 0, m = ranks_ok ? x.dim(1) : 0;
  const std::int64_t n = ranks_ok ? dy.dim(1) : 0;
  const bool shapes_ok = ranks_ok && dy.dim(0) == k && out.dim(0) == m && out.dim(1) == n;
  if (!shapes_ok || x.dtype() != dy.dtype() || !x.is_contiguous() || !dy.is_contiguous() ||
      !out.is_contiguous() || !takes_long_inner(x.dtype(), m, n, k) ||
      (out.dtype() != x.dtype() && out.dtype() != DType::float32)) {
    throw Error(
        "cpu::long_inner_product: expected contiguous x (K, M) and dy (K, N) of one dtype "
        "and an (M, N) result with K >= " +
        std::to_string(kLongInnerMinK) + " and M * N <= " + std::to_string(kLongInnerMaxResult) +
        ", got " + x.shape().to_string() + " " + std::string(dtype_name(x.dtype())) + ", " +
        dy.shape().to_string() + " " + std::string(dtype_name(dy.dtype())) + " into " +
        out.shape().to_string() + " " + std::string(dtype_name(out.dtype())));
  }
  const auto in = onednn_type(x.dtype()), result = onednn_type(out.dtype());
  const Key key{k, m, n, static_cast<std::int64_t>(in), static_cast<std::int64_t>(result)};
  const auto primitive = cache().get(key, [&] { return create(k, m, n, in, result); });
  dnnl::engine& engine = dnnl_engine();
  // oneDNN takes non-const handles; it only reads src and diff_dst.
  dnnl::memory src(primitive->src, engine, const_cast<void*>(x.data_ptr()));
  dnnl::memory diff_dst(primitive->diff_dst, engine, const_cast<void*>(dy.data_ptr()));
  dnnl::memory diff_weights(primitive->diff_weights, engine, out.data_ptr());
  const Scratchpad pad = dnnl_scratchpad(primitive->scratchpad_bytes);
  dnnl::stream& stream = dnnl_stream();
  primitive->primitive.execute(stream, {{DNNL_ARG_SRC, src},
                                        {DNNL_ARG_DIFF_DST, diff_dst},
                                        {DNNL_ARG_DIFF_WEIGHTS, diff_weights},
                                        {DNNL_ARG_SCRATCHPAD, pad.memory}});
  stream.wait();
}

}  // namespace mixprec::cpu
