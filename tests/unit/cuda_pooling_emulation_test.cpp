// The CUDA pooling kernels (src/backend/cuda/kernels/pooling_kernels.cuh) run on the CPU by the
// host emulation (support/cuda_host_emulation.h): every thread of a grid whose size is no multiple
// of the work (the grid-stride loops wrap), one after another. No GPU needed: this checks the
// kernels' indexing (the window spans, the output windows covering an input pixel, computed
// directly), the variants the launchers pick (16-byte channel vectors and single channels, 32- and
// 64-bit indices, uint8 and int32 argmax) and their arithmetic, in every storage type.
//
// Oracle: plain loops written here, over every tap of every window with explicit bounds tests
// (not the kernels' spans), the backward scattering each window's gradient (not gathering):
//  - max pooling: the first maximum of a window in row-major tap order (compared in double), its
//    value and its tap; the backward adds each window's dy to the element it chose. Values, taps
//    and routed gradients must be equal.
//  - average pooling: the sum of a window's real elements in compute_t<T> in row-major order,
//    divided by their count, rounded once; the backward adds dy / count of each window in
//    row-major window order in compute_t<T>, rounded once. This is the kernels' order (pooling.h
//    promises it), so the results must be equal too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/pooling.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/pooling_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using pooling_kernels::backward_kernel;
using pooling_kernels::forward_kernel;

// A grid size that is no multiple of the work: the grid-stride loops wrap.
constexpr std::int64_t kGridThreads = 7 * kWarp;

struct Case {
  std::string name;
  PoolShape shape;
};

// Padding of a case: TensorFlow's `valid` (none) and `same` (out = ceil(in / stride), the odd
// padding row at the bottom/right), or `explicit` symmetric padding (PyTorch: pad rows on both
// sides, out = (in + 2 pad - window) / stride + 1).
enum class Pad { valid, same, explicit_ };

std::int64_t out_extent(Pad pad, std::int64_t in, std::int64_t window, std::int64_t stride,
                        std::int64_t explicit_pad) {
  if (pad == Pad::same) return (in + stride - 1) / stride;
  if (pad == Pad::explicit_) return (in + 2 * explicit_pad - window) / stride + 1;
  return (in - window) / stride + 1;
}

std::int64_t pad_before(Pad pad, std::int64_t in, std::int64_t out, std::int64_t window,
                        std::int64_t stride, std::int64_t explicit_pad) {
  if (pad == Pad::explicit_) return explicit_pad;
  const std::int64_t total = (out - 1) * stride + window - in;
  return pad == Pad::same && total > 0 ? total / 2 : 0;
}

Case make_case(std::string name, std::int64_t batch, std::int64_t in_h, std::int64_t in_w,
               std::int64_t window_h, std::int64_t window_w, std::int64_t stride_h,
               std::int64_t stride_w, Pad pad, std::int64_t explicit_pad = 0) {
  PoolShape g;
  g.batch = batch, g.in_h = in_h, g.in_w = in_w, g.channels = 1;
  g.window_h = window_h, g.window_w = window_w, g.stride_h = stride_h, g.stride_w = stride_w;
  g.out_h = out_extent(pad, in_h, window_h, stride_h, explicit_pad);
  g.out_w = out_extent(pad, in_w, window_w, stride_w, explicit_pad);
  g.pad_top = pad_before(pad, in_h, g.out_h, window_h, stride_h, explicit_pad);
  g.pad_left = pad_before(pad, in_w, g.out_w, window_w, stride_w, explicit_pad);
  return {std::move(name), g};
}

