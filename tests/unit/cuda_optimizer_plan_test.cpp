// Host-side parts of the device optimizers and loss scaling (backend/cuda/optimizers.h), testable
// without a GPU: the multi-tensor launch planner and tables, the loss-scale rule shared by the host
// and the device (against a model of DESIGN §2.5 written here), the host<->device state mirror,
// the per-step constants the kernels receive, and the per-element update formulas the kernels run
// (compiled here for the host) against the CPU loops, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/optimizer_kernels.h"
#include "backend/cuda/optimizers.h"
#include "mixed_precision/loss_scale.h"
#include "mixprec/error.h"
#include "optimizers/step_constants.h"

namespace mixprec {
namespace {

using cuda::MultiTensorLaunch;

// Every (tensor, chunk) of non-empty tensors exactly once, limits respected, order preserved.
void expect_valid_plan(const std::vector<std::int64_t>& numels, int max_tensors, int max_blocks,
                       std::int64_t chunk) {
  const std::vector<MultiTensorLaunch> plan =
      cuda::plan_multi_tensor(numels, max_tensors, max_blocks, chunk);
  std::map<std::pair<int, std::int64_t>, int> seen;
  std::pair<int, std::int64_t> previous{-1, -1};
  for (const MultiTensorLaunch& launch : plan) {
    ASSERT_FALSE(launch.blocks.empty());
    ASSERT_LE(static_cast<int>(launch.tensors.size()), max_tensors);
    ASSERT_LE(static_cast<int>(launch.blocks.size()), max_blocks);
    for (const MultiTensorLaunch::Block& b : launch.blocks) {
      ASSERT_GE(b.slot, 0);
      ASSERT_LT(b.slot, static_cast<int>(launch.tensors.size()));
      const std::pair<int, std::int64_t> key{launch.tensors[static_cast<std::size_t>(b.slot)],
                                             b.chunk};
      EXPECT_LT(previous, key) << "blocks must follow tensor and chunk order";
      previous = key;
      ++seen[key];
    }
  }
  std::size_t expected = 0;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    const std::int64_t chunks = (numels[i] + chunk - 1) / chunk;
    for (std::int64_t c = 0; c < chunks; ++c) {
      EXPECT_EQ((seen[{static_cast<int>(i), c}]), 1) << "tensor " << i << " chunk " << c;
    }
    expected += static_cast<std::size_t>(chunks);
  }
  EXPECT_EQ(seen.size(), expected);
}

TEST(CudaOptimizerPlanTest, SmallListIsOneLaunch) {
  const auto plan = cuda::plan_multi_tensor({10, 1, 16384, 16385});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].tensors, (std::vector<int>{0, 1, 2, 3}));
  // 1 + 1 + 1 + 2 chunks of 16384 elements.
  ASSERT_EQ(plan[0].blocks.size(), 5u);
  EXPECT_EQ(plan[0].blocks[3].slot, 3);
  EXPECT_EQ(plan[0].blocks[3].chunk, 0);
  EXPECT_EQ(plan[0].blocks[4].slot, 3);
  EXPECT_EQ(plan[0].blocks[4].chunk, 1);
}

TEST(CudaOptimizerPlanTest, EmptyTensorsGetNoBlockAndNoSlot) {
  const auto plan = cuda::plan_multi_tensor({0, 5, 0, 0, 7});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].tensors, (std::vector<int>{1, 4}));
  EXPECT_TRUE(cuda::plan_multi_tensor({0, 0}).empty());
  EXPECT_TRUE(cuda::plan_multi_tensor({}).empty());
}

TEST(CudaOptimizerPlanTest, TooManyTensorsSplitIntoLaunches) {
  const std::vector<std::int64_t> numels(70, 3);
  const auto plan = cuda::plan_multi_tensor(numels);
  ASSERT_EQ(plan.size(), 3u);  // 32 + 32 + 6 tensors
  EXPECT_EQ(plan[0].tensors.size(), 32u);
  EXPECT_EQ(plan[2].tensors.size(), 6u);
  EXPECT_EQ(plan[1].tensors.front(), 32);
  expect_valid_plan(numels, cuda::kMultiTensorMaxTensors, cuda::kMultiTensorMaxBlocks,
                    cuda::kMultiTensorChunk);
}

