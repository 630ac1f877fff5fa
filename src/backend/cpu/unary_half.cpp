// The 16-bit relu/relu6 loops of unary_half.h. IEEE formats order non-negative values like their
// bit patterns, so clamping to [0, 6] is an unsigned comparison once the sign and NaN are known;
// the loops vectorise as 16-bit integer selects (16 lanes with AVX2).
#include "backend/cpu/unary_half.h"

#include <cstdint>

#include "backend/cpu/elementwise.h"

namespace mixprec::cpu {

namespace {

// The bit patterns of one 16-bit format.
struct Format {
  std::uint16_t inf;          // +inf: magnitudes above it are NaN
  std::uint16_t six;          // 6.0
  std::uint16_t default_nan;  // what 0 * inf gives (x86's default NaN: negative, quiet)
};
constexpr Format kHalf{0x7c00, 0x4600, 0xfe00};
constexpr Format kBFloat{0x7f80, 0x40c0, 0xffc0};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MIXPREC_HALF_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MIXPREC_HALF_CLONES
#endif

// relu(x) = x > 0 ? x : (NaN ? x : +0); relu6 also clamps above 6 and keeps -0 (as the float
// forms in kernel_math do).
MIXPREC_HALF_CLONES
void relu_bits(bool six, Format f, const std::uint16_t* x, std::uint16_t* out, std::int64_t n) {
  const std::uint16_t cap = six ? f.six : 0xffff;
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t b = x[i];
    const std::uint16_t mag = b & 0x7fff;
    const bool nan = mag > f.inf;
    const bool negative = (b & 0x8000) != 0 && mag != 0;
    const bool negative_zero = b == 0x8000;
    std::uint16_t r = b > cap ? cap : b;
    r = negative ? std::uint16_t{0} : r;
    r = negative_zero ? (six ? b : std::uint16_t{0}) : r;
    out[i] = nan ? b : r;
  }
}

// g * mask: g where 0 < y (< 6 for relu6), else g * 0: a zero with g's sign, NaN for NaN or
// infinite g.
MIXPREC_HALF_CLONES
void relu_backward_bits(bool six, Format f, const std::uint16_t* g, const std::uint16_t* y,
                        std::uint16_t* out, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t b = y[i];
    const bool positive = (b & 0x8000) == 0 && b != 0 && b <= f.inf;  // NaN is not
    const bool pass = positive && (!six || b < f.six);
    const std::uint16_t gb = g[i];
    const std::uint16_t gmag = gb & 0x7fff;
    const std::uint16_t zero = gmag > f.inf ? gb : (gmag == f.inf ? f.default_nan : gb & 0x8000);
    out[i] = pass ? gb : zero;
  }
}

bool is_relu(UnaryOp op) { return op == UnaryOp::relu || op == UnaryOp::relu6; }

const Format* format_of(DType dtype) {
  if (dtype == DType::float16) return &kHalf;
  if (dtype == DType::bfloat16) return &kBFloat;
  return nullptr;
}

const std::uint16_t* bits(const Tensor& t) {
  return static_cast<const std::uint16_t*>(t.data_ptr());
}

// Calls body(start, count) over [0, n) in chunks, in parallel when n is large.
template <typename Body>
void chunks(std::int64_t n, Body body) {
  constexpr std::int64_t kSpan = 8 * kChunk;
  const std::int64_t spans = (n + kSpan - 1) / kSpan;
#pragma omp parallel for schedule(static) if (n >= kParallelThreshold)
  for (std::int64_t s = 0; s < spans; ++s) {
    body(s * kSpan, std::min(kSpan, n - s * kSpan));
  }
}

}  // namespace

bool unary_half(UnaryOp op, const Tensor& x, Tensor& out) {
  const Format* f = format_of(x.dtype());
  if (f == nullptr || !is_relu(op) || !x.is_contiguous()) return false;
  const bool six = op == UnaryOp::relu6;
  const std::uint16_t* in = bits(x);
  auto* o = static_cast<std::uint16_t*>(out.data_ptr());
  chunks(x.numel(), [&](std::int64_t s, std::int64_t m) { relu_bits(six, *f, in + s, o + s, m); });
  return true;
}

bool unary_backward_half(UnaryOp op, const Tensor& g, const Tensor& y, Tensor& out) {
  const Format* f = format_of(y.dtype());
  if (f == nullptr || !is_relu(op) || g.dtype() != y.dtype() || !g.is_contiguous() ||
      !y.is_contiguous()) {
    return false;
  }
  const bool six = op == UnaryOp::relu6;
  const std::uint16_t* pg = bits(g);
  const std::uint16_t* py = bits(y);
  auto* o = static_cast<std::uint16_t*>(out.data_ptr());
  chunks(y.numel(), [&](std::int64_t s, std::int64_t m) {
    relu_backward_bits(six, *f, pg + s, py + s, o + s, m);
  });
  return true;
}

}  // namespace mixprec::cpu
