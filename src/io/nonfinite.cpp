// NaN and Inf in stored tensors (nonfinite.h).
#include "io/nonfinite.h"

#include <cstring>

#include "mixprec/error.h"

namespace mixprec::io::detail {

namespace {

// Elements of `count` words of type W at `data` whose bits under `exponent` are all set.
template <typename W>
std::int64_t count_all_ones(const void* data, std::int64_t count, W exponent) {
  std::int64_t bad = 0;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::int64_t i = 0; i < count; ++i) {
    W w;
    std::memcpy(&w, bytes + i * static_cast<std::int64_t>(sizeof(W)), sizeof(W));
    bad += (w & exponent) == exponent ? 1 : 0;
  }
  return bad;
}

}  // namespace

std::int64_t count_nonfinite(const Tensor& host) {
  const std::int64_t n = host.numel();
  if (n == 0) return 0;
  switch (host.dtype()) {
    case DType::float64: return count_all_ones<std::uint64_t>(host.data_ptr(), n, 0x7ffull << 52);
    case DType::float32: return count_all_ones<std::uint32_t>(host.data_ptr(), n, 0xffu << 23);
    case DType::float16:
      return count_all_ones<std::uint16_t>(host.data_ptr(), n, std::uint16_t{0x1f << 10});
    case DType::bfloat16:
      return count_all_ones<std::uint16_t>(host.data_ptr(), n, std::uint16_t{0xff << 7});
    default: return 0;
  }
}

void check_finite(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::string& prefix, const LoadOptions& options, const std::string& where) {
  if (options.allow_nonfinite) return;
  for (const auto& [name, t] : tensors) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::int64_t bad = count_nonfinite(t);
    if (bad == 0) continue;
    throw IOError(
        where + ": tensor '" + name + "' holds " + std::to_string(bad) + " non-finite value" +
        (bad == 1 ? "" : "s") + " (NaN or Inf) of " + std::to_string(t.numel()) +
        "; a model loaded from it computes NaN. Load an earlier file, or pass "
        "LoadOptions{.allow_nonfinite = true} (the CLI's --allow-nonfinite) to inspect it");
  }
}

}  // namespace mixprec::io::detail