TEST(CudaOptimizerPlanTest, ALargeTensorContinuesInTheNextLaunch) {
  // 1000 chunks: 383 after the first small tensor, then 384, then 233.
  const std::vector<std::int64_t> numels = {5, 1000 * cuda::kMultiTensorChunk, 9};
  const auto plan = cuda::plan_multi_tensor(numels);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].tensors, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan[1].tensors, (std::vector<int>{1}));
  EXPECT_EQ(plan[1].blocks.front().chunk, 383);
  EXPECT_EQ(plan[2].tensors, (std::vector<int>{1, 2}));
  EXPECT_EQ(plan[2].blocks.size(), 1000u - 383 - 384 + 1);
  expect_valid_plan(numels, cuda::kMultiTensorMaxTensors, cuda::kMultiTensorMaxBlocks,
                    cuda::kMultiTensorChunk);
}

TEST(CudaOptimizerPlanTest, RandomListsWithSmallLimitsAreCoveredExactlyOnce) {
  std::uint64_t x = 12345;
  for (int round = 0; round < 50; ++round) {
    std::vector<std::int64_t> numels;
    const int count = 1 + static_cast<int>((x >> 7) % 40);
    for (int i = 0; i < count; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      numels.push_back(static_cast<std::int64_t>((x >> 33) % 200));
    }
    const int max_tensors = 1 + round % 5, max_blocks = 1 + round % 7;
    const std::int64_t chunk = 1 + round % 13;
    SCOPED_TRACE("round " + std::to_string(round));
    expect_valid_plan(numels, max_tensors, max_blocks, chunk);
  }
}

TEST(CudaOptimizerPlanTest, BadLimitsThrow) {
  EXPECT_THROW(cuda::plan_multi_tensor({4}, 0, 8, 16), ValueError);
  EXPECT_THROW(cuda::plan_multi_tensor({4}, 8, cuda::kMultiTensorMaxBlocks + 1, 16), ValueError);
  EXPECT_THROW(cuda::plan_multi_tensor({4}, 8, 8, 0), ValueError);
  EXPECT_THROW(cuda::plan_multi_tensor({-1}), ValueError);
}

TEST(CudaOptimizerPlanTest, TableCarriesPointersCountsAndBlocks) {
  const std::vector<std::int64_t> numels = {3, 0, 40000};
  std::vector<float> a(3), b(40000);
  std::vector<float> out_a(3), out_b(40000);
  const std::vector<void*> operands[2] = {{a.data(), nullptr, b.data()},
                                          {out_a.data(), nullptr, out_b.data()}};
  const auto plan = cuda::plan_multi_tensor(numels);
  ASSERT_EQ(plan.size(), 1u);
  const auto table = cuda::make_multi_tensor_table(plan[0], operands, numels, {0.5f, 1.0f, 0.25f});
  EXPECT_EQ(table.tensors, 2);
  EXPECT_EQ(table.blocks, 4);  // 1 + ceil(40000 / 16384) = 1 + 3
  EXPECT_EQ(table.ptr[0][0], a.data());
  EXPECT_EQ(table.ptr[1][1], out_b.data());
  EXPECT_EQ(table.numel[1], 40000);
  EXPECT_EQ(table.clip_scale[0], 0.5f);
  EXPECT_EQ(table.clip_scale[1], 0.25f);
  EXPECT_EQ(table.block_tensor[3], 1);
  EXPECT_EQ(table.block_chunk[3], 2);
  const auto no_clip = cuda::make_multi_tensor_table(plan[0], operands, numels);
  EXPECT_EQ(no_clip.clip_scale[1], 1.0f);
}

// ---- the loss-scale rule against a model of DESIGN §2.5 written here ----

struct Model {
  double scale;
  std::int64_t counter = 0, skipped = 0, consecutive = 0;
  bool last = false;
  double max_scale;  // the largest finite power of two of the scale's type
  void step(bool non_finite, bool dynamic, std::int64_t growth) {
    if (non_finite) {
      ++skipped;
      ++consecutive;
      last = true;
      if (dynamic) {
        scale = scale / 2 < 1 ? 1 : scale / 2;
        counter = 0;
      }
      return;
    }
    consecutive = 0;
    last = false;
    if (!dynamic) return;
    if (++counter == growth) {
      if (scale * 2 <= max_scale) scale *= 2;
      counter = 0;
    }
  }
};

