// The CPU instance of TrainingKernels (backend/training_kernels.h): the loss-scale state in host
// memory, the found_inf flag as the one skip mechanism (set by unscale/check, read by the update,
// cleared by the loss-scale step) and the aliasing views of the scale and the flag.
#include "backend/training_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/backend.h"
#include "mixprec/mixprec.h"
#include "optimizers/update_constants.h"

namespace mixprec {
namespace {

using kernel_math::LossScaleState;

Tensor f32(const std::vector<float>& v) {
  return from_vector(v, Shape{static_cast<std::int64_t>(v.size())});
}

const TrainingKernels& cpu_training() { return *backend_for(Device::cpu()).training; }

TEST(TrainingKernelsTest, TheCpuTableIsComplete) {
  const TrainingKernels& k = cpu_training();
  EXPECT_NE(k.multi_tensor_update, nullptr);
  EXPECT_NE(k.unscale_and_check, nullptr);
  EXPECT_NE(k.check_finite, nullptr);
  EXPECT_NE(k.sums_of_squares, nullptr);
  EXPECT_NE(k.make_loss_scale_state, nullptr);
  EXPECT_NE(k.write_loss_scale_state, nullptr);
  EXPECT_NE(k.read_loss_scale_state, nullptr);
  EXPECT_NE(k.loss_scale_step, nullptr);
}

TEST(TrainingKernelsTest, TheFoundInfFlagSkipsTheUpdateAndTheStepClearsIt) {
  const TrainingKernels& k = cpu_training();
  const Tensor state = k.make_loss_scale_state(Device::cpu(), {.scale = 4.0f});
  EXPECT_EQ(state.dtype(), DType::int64);
  EXPECT_EQ(state.numel(), 6);
  EXPECT_EQ(loss_scale_view(state).item(), 4.0);
  const std::vector<Tensor> unscaled =
      k.unscale_and_check({f32({8.0f, std::numeric_limits<float>::infinity()})}, state);
  EXPECT_EQ(k.read_loss_scale_state(state).found_inf, 1);
  EXPECT_EQ(found_inf_view(state).item(), 1.0);
  EXPECT_EQ(unscaled[0].to_vector<float>()[0], 2.0f);

  Tensor var = f32({1.0f, 1.0f});
  const Tensor grad = f32({1.0f, 1.0f});
  const kernel_math::UpdateRule rule = optimizers::detail::sgd_rule(0.5, 0.0, false);
  const UpdateOperand op{.variable = var, .gradient = grad, .clip_scale = 1.0f, .slots = {}};
  k.multi_tensor_update(rule, {&op, 1}, found_inf_view(state));
  EXPECT_EQ(var.to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));  // skipped

  k.loss_scale_step(state, {.mode = kernel_math::LossScaleMode::dynamic, .growth_steps = 2});
  const LossScaleState after = k.read_loss_scale_state(state);
  EXPECT_EQ(after.found_inf, 0);
  EXPECT_EQ(after.scale, 2.0f);
  EXPECT_EQ(after.skipped, 1);
  EXPECT_EQ(loss_scale_view(state).item(), 2.0);  // the view aliases the state

  k.check_finite({grad}, state);
  EXPECT_EQ(found_inf_view(state).item(), 0.0);
  k.multi_tensor_update(rule, {&op, 1}, found_inf_view(state));
  EXPECT_EQ(var.to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));  // applied
  k.multi_tensor_update(rule, {&op, 1}, Tensor());                      // no flag: applied
  EXPECT_EQ(var.to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
}

TEST(TrainingKernelsTest, CheckFiniteSeesFloat64ValuesPastFloat32Range) {
  const TrainingKernels& k = cpu_training();
  const Tensor state = k.make_loss_scale_state(Device::cpu(), {});
  k.check_finite({f32({1.0f}).to(DType::float64) * 1e300}, state);
  EXPECT_EQ(k.read_loss_scale_state(state).found_inf, 1);
  k.check_finite({Tensor(), f32({1.0f}).to(DType::float16)}, state);
  EXPECT_EQ(k.read_loss_scale_state(state).found_inf, 0);
}

TEST(TrainingKernelsTest, WriteAndReadRoundTrip) {
  const TrainingKernels& k = cpu_training();
  const Tensor state = k.make_loss_scale_state(Device::cpu(), {});
  k.write_loss_scale_state(state, {.scale = 0x1p127f,
                                   .found_inf = 0,
                                   .counter = 7,
                                   .skipped = 5,
                                   .consecutive_skipped = 2,
                                   .last_skipped = 1});
  const LossScaleState s = k.read_loss_scale_state(state);
  EXPECT_EQ(s.scale, 0x1p127f);
  EXPECT_EQ(s.counter, 7);
  EXPECT_EQ(s.skipped, 5);
  EXPECT_EQ(s.consecutive_skipped, 2);
  EXPECT_EQ(s.last_skipped, 1);
  EXPECT_EQ(k.sums_of_squares(Device::cpu(), {f32({3.0f, 4.0f}), Tensor()}),
            (std::vector<double>{25.0, 0.0}));
}

}  // namespace
}  // namespace mixprec
