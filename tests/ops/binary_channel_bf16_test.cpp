// The per-channel broadcast add and mul on bfloat16 (backend/cpu/binary_channel.h) with the native
// rounding of AVX512_BF16 (bf16_native_rounding.h) bit for bit against the scalar definition
// bfloat16(float(a) op float(b)), and against the compiled loops (conversion ISA limited below
// avx512_bf16): every channel count 1..100 and a few thousand (masked tails), both operand orders,
// on random bit patterns (NaN payloads, infinities, signed zeros, subnormals), on products and
// sums that are float32 subnormals (which vcvtne2ps2bf16 would flush), and with MXCSR.DAZ set.
// Skipped on a CPU without AVX512_BF16.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/binary_channel.h"
#include "core/convert_kernels.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

bool is_nan16(std::uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

// A bfloat16 tensor of the given bit patterns.
Tensor bf16_tensor(const std::vector<std::uint16_t>& bits, const Shape& shape) {
  Tensor t = zeros(shape, {DType::bfloat16});
  bfloat16* p = t.data<bfloat16>();
  for (std::size_t i = 0; i < bits.size(); ++i) p[i] = bfloat16::from_bits(bits[i]);
  return t;
}

std::vector<std::uint16_t> bits_of(const Tensor& t) {
  std::vector<std::uint16_t> out;
  const bfloat16* p = t.data<bfloat16>();
  for (std::int64_t i = 0; i < t.numel(); ++i) out.push_back(p[i].bits);
  return out;
}

// Random patterns (tiny = false) or values about 2^-70 whose products are float32 subnormals and
// whose sums of opposite signs can be too (tiny = true).
std::vector<std::uint16_t> values(std::size_t n, bool tiny, std::mt19937& rng) {
  std::vector<std::uint16_t> v(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& b : v) {
    if (!tiny) {
      b = static_cast<std::uint16_t>(rng());
    } else {
      const int e = -60 - static_cast<int>(rng() % 70);
      b = bfloat16(std::ldexp(normal(rng), e)).bits;
    }
  }
  return v;
}

void check(BinaryOp op, std::int64_t c, bool tiny, bool small_first, std::mt19937& rng,
           const std::string& context) {
  const Shape full_shape{2, 3, c}, small_shape{2, 1, c};
  const auto fv = values(static_cast<std::size_t>(full_shape.numel()), tiny, rng);
  const auto sv = values(static_cast<std::size_t>(small_shape.numel()), tiny, rng);
  const Tensor full = bf16_tensor(fv, full_shape), small = bf16_tensor(sv, small_shape);
  Tensor out = zeros(full_shape, {DType::bfloat16});
  ASSERT_TRUE(small_first ? cpu::binary_channel(op, small, full, out)
                          : cpu::binary_channel(op, full, small, out));
  const core::ConvertIsa before = core::set_convert_isa_limit(core::ConvertIsa::avx512);
  Tensor compiled = zeros(full_shape, {DType::bfloat16});
  ASSERT_TRUE(small_first ? cpu::binary_channel(op, small, full, compiled)
                          : cpu::binary_channel(op, full, small, compiled));
  core::set_convert_isa_limit(before);
  const auto got = bits_of(out), other = bits_of(compiled);
  for (std::size_t i = 0; i < fv.size(); ++i) {
    const std::size_t group = i / static_cast<std::size_t>(3 * c);
    const std::size_t j = group * static_cast<std::size_t>(c) + i % static_cast<std::size_t>(c);
    const float f = static_cast<float>(bfloat16::from_bits(fv[i]));
    const float s = static_cast<float>(bfloat16::from_bits(sv[j]));
    const float a = small_first ? s : f, b = small_first ? f : s;
    const std::uint16_t want = bfloat16(op == BinaryOp::add ? a + b : a * b).bits;
    const std::string what = context + " " + op_name(op) + " C=" + std::to_string(c) +
                             (small_first ? " small first" : "") + (tiny ? " tiny" : "") +
                             " element " + std::to_string(i);
    // Two NaN operands: x86 returns the one in the first source register, and the compiler may
    // swap the operands of a commutative operation: any NaN is right there.
    if (is_nan16(fv[i]) && is_nan16(sv[j])) {
      ASSERT_TRUE(is_nan16(got[i]) && is_nan16(other[i])) << what;
      continue;
    }
    ASSERT_EQ(got[i], want) << what;
    ASSERT_EQ(other[i], want) << what << " (compiled loops)";
  }
}

void check_all(const std::string& context) {
  std::mt19937 rng(5);
  std::vector<std::int64_t> channels;
  for (std::int64_t c = 1; c <= 100; ++c) channels.push_back(c);
  for (std::int64_t c : {672, 1000, 2047}) channels.push_back(c);
  for (const BinaryOp op : {BinaryOp::add, BinaryOp::mul}) {
    for (const std::int64_t c : channels) {
      for (const bool tiny : {false, true}) {
        for (const bool small_first : {false, true}) {
          ASSERT_NO_FATAL_FAILURE(check(op, c, tiny, small_first, rng, context));
        }
      }
    }
  }
}

TEST(NativeBf16BinaryChannel, AddAndMulBitIdenticalToTheScalarDefinition) {
  if (core::convert_isa_supported() < core::ConvertIsa::avx512_bf16) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (+AVX512DQ): no native bfloat16 loops";
  }
  check_all("");
}

TEST(NativeBf16BinaryChannel, BitIdenticalWithDenormalsAreZero) {
  if (core::convert_isa_supported() < core::ConvertIsa::avx512_bf16) {
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (+AVX512DQ): no native bfloat16 loops";
  }
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x40u);
  check_all("DAZ");
  _mm_setcsr(csr);
}

}  // namespace
}  // namespace mixprec