TEST(CudaOptimizerPlanTest, LossScaleRuleMatchesTheModelInFloatAndDouble) {
  for (bool dynamic : {true, false}) {
    const std::int64_t growth = 3;
    Model model{.scale = 8.0, .max_scale = 0x1p127};
    cuda::DeviceLossScale d{};
    d.scale = 8.0f;
    std::uint64_t x = 99;
    float largest = 0.0f;
    for (int step = 0; step < 1000; ++step) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      // Mostly finite steps, so the scale climbs to the float limit and must stop there.
      const bool non_finite = (x >> 40) % 40 == 0;
      model.step(non_finite, dynamic, growth);
      cuda::apply_loss_scale_rule(
          non_finite, dynamic ? cuda::LossScaleMode::dynamic : cuda::LossScaleMode::fixed, growth,
          d.scale, d.counter, d.skipped, d.consecutive_skipped, d.last_skipped);
      ASSERT_EQ(static_cast<double>(d.scale), model.scale) << "step " << step;
      ASSERT_TRUE(std::isfinite(d.scale));
      ASSERT_EQ(d.counter, model.counter);
      ASSERT_EQ(d.skipped, model.skipped);
      ASSERT_EQ(d.consecutive_skipped, model.consecutive);
      ASSERT_EQ(d.last_skipped != 0, model.last);
      largest = std::max(largest, d.scale);
    }
    if (dynamic) EXPECT_EQ(largest, 0x1p127f) << "the float scale reaches 2^127 and stops there";
    if (!dynamic) EXPECT_EQ(largest, 8.0f);
  }
}

TEST(CudaOptimizerPlanTest, LossScaleRuleHalvesToOneAndResetsTheCounter) {
  double scale = 4.0;
  std::int64_t counter = 2, skipped = 0, consecutive = 0;
  bool last = false;
  for (double expected : {2.0, 1.0, 1.0}) {
    cuda::apply_loss_scale_rule(true, cuda::LossScaleMode::dynamic, std::int64_t{5}, scale, counter,
                                skipped, consecutive, last);
    EXPECT_EQ(scale, expected);
    EXPECT_EQ(counter, 0);
    EXPECT_TRUE(last);
  }
  EXPECT_EQ(skipped, 3);
  EXPECT_EQ(consecutive, 3);
  cuda::apply_loss_scale_rule(false, cuda::LossScaleMode::dynamic, std::int64_t{5}, scale, counter,
                              skipped, consecutive, last);
  EXPECT_EQ(consecutive, 0);
  EXPECT_EQ(counter, 1);
  EXPECT_FALSE(last);
  EXPECT_EQ(skipped, 3);
}

TEST(CudaOptimizerPlanTest, DeviceStateMirrorsTheHostState) {
  using mixed_precision::detail::LossScaleState;
  const LossScaleState host{
      .scale = 1024.0, .counter = 17, .skipped = 5, .consecutive_skipped = 2, .last_skipped = true};
  const cuda::DeviceLossScale d = mixed_precision::detail::to_device_state(host);
  EXPECT_EQ(d.scale, 1024.0f);
  EXPECT_EQ(d.found_inf, 0);
  EXPECT_EQ(d.counter, 17);
  EXPECT_EQ(d.skipped, 5);
  EXPECT_EQ(d.consecutive_skipped, 2);
  EXPECT_EQ(d.last_skipped, 1);
  const LossScaleState back = mixed_precision::detail::from_device_state(d);
  EXPECT_EQ(back.scale, 1024.0);
  EXPECT_EQ(back.counter, 17);
  EXPECT_EQ(back.skipped, 5);
  EXPECT_EQ(back.consecutive_skipped, 2);
  EXPECT_TRUE(back.last_skipped);
  // A double scale past float's range is clamped to 2^127 rather than becoming Inf.
  EXPECT_EQ(mixed_precision::detail::to_device_state({.scale = 0x1p300}).scale, 0x1p127f);
}

