// The CPU's multi-tensor training loops (one parallel region per call over every tensor): the
// update of many variables equals each variable's own update and the scalar element body bit for
// bit, through cpu::update_all and the backend table's multi_tensor_update; unscale-and-check and
// the sums of squares over many tensors equal the per-tensor results; parallel_for runs every
// index once and enters no OpenMP region below its threshold.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/optimizer_kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/training_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using kernel_math::UpdateKind;
using kernel_math::UpdateRule;

// Odd sizes around the block (2^14) and the parallel threshold (2^15), and tiny ones.
const std::vector<std::int64_t> kSizes = {1, 7, 16383, 16384, 16385, 3, 40000, 100003, 64};

UpdateRule rule_of(UpdateKind kind) {
  UpdateRule r;
  r.kind = kind;
  r.constants.learning_rate = 0.01f;
  r.constants.momentum = 0.9f;
  r.constants.alpha = 3.1e-4f;
  r.constants.one_minus_beta_1 = 0.1f;
  r.constants.one_minus_beta_2 = 0.001f;
  r.constants.epsilon = 1e-7f;
  r.constants.decay = 4e-5f;
  r.constants.rho = 0.9f;
  r.constants.one_minus_rho = 1.0f - 0.9f;
  r.constants.clip_limit = 0.5f;  // clipvalue: some gradients are clipped
  return r;
}

// One variable's arrays: variable, gradient and three slots, n elements each.
struct Variable {
  std::vector<float> var, grad, s0, s1, s2;
};

Variable random_variable(std::int64_t n, std::uint64_t seed) {
  Generator gen(seed);
  Variable v;
  for (auto* a : {&v.var, &v.grad, &v.s0, &v.s1, &v.s2}) {
    a->resize(static_cast<std::size_t>(n));
    for (float& x : *a) x = static_cast<float>(gen.normal());
  }
  for (float& x : v.s1) x = x * x;  // Adam's v and RMSprop's velocity are non-negative
  for (float& x : v.s0) x = x * x;
  return v;
}

cpu::UpdateArrays arrays_of(Variable& v, float clip_scale) {
  return {v.var.data(),
          v.grad.data(),
          {v.s0.data(), v.s1.data(), v.s2.data()},
          static_cast<std::int64_t>(v.var.size()),
          clip_scale};
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
}

void expect_same_variables(const std::vector<Variable>& got, const std::vector<Variable>& want) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::string at = "variable " + std::to_string(i);
    expect_same_bits(got[i].var, want[i].var, at + " value");
    expect_same_bits(got[i].s0, want[i].s0, at + " slot 0");
    expect_same_bits(got[i].s1, want[i].s1, at + " slot 1");
    expect_same_bits(got[i].s2, want[i].s2, at + " slot 2");
  }
}

// The scalar element body over one variable, element by element.
void scalar_update(const UpdateRule& rule, Variable& v, float clip_scale) {
  kernel_math::dispatch_update_kind(rule.kind, [&]<UpdateKind K>() {
    for (std::size_t i = 0; i < v.var.size(); ++i) {
      kernel_math::update_element<K>(rule.constants, v.grad[i], &v.var[i], &v.s0[i], &v.s1[i],
                                     &v.s2[i], clip_scale);
    }
  });
}

TEST(MultiTensorKernels, UpdateOfManyVariablesEqualsEachOwnUpdateBitForBit) {
  for (int k = 0; k <= static_cast<int>(UpdateKind::rmsprop_centered_momentum); ++k) {
    const UpdateRule rule = rule_of(static_cast<UpdateKind>(k));
    SCOPED_TRACE("kind " + std::to_string(k));
    std::vector<Variable> multi, single, scalar;
    for (std::size_t i = 0; i < kSizes.size(); ++i) multi.push_back(random_variable(kSizes[i], i));
    single = scalar = multi;
    std::vector<cpu::UpdateArrays> all;
    for (std::size_t i = 0; i < multi.size(); ++i) {
      const float clip_scale = i % 2 == 0 ? 1.0f : 0.75f;
      all.push_back(arrays_of(multi[i], clip_scale));
      const cpu::UpdateArrays one = arrays_of(single[i], clip_scale);
      cpu::update_all(rule, std::span(&one, 1));
      scalar_update(rule, scalar[i], clip_scale);
    }
    cpu::update_all(rule, all);
    expect_same_variables(multi, single);
    expect_same_variables(multi, scalar);
  }
}

Tensor tensor_of(const std::vector<float>& v) {
  return from_vector(v, Shape{static_cast<std::int64_t>(v.size())});
}

