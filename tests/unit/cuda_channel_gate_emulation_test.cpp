// The CUDA squeeze-and-excitation gate gradient's kernels (kernels/channel_gate_kernels.cuh) run
// on the CPU by the host emulation (support/cuda_host_emulation.h), with the work split the
// launcher uses (channel_gate_plan): both passes, channel pairs and single channels, the warp and
// the thread finish, and one part (pass 1 writes the result). No GPU needed.
//
// Oracle: the exact sum over the pixels of g * x (float64 over the same rounded inputs) within the
// rigorous bound of a float summation of the largest part's pixel count, 1.01 k u M
// (M = sum |g x|), plus the double sum of the parts (negligible: u64) and one rounding to the
// storage type (double -> float -> T: at most u_float + u_T relative). 16-bit products are exact in
// float, so in 16-bit storage the emulation does what the GPU does bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/channel_geometry.h"
#include "backend/cuda/channel_gate.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/channel_gate_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using channel_gate_kernels::gate_finish_kernel;
using channel_gate_kernels::gate_finish_warp_kernel;
using channel_gate_kernels::gate_partials_kernel;

// Runs both passes as channel_gate_backward's launcher does, for a given pair choice.
template <typename T>
std::vector<T> run_kernels(const ChannelGeometry& geo, const GatePlan& plan,
                           const std::vector<T>& g, const std::vector<T>& x) {
  std::vector<T> out(geo.groups * geo.channels, from_compute<T>(compute_t<T>(1e30)));
  std::vector<compute_t<T>> partials(plan.partials, compute_t<T>(1e30));  // poisoned
  const bool direct = plan.parts == 1;
  const auto pass1 = [&]<int V>() {
    run_grid(block_grid(geo.groups * plan.parts * (geo.channels / V)), [&] {
      gate_partials_kernel<T, V>(geo, plan.parts, g.data(), x.data(),
                                 direct ? nullptr : partials.data(), direct ? out.data() : nullptr);
    });
  };
  plan.vector == 2 ? pass1.template operator()<2>() : pass1.template operator()<1>();
  if (direct) return out;
  if (plan.warp_finish) {
    run_grid(block_grid(geo.groups * geo.channels * kWarp), [&] {
      gate_finish_warp_kernel<T>(partials.data(), plan.parts, geo.groups, geo.channels, out.data());
    });
  } else {
    run_grid(7 * kWarp, [&] {  // grid-stride: wraps
      gate_finish_kernel<T>(partials.data(), plan.parts, geo.groups, geo.channels, out.data());
    });
  }
  return out;
}

template <typename T>
void expect_gate(DType dtype, const ChannelGeometry& geo, bool aligned, std::uint32_t seed) {
  const GatePlan plan = channel_gate_plan(dtype, geo, aligned);
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " groups " + std::to_string(geo.groups) +
               " pixels " + std::to_string(geo.rows) + " channels " + std::to_string(geo.channels) +
               ": " + std::to_string(plan.parts) + " parts, " +
               (plan.warp_finish ? "warp" : "thread") + " finish, vector " +
               std::to_string(plan.vector));
  const std::int64_t n = geo.groups * geo.rows * geo.channels;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> g(n), x(n);
  for (std::int64_t i = 0; i < n; ++i) {
    g[i] = from_compute<T>(static_cast<compute_t<T>>(dist(gen)));
    x[i] = from_compute<T>(static_cast<compute_t<T>>(dist(gen)));
  }
  const std::vector<T> got = run_kernels<T>(geo, plan, g, x);
  const double k = static_cast<double>((geo.rows + plan.parts - 1) / plan.parts);
  const double u_sum = unit_roundoff_of<compute_t<T>>();
  // double -> float -> T: two roundings for the non-double types.
  const double u_store = unit_roundoff_of<T>() + (std::is_same_v<T, double> ? 0.0 : u_sum);
  for (std::int64_t o = 0; o < geo.groups * geo.channels; ++o) {
    const std::int64_t group = o / geo.channels, c = o % geo.channels;
    double exact = 0.0, magnitude = 0.0;
    for (std::int64_t r = 0; r < geo.rows; ++r) {
      const std::int64_t i = (group * geo.rows + r) * geo.channels + c;
      const double term = static_cast<double>(to_compute(g[i])) * to_compute(x[i]);
      exact += term, magnitude += std::abs(term);
    }
    const double bound = 1.01 * (k + 1) * u_sum * magnitude + u_store * std::abs(exact) +
                         (std::is_same_v<T, float16> ? std::ldexp(1.0, -25) : 0.0);
    const double value = static_cast<double>(to_compute(got[o]));
    ASSERT_LE(std::abs(value - exact), bound) << "output " << o << ": " << value << " vs " << exact;
  }
}

template <typename T>
void expect_all(DType dtype) {
  const std::vector<ChannelGeometry> shapes = {
      {2, 56 * 56, 32},  // many parts: the warp finish
      {16, 49, 64},      // a few parts: the thread finish
      {3, 7, 33},        // under 8 pixels: one part, pass 1 writes the result
      {1, 300, 1},       // one channel
      {4, 130, 6},       // 16 parts: the thread finish with pairs
      {1, 4096, 2},      // one group, many parts
  };
  std::uint32_t seed = 1;
  for (const ChannelGeometry& geo : shapes) {
    expect_gate<T>(dtype, geo, true, seed++);
    expect_gate<T>(dtype, geo, false, seed++);  // no 4-byte pairs
  }
}

TEST(CudaChannelGateEmulationTest, Float32StaysWithinTheExactBound) {
  expect_all<float>(DType::float32);
}
TEST(CudaChannelGateEmulationTest, Float16StaysWithinTheExactBound) {
  expect_all<float16>(DType::float16);
}
TEST(CudaChannelGateEmulationTest, Bfloat16StaysWithinTheExactBound) {
  expect_all<bfloat16>(DType::bfloat16);
}
TEST(CudaChannelGateEmulationTest, Float64StaysWithinTheExactBound) {
  expect_all<double>(DType::float64);
}

}  // namespace
}  // namespace mixprec::cuda::kernels