// ---- per-step constants ----

TEST(CudaOptimizerPlanTest, AdamConstantsFollowTheBiasCorrection) {
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-7, wd = 0.004;
  for (std::int64_t iteration : {0, 1, 9, 999, 100000}) {
    const cpu::AdamStep step = optimizers::detail::adam_step(lr, iteration, b1, b2, eps, wd);
    const double t = static_cast<double>(iteration) + 1.0;
    const double alpha = lr * std::sqrt(1.0 - std::pow(b2, t)) / (1.0 - std::pow(b1, t));
    EXPECT_EQ(step.alpha, static_cast<float>(alpha)) << "iteration " << iteration;
    EXPECT_EQ(step.one_minus_beta_1, static_cast<float>(1.0 - b1));
    EXPECT_EQ(step.one_minus_beta_2, static_cast<float>(1.0 - b2));
    EXPECT_EQ(step.epsilon, static_cast<float>(eps));
    EXPECT_EQ(step.decay, static_cast<float>(wd * lr));
  }
  // t = 1: lr * sqrt(1 - b2) / (1 - b1) = 1e-3 * 0.0316228 / 0.1
  EXPECT_NEAR(optimizers::detail::adam_step(lr, 0, b1, b2, eps, 0).alpha, 3.16227766e-4, 1e-10);

  const cuda::DeviceUpdate u =
      cuda::device_update(optimizers::detail::adam_step(lr, 4, b1, b2, eps, wd));
  EXPECT_EQ(u.kind, cuda::UpdateKind::adam);
  EXPECT_EQ(u.constants.alpha, optimizers::detail::adam_step(lr, 4, b1, b2, eps, wd).alpha);
  EXPECT_EQ(u.constants.decay, static_cast<float>(wd * lr));
  EXPECT_TRUE(std::isinf(u.constants.clip_limit));
  EXPECT_EQ(cuda::update_slot_count(u.kind), 2);
}

TEST(CudaOptimizerPlanTest, SgdAndRmspropConstantsAndKinds) {
  const cpu::SGDStep sgd = optimizers::detail::sgd_step(0.1, 0.9, true);
  EXPECT_EQ(sgd.learning_rate, 0.1f);
  EXPECT_EQ(sgd.momentum, 0.9f);
  EXPECT_EQ(cuda::device_update(sgd, cuda::SgdVariant::nesterov).kind,
            cuda::UpdateKind::sgd_nesterov);
  EXPECT_EQ(cuda::device_update(sgd, cuda::SgdVariant::momentum).kind,
            cuda::UpdateKind::sgd_momentum);
  const cuda::DeviceUpdate plain = cuda::device_update(sgd, cuda::SgdVariant::plain);
  EXPECT_EQ(plain.kind, cuda::UpdateKind::sgd);
  EXPECT_EQ(plain.constants.learning_rate, 0.1f);
  EXPECT_EQ(cuda::update_slot_count(plain.kind), 0);

  const cpu::RMSpropStep rms = optimizers::detail::rmsprop_step(0.001, 0.9, 0.5, 1e-7);
  const cuda::DeviceUpdate r =
      cuda::device_update(rms, cuda::RmspropMomentum::with_momentum, cuda::RmspropCentered::yes);
  EXPECT_EQ(r.kind, cuda::UpdateKind::rmsprop_centered_momentum);
  EXPECT_EQ(cuda::update_slot_count(r.kind), 3);
  EXPECT_EQ(r.constants.rho, 0.9f);
  // 1 - rho in float, as the CPU loop computes it (not 0.1 rounded from double).
  EXPECT_EQ(r.constants.one_minus_rho, 1.0f - 0.9f);
  EXPECT_EQ(r.constants.learning_rate, 0.001f);
  EXPECT_EQ(r.constants.momentum, 0.5f);
  EXPECT_EQ(r.constants.epsilon, 1e-7f);
  EXPECT_EQ(cuda::device_update(rms, cuda::RmspropMomentum::none, cuda::RmspropCentered::no).kind,
            cuda::UpdateKind::rmsprop);
  EXPECT_EQ(cuda::device_update(rms, cuda::RmspropMomentum::none, cuda::RmspropCentered::yes).kind,
            cuda::UpdateKind::rmsprop_centered);
  EXPECT_EQ(cuda::update_slot_count(cuda::UpdateKind::rmsprop_centered), 2);
}