std::vector<Case> cases() {
  return {
      make_case("2x2 s2 valid", 2, 8, 6, 2, 2, 2, 2, Pad::valid),
      make_case("2x2 s2 valid, odd input (last row and column unused)", 2, 9, 7, 2, 2, 2, 2,
                Pad::valid),
      make_case("3x3 s2 pad 1 (ResNet's stem)", 2, 12, 12, 3, 3, 2, 2, Pad::explicit_, 1),
      make_case("3x3 s2 pad 1, odd input", 1, 11, 13, 3, 3, 2, 2, Pad::explicit_, 1),
      make_case("3x3 s2 same, odd input (1 and 1)", 1, 9, 11, 3, 3, 2, 2, Pad::same),
      make_case("3x3 s2 same, even input (0 and 1)", 2, 8, 10, 3, 3, 2, 2, Pad::same),
      make_case("3x3 s1 same (overlapping)", 1, 7, 6, 3, 3, 1, 1, Pad::same),
      make_case("1x1 s1", 2, 5, 4, 1, 1, 1, 1, Pad::valid),
      make_case("1x1 s2 (inputs in no window)", 1, 7, 6, 1, 1, 2, 2, Pad::valid),
      make_case("2x3 window, stride (1, 2), valid", 2, 6, 9, 2, 3, 1, 2, Pad::valid),
      make_case("3x2 window, stride (2, 1), same", 1, 7, 8, 3, 2, 2, 1, Pad::same),
      make_case("5x5 s3 same", 1, 11, 13, 5, 5, 3, 3, Pad::same),
      make_case("2x2 s3 valid (gaps between windows)", 1, 10, 11, 2, 2, 3, 3, Pad::valid),
      make_case("7x7 s2 same on 17x15 (2 and 3)", 1, 17, 15, 7, 7, 2, 2, Pad::same),
      // 272 taps: the argmax is int32 (pooling.h's pool_argmax_dtype).
      make_case("17x16 window s1 valid (int32 argmax)", 1, 18, 17, 17, 16, 1, 1, Pad::valid),
  };
}

// A vector width's channel counts (8, 16, 64: every type's 16-byte vector divides some) and the
// single-channel fallback's (3, 5): two per case, in turn.
std::vector<std::int64_t> channels_of(std::size_t case_index) {
  const std::int64_t vector[] = {8, 16, 64}, single[] = {3, 5};
  return {vector[case_index % 3], single[case_index % 2]};
}

std::int64_t x_size(const PoolShape& g) { return g.batch * g.in_h * g.in_w * g.channels; }
std::int64_t y_size(const PoolShape& g) { return g.batch * g.out_h * g.out_w * g.channels; }

// Values rounded to T: uniform in [-1, 1), or integers in {-1, 0, 1} (`ties`: most windows hold
// several equal maxima).
template <typename T>
std::vector<T> draw(std::int64_t count, bool ties, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> integer(-1, 1);
  std::vector<T> out(static_cast<std::size_t>(count));
  for (T& v : out) {
    const float value = ties ? static_cast<float>(integer(gen)) : real(gen);
    v = from_compute<T>(static_cast<compute_t<T>>(value));
  }
  return out;
}

template <typename T>
double as_double(T v) {
  return static_cast<double>(to_compute(v));
}

// Calls f(n, oh, ow, at, tap) for every real tap of every window, windows in row-major order
// (n, oh, ow), taps in row-major order; at is the tap's input pixel offset (channel 0) and tap
// its index kh * window_w + kw.
template <typename F>
void for_each_tap(const PoolShape& g, F&& f) {
  for (std::int64_t n = 0; n < g.batch; ++n) {
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        for (std::int64_t kh = 0; kh < g.window_h; ++kh) {
          for (std::int64_t kw = 0; kw < g.window_w; ++kw) {
            const std::int64_t ih = oh * g.stride_h - g.pad_top + kh;
            const std::int64_t iw = ow * g.stride_w - g.pad_left + kw;
            if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
            f(n, oh, ow, ((n * g.in_h + ih) * g.in_w + iw) * g.channels, kh * g.window_w + kw);
          }
        }
      }
    }
  }
}

std::int64_t y_pixel(const PoolShape& g, std::int64_t n, std::int64_t oh, std::int64_t ow) {
  return ((n * g.out_h + oh) * g.out_w + ow) * g.channels;
}

// The reference forward: y, the taps of the first maxima (max) and each window's real count.
template <typename T>
struct Reference {
  std::vector<T> y;
  std::vector<std::int32_t> taps;
  std::vector<std::int64_t> count;  // per output pixel
};