TEST(MultiTensorKernels, BackendMultiTensorUpdateEqualsOneOperandAtATime) {
  const UpdateRule rule = rule_of(UpdateKind::adam);
  std::vector<UpdateOperand> together, apart;
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    const Variable v = random_variable(kSizes[i], 100 + i);
    for (auto* ops : {&together, &apart}) {
      UpdateOperand op;
      op.variable = tensor_of(v.var);  // a fresh tensor per list: updated in place
      op.gradient = tensor_of(v.grad);
      op.slots[0] = tensor_of(v.s0);
      op.slots[1] = tensor_of(v.s1);
      op.clip_scale = 0.5f;
      ops->push_back(op);
    }
  }
  const TrainingKernels& kernels = *backend_for(Device::cpu()).training;
  kernels.multi_tensor_update(rule, together, Tensor());
  for (const UpdateOperand& op : apart) kernels.multi_tensor_update(rule, std::span(&op, 1), {});
  for (std::size_t i = 0; i < together.size(); ++i) {
    expect_same_bits(together[i].variable.to_vector<float>(), apart[i].variable.to_vector<float>(),
                     "variable " + std::to_string(i));
    expect_same_bits(together[i].slots[1].to_vector<float>(), apart[i].slots[1].to_vector<float>(),
                     "slot 1 of " + std::to_string(i));
  }
  // A variable missing a slot of its rule is refused before anything is written.
  UpdateOperand missing = together[0];
  missing.slots[1] = Tensor();
  const std::vector<float> before = together[0].variable.to_vector<float>();
  EXPECT_THROW(kernels.multi_tensor_update(rule, std::span(&missing, 1), {}), ValueError);
  expect_same_bits(together[0].variable.to_vector<float>(), before, "refused update");
}

TEST(MultiTensorKernels, UnscaleOfManyGradientsEqualsEachAloneAndFindsOneBadValue) {
  std::vector<Tensor> grads, outs, alone;
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    Tensor g = tensor_of(random_variable(kSizes[i], 200 + i).grad);
    if (i == 4) g = g.to(DType::bfloat16);  // the portable 16-bit path among float32 ones
    grads.push_back(g);
    outs.push_back(core::make_tensor(g.shape(), DType::float32, Device::cpu()));
    alone.push_back(core::make_tensor(g.shape(), DType::float32, Device::cpu()));
  }
  const double scale = 1000.0;
  EXPECT_TRUE(cpu::unscale_and_check_all(grads, scale, outs));
  for (std::size_t i = 0; i < grads.size(); ++i) {
    EXPECT_TRUE(cpu::unscale_and_check(grads[i], scale, alone[i]));
    expect_same_bits(outs[i].to_vector<float>(), alone[i].to_vector<float>(),
                     "gradient " + std::to_string(i));
  }
  EXPECT_TRUE(cpu::unscale_and_check_all(grads, 1.0, {}));
  // One Inf in the last element of one large gradient among many finite ones.
  std::vector<float> bad = grads[7].to_vector<float>();
  bad.back() = std::numeric_limits<float>::infinity();
  grads[7] = tensor_of(bad);
  EXPECT_FALSE(cpu::unscale_and_check_all(grads, scale, outs));
  EXPECT_FALSE(cpu::unscale_and_check_all(grads, 1.0, {}));
  // Every other gradient is still unscaled.
  expect_same_bits(outs[8].to_vector<float>(), alone[8].to_vector<float>(), "gradient 8");
}

TEST(MultiTensorKernels, SumsOfSquaresOfManyArraysEqualEachAlone) {
  std::vector<Variable> vars;
  std::vector<std::pair<const float*, std::int64_t>> arrays;
  for (std::size_t i = 0; i < kSizes.size(); ++i)
    vars.push_back(random_variable(kSizes[i], 300 + i));
  for (const Variable& v : vars)
    arrays.emplace_back(v.var.data(), static_cast<std::int64_t>(v.var.size()));
  arrays.emplace_back(nullptr, 0);  // an undefined tensor sums to 0
  const std::vector<double> sums = cpu::sums_of_squares(arrays);
  ASSERT_EQ(sums.size(), arrays.size());
  for (std::size_t i = 0; i + 1 < arrays.size(); ++i) {
    EXPECT_EQ(sums[i], cpu::sum_of_squares(arrays[i].first, arrays[i].second)) << i;
    EXPECT_GT(sums[i], 0.0) << i;
  }
  EXPECT_EQ(sums.back(), 0.0);
}

TEST(ParallelFor, RunsEveryIndexOnceAndNoRegionWhenSmall) {
  for (const bool parallel : {false, true}) {
    const std::int64_t n = 1000;
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    std::atomic<int> inside{0};
    cpu::parallel_for(n, parallel, [&](std::int64_t i) {
      hits[static_cast<std::size_t>(i)]++;
      if (omp_in_parallel()) inside++;
    });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)], 1) << i;
    if (!parallel) EXPECT_EQ(inside, 0) << "a small loop entered an OpenMP region";
    if (parallel && omp_get_max_threads() > 1) EXPECT_EQ(inside, n);
  }
  // One iteration never starts a team, even when asked to run in parallel.
  bool in_region = true;
  cpu::parallel_for(1, true, [&](std::int64_t) { in_region = omp_in_parallel() != 0; });
  EXPECT_FALSE(in_region);
  for (const bool parallel : {false, true}) {
    EXPECT_TRUE(cpu::parallel_any(500, parallel, [](std::int64_t i) { return i == 499; }));
    EXPECT_FALSE(cpu::parallel_any(500, parallel, [](std::int64_t) { return false; }));
  }
}

}  // namespace
}  // namespace mixprec