// ---- the kernels' per-element formulas against the CPU loops ----

struct Arrays {
  std::vector<float> var, grad, s0, s1, s2;
};

// Values in ranges where every formula is finite (velocities positive, centered averages small),
// with exact zeros and gradients past the clip limit among them.
Arrays random_arrays(std::size_t n, std::uint64_t seed) {
  auto next = [&](float lo, float hi) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * static_cast<float>((seed >> 40) & 0xffffff) / 16777216.0f;
  };
  Arrays a;
  for (std::size_t i = 0; i < n; ++i) {
    a.var.push_back(next(-1.0f, 1.0f));
    a.grad.push_back(i % 17 == 0 ? 0.0f : next(-3.0f, 3.0f));
    a.s0.push_back(next(0.5f, 1.0f));
    a.s1.push_back(next(0.0f, 0.5f));
    a.s2.push_back(next(-0.1f, 0.1f));
  }
  return a;
}

template <cuda::UpdateKind K>
void run_element_formula(const cuda::DeviceUpdate& u, Arrays& a, float clip_scale) {
  ASSERT_EQ(u.kind, K);
  for (std::size_t i = 0; i < a.var.size(); ++i) {
    cuda::update_element<K>(u.constants, a.grad[i], &a.var[i], &a.s0[i], &a.s1[i], &a.s2[i],
                            clip_scale);
  }
}

void expect_bit_identical(const std::vector<float>& got, const std::vector<float>& want,
                          const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    std::uint32_t g, w;
    std::memcpy(&g, &got[i], sizeof g);
    std::memcpy(&w, &want[i], sizeof w);
    ASSERT_EQ(g, w) << what << "[" << i << "]: " << got[i] << " vs " << want[i];
  }
}

void expect_same_arrays(const Arrays& got, const Arrays& want) {
  expect_bit_identical(got.var, want.var, "variable");
  expect_bit_identical(got.s0, want.s0, "slot 0");
  expect_bit_identical(got.s1, want.s1, "slot 1");
  expect_bit_identical(got.s2, want.s2, "slot 2");
}

const cpu::GradientTransform kTransforms[] = {{}, {.scale = 0.7f, .limit = 1.5f}};

cuda::DeviceUpdate with_clip(cuda::DeviceUpdate u, const cpu::GradientTransform& t) {
  u.constants.clip_limit = t.limit;
  return u;
}

TEST(CudaOptimizerPlanTest, SgdElementFormulasMatchTheCpuLoopsBitForBit) {
  const auto n = std::size_t{1003};
  const std::int64_t count = static_cast<std::int64_t>(n);
  for (const cpu::GradientTransform& t : kTransforms) {
    const cpu::SGDStep step = optimizers::detail::sgd_step(0.05, 0.9, false);
    const cpu::SGDStep nesterov = optimizers::detail::sgd_step(0.05, 0.9, true);
    {
      Arrays cpu_side = random_arrays(n, 1), gpu_side = cpu_side;
      cpu::sgd_update(cpu_side.var.data(), cpu_side.grad.data(), nullptr, count, t, step);
      run_element_formula<cuda::UpdateKind::sgd>(
          with_clip(cuda::device_update(step, cuda::SgdVariant::plain), t), gpu_side, t.scale);
      expect_same_arrays(gpu_side, cpu_side);
    }
    {
      Arrays cpu_side = random_arrays(n, 2), gpu_side = cpu_side;
      cpu::sgd_update(cpu_side.var.data(), cpu_side.grad.data(), cpu_side.s0.data(), count, t,
                      step);
      run_element_formula<cuda::UpdateKind::sgd_momentum>(
          with_clip(cuda::device_update(step, cuda::SgdVariant::momentum), t), gpu_side, t.scale);
      expect_same_arrays(gpu_side, cpu_side);
    }
    {
      Arrays cpu_side = random_arrays(n, 3), gpu_side = cpu_side;
      cpu::sgd_update(cpu_side.var.data(), cpu_side.grad.data(), cpu_side.s0.data(), count, t,
                      nesterov);
      run_element_formula<cuda::UpdateKind::sgd_nesterov>(
          with_clip(cuda::device_update(nesterov, cuda::SgdVariant::nesterov), t), gpu_side,
          t.scale);
      expect_same_arrays(gpu_side, cpu_side);
    }
  }
}