template <typename T>
Reference<T> reference_forward(bool max, const PoolShape& g, const std::vector<T>& x) {
  using C = compute_t<T>;
  const std::size_t outputs = static_cast<std::size_t>(y_size(g));
  Reference<T> r;
  r.y.resize(outputs), r.taps.assign(outputs, -1);
  r.count.assign(outputs / static_cast<std::size_t>(g.channels), 0);
  std::vector<C> sum(outputs, C(0));
  for_each_tap(
      g, [&](std::int64_t n, std::int64_t oh, std::int64_t ow, std::int64_t at, std::int64_t tap) {
        const std::int64_t o = y_pixel(g, n, oh, ow);
        ++r.count[static_cast<std::size_t>(o / g.channels)];
        for (std::int64_t c = 0; c < g.channels; ++c) {
          const std::size_t i = static_cast<std::size_t>(o + c);
          const T value = x[static_cast<std::size_t>(at + c)];
          sum[i] += to_compute(value);
          if (r.taps[i] < 0 || as_double(value) > as_double(r.y[i])) {
            r.y[i] = value, r.taps[i] = static_cast<std::int32_t>(tap);
          }
        }
      });
  if (!max) {
    for (std::size_t i = 0; i < outputs; ++i) {
      const auto count = static_cast<C>(r.count[i / static_cast<std::size_t>(g.channels)]);
      r.y[i] = from_compute<T>(sum[i] / count);
    }
  }
  return r;
}

// The reference backward: each window's gradient scattered to the element it chose (max) or to
// all its real elements as dy / count (average), windows in row-major order, rounded once.
template <typename T>
std::vector<T> reference_backward(bool max, const PoolShape& g, const std::vector<T>& dy,
                                  const Reference<T>& forward) {
  using C = compute_t<T>;
  std::vector<C> sum(static_cast<std::size_t>(x_size(g)), C(0));
  for_each_tap(
      g, [&](std::int64_t n, std::int64_t oh, std::int64_t ow, std::int64_t at, std::int64_t tap) {
        const std::int64_t o = y_pixel(g, n, oh, ow);
        const auto count = static_cast<C>(forward.count[static_cast<std::size_t>(o / g.channels)]);
        for (std::int64_t c = 0; c < g.channels; ++c) {
          const std::size_t i = static_cast<std::size_t>(o + c);
          const C d = to_compute(dy[i]);
          if (!max) {
            sum[static_cast<std::size_t>(at + c)] += d / count;
          } else if (forward.taps[i] == tap) {
            sum[static_cast<std::size_t>(at + c)] += d;
          }
        }
      });
  std::vector<T> dx(sum.size());
  for (std::size_t i = 0; i < sum.size(); ++i) dx[i] = from_compute<T>(sum[i]);
  return dx;
}

// got == want elementwise (as double: 16-bit values convert exactly), with the first difference.
template <typename T, typename U>
::testing::AssertionResult equal(const std::vector<T>& got, const std::vector<U>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    double a, b;
    if constexpr (std::is_integral_v<T>) {
      a = static_cast<double>(got[i]), b = static_cast<double>(want[i]);
    } else {
      a = as_double(got[i]), b = as_double(want[i]);
    }
    if (!(a == b)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs " << b;
    }
  }
  return ::testing::AssertionSuccess();
}

// One variant of the kernels (index type I, argmax entry A, vector width V) on one case: the
// forward (max with and without argmax, average) and the backward of both, against the
// references.
template <typename T, typename I, typename A, int V>
void expect_variant(const PoolShape& g, const std::vector<T>& x, const std::vector<T>& dy,
                    const Reference<T>& max_ref, const Reference<T>& avg_ref) {
  SCOPED_TRACE("index bytes " + std::to_string(sizeof(I)) + ", argmax bytes " +
               std::to_string(sizeof(A)) + ", vector " + std::to_string(V));
  std::vector<T> y(static_cast<std::size_t>(y_size(g))), y_plain(y.size());
  std::vector<A> taps(y.size());
  run_grid(kGridThreads,
           [&] { forward_kernel<T, I, A, V>(true, g, x.data(), y.data(), taps.data()); });
  EXPECT_TRUE(equal(y, max_ref.y)) << "max forward";
  EXPECT_TRUE(equal(taps, max_ref.taps)) << "max forward's argmax";
  run_grid(kGridThreads, [&] {
    forward_kernel<T, I, A, V>(true, g, x.data(), y_plain.data(), static_cast<A*>(nullptr));
  });
  EXPECT_TRUE(equal(y_plain, max_ref.y)) << "max forward without argmax";
  run_grid(kGridThreads, [&] {
    forward_kernel<T, I, A, V>(false, g, x.data(), y.data(), static_cast<A*>(nullptr));
  });
  EXPECT_TRUE(equal(y, avg_ref.y)) << "average forward";

  std::vector<T> dx(static_cast<std::size_t>(x_size(g)));
  run_grid(kGridThreads,
           [&] { backward_kernel<T, I, A, V>(true, g, dy.data(), taps.data(), dx.data()); });
  EXPECT_TRUE(equal(dx, reference_backward(true, g, dy, max_ref))) << "max backward";
  run_grid(kGridThreads, [&] {
    backward_kernel<T, I, A, V>(false, g, dy.data(), static_cast<const A*>(nullptr), dx.data());
  });
  EXPECT_TRUE(equal(dx, reference_backward(false, g, dy, avg_ref))) << "average backward";
}

