// The saturating float -> integer body shared by the CPU cast loop and the CUDA cast kernel
// (src/backend/kernel_math/cast_math.h), run on the host.
#include "backend/kernel_math/cast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "mixprec/creation.h"
#include "mixprec/ops.h"

namespace mixprec::kernel_math {
namespace {

// hi is the largest C not above Out's maximum: the value std::nextafter finds below it when the
// maximum itself does not fit C.
template <typename Out, typename C>
void expect_range() {
  constexpr SaturationRange<Out, C> r = saturation_range<Out, C>();
  EXPECT_EQ(r.lo, static_cast<C>(std::numeric_limits<Out>::min()));
  const C rounded_max = static_cast<C>(std::numeric_limits<Out>::max());
  const bool fits = static_cast<long double>(rounded_max) <=
                    static_cast<long double>(std::numeric_limits<Out>::max());
  EXPECT_EQ(r.hi, fits ? rounded_max : std::nextafter(rounded_max, C(0)));
  EXPECT_LE(static_cast<long double>(r.hi),
            static_cast<long double>(std::numeric_limits<Out>::max()));
}

TEST(CastMath, SaturationRangesAreTheLargestValuesInRange) {
  expect_range<std::int32_t, float>();
  expect_range<std::int32_t, double>();
  expect_range<std::int64_t, float>();
  expect_range<std::int64_t, double>();
  expect_range<std::uint8_t, float>();
  expect_range<std::uint8_t, double>();
  EXPECT_EQ((saturation_range<std::int64_t, double>().hi), 9223372036854774784.0);
  EXPECT_EQ((saturation_range<std::int32_t, float>().hi), 2147483520.0f);
}

TEST(CastMath, TruncatesSaturatesAndMapsNanToZero) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(saturating_cast<std::int32_t>(2.9), 2);
  EXPECT_EQ(saturating_cast<std::int32_t>(-2.9), -2);
  EXPECT_EQ(saturating_cast<std::int32_t>(std::nan("")), 0);
  EXPECT_EQ(saturating_cast<std::int32_t>(1e20), std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(saturating_cast<std::int32_t>(-inf), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(saturating_cast<std::int64_t>(inf), 9223372036854774784LL);
  EXPECT_EQ(saturating_cast<std::int64_t>(-1e300), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(saturating_cast<std::uint8_t>(-3.5f), 0);
  EXPECT_EQ(saturating_cast<std::uint8_t>(255.9f), 255);
  EXPECT_EQ(saturating_cast<std::uint8_t>(1000.0f), 255);
}

// The CPU cast op uses the same body: its results agree element for element.
TEST(CastMath, TheCpuCastOpAgrees) {
  const std::vector<double> values = {2.9, -2.9, 1e20, -1e20, 300.0, -0.5, 65.5};
  const Tensor x = from_vector(values, {7}, {.dtype = DType::float64});
  const std::vector<std::int32_t> i32 = cast(x, DType::int32).to_vector<std::int32_t>();
  const std::vector<std::uint8_t> u8 = cast(x, DType::uint8).to_vector<std::uint8_t>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(i32[i], saturating_cast<std::int32_t>(values[i])) << values[i];
    EXPECT_EQ(u8[i], saturating_cast<std::uint8_t>(values[i])) << values[i];
  }
}

}  // namespace
}  // namespace mixprec::kernel_math