TEST(CudaOptimizerPlanTest, AdamElementFormulaMatchesTheCpuLoopBitForBit) {
  const auto n = std::size_t{1003};
  for (const cpu::GradientTransform& t : kTransforms) {
    for (double weight_decay : {0.0, 0.1}) {
      const cpu::AdamStep step =
          optimizers::detail::adam_step(0.01, 6, 0.9, 0.999, 1e-7, weight_decay);
      Arrays cpu_side = random_arrays(n, 4), gpu_side = cpu_side;
      cpu::adam_update(cpu_side.var.data(), cpu_side.grad.data(), cpu_side.s0.data(),
                       cpu_side.s1.data(), static_cast<std::int64_t>(n), t, step);
      run_element_formula<cuda::UpdateKind::adam>(with_clip(cuda::device_update(step), t), gpu_side,
                                                  t.scale);
      expect_same_arrays(gpu_side, cpu_side);
    }
  }
}

TEST(CudaOptimizerPlanTest, RmspropElementFormulasMatchTheCpuLoopsBitForBit) {
  const auto n = std::size_t{1003};
  const cpu::RMSpropStep step = optimizers::detail::rmsprop_step(0.01, 0.9, 0.5, 1e-7);
  for (const cpu::GradientTransform& t : kTransforms) {
    for (bool centered : {false, true}) {
      for (bool momentum : {false, true}) {
        SCOPED_TRACE(std::string(centered ? "centered" : "plain") +
                     (momentum ? " with momentum" : ""));
        Arrays cpu_side = random_arrays(n, 5), gpu_side = cpu_side;
        // The CPU slot order: velocity, momentum (if any), average gradient (if centered).
        float* cpu_momentum = momentum ? cpu_side.s1.data() : nullptr;
        float* cpu_average =
            centered ? (momentum ? cpu_side.s2.data() : cpu_side.s1.data()) : nullptr;
        cpu::rmsprop_update(cpu_side.var.data(), cpu_side.grad.data(), cpu_side.s0.data(),
                            cpu_momentum, cpu_average, static_cast<std::int64_t>(n), t, step);
        const cuda::DeviceUpdate u = with_clip(
            cuda::device_update(
                step, momentum ? cuda::RmspropMomentum::with_momentum : cuda::RmspropMomentum::none,
                centered ? cuda::RmspropCentered::yes : cuda::RmspropCentered::no),
            t);
        if (centered && momentum) {
          run_element_formula<cuda::UpdateKind::rmsprop_centered_momentum>(u, gpu_side, t.scale);
        } else if (centered) {
          run_element_formula<cuda::UpdateKind::rmsprop_centered>(u, gpu_side, t.scale);
        } else if (momentum) {
          run_element_formula<cuda::UpdateKind::rmsprop_momentum>(u, gpu_side, t.scale);
        } else {
          run_element_formula<cuda::UpdateKind::rmsprop>(u, gpu_side, t.scale);
        }
        expect_same_arrays(gpu_side, cpu_side);
      }
    }
  }
}

TEST(CudaOptimizerPlanTest, ClippingKeepsNaNAndClampsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cuda::transformed_gradient(5.0f, 1.0f, 2.0f), 2.0f);
  EXPECT_EQ(cuda::transformed_gradient(-5.0f, 1.0f, 2.0f), -2.0f);
  EXPECT_EQ(cuda::transformed_gradient(3.0f, 0.5f, inf), 1.5f);
  EXPECT_EQ(cuda::transformed_gradient(-inf, 1.0f, inf), -inf);
  EXPECT_TRUE(std::isnan(cuda::transformed_gradient(std::nanf(""), 1.0f, 2.0f)));
}

}  // namespace
}  // namespace mixprec