// Every variant the launchers (pooling.cu) may pick for the case, plus the 64-bit index with the
// 16-byte vector, the argmax type they would not pick for the window (int32 for small windows)
// where it fits, on random and on tied values.
template <typename T>
void expect_case(const PoolShape& g, std::uint32_t seed) {
  constexpr int kVector = static_cast<int>(16 / sizeof(T));
  const bool narrow = pool_argmax_dtype(g.window_h, g.window_w) == DType::uint8;
  for (const bool ties : {false, true}) {
    SCOPED_TRACE(ties ? "integer values (ties)" : "random values");
    const std::vector<T> x = draw<T>(x_size(g), ties, seed);
    const std::vector<T> dy = draw<T>(y_size(g), false, seed + 1);
    const Reference<T> max_ref = reference_forward(true, g, x);
    const Reference<T> avg_ref = reference_forward(false, g, x);
    const auto each_argmax = [&]<typename I, int V>() {
      if (narrow) expect_variant<T, I, std::uint8_t, V>(g, x, dy, max_ref, avg_ref);
      expect_variant<T, I, std::int32_t, V>(g, x, dy, max_ref, avg_ref);
    };
    each_argmax.template operator()<std::int32_t, 1>();
    each_argmax.template operator()<std::int64_t, 1>();
    if (g.channels % kVector == 0) {
      each_argmax.template operator()<std::int32_t, kVector>();
      each_argmax.template operator()<std::int64_t, kVector>();
    }
  }
}

template <typename T>
void expect_all_cases() {
  const std::vector<Case> all = cases();
  for (std::size_t k = 0; k < all.size(); ++k) {
    for (const std::int64_t channels : channels_of(k)) {
      PoolShape g = all[k].shape;
      g.channels = channels;
      SCOPED_TRACE(all[k].name + ", " + std::to_string(channels) + " channels");
      ASSERT_GT(g.out_h, 0);
      ASSERT_GT(g.out_w, 0);
      expect_case<T>(g, static_cast<std::uint32_t>(10 * k + static_cast<std::size_t>(channels)));
    }
  }
}

TEST(CudaPoolingEmulationTest, Float32MatchesTheReference) { expect_all_cases<float>(); }
TEST(CudaPoolingEmulationTest, Float16MatchesTheReference) { expect_all_cases<float16>(); }
TEST(CudaPoolingEmulationTest, BFloat16MatchesTheReference) { expect_all_cases<bfloat16>(); }
TEST(CudaPoolingEmulationTest, Float64MatchesTheReference) { expect_all_cases<double>(); }

// The output windows covering each input row, computed directly by the kernels, against a search
// over all windows, for windows smaller than, equal to and larger than the stride, with padding.
TEST(CudaPoolingEmulationTest, CoveringWindowsAreExactlyThoseHoldingTheRow) {
  for (std::int64_t window = 1; window <= 7; ++window) {
    for (std::int64_t stride = 1; stride <= 4; ++stride) {
      for (std::int64_t pad = 0; pad < window; ++pad) {
        for (std::int64_t in = window; in <= 13; ++in) {
          const std::int64_t out = (in + 2 * pad - window) / stride + 1;
          for (std::int64_t i = 0; i < in; ++i) {
            std::int64_t first = out, last = -1;
            for (std::int64_t o = 0; o < out; ++o) {
              const std::int64_t k = i + pad - o * stride;
              if (k >= 0 && k < window) first = std::min(first, o), last = o;
            }
            const auto span =
                pooling_kernels::covering_windows<std::int64_t>(i, pad, window, stride, out);
            const std::int64_t want_end = last < 0 ? first : last + 1;
            ASSERT_TRUE(last < 0 ? span.begin >= span.end
                                 : span.begin == first && span.end == want_end)
                << "row " << i << " of " << in << ", window " << window << ", stride " << stride
                << ", pad " << pad << ": [" << span.begin << ", " << span.end << ")";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixprec::cuda::kernels
