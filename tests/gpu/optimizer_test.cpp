// The optimizers on CUDA variables (one fused multi-tensor update per step) against the same
// optimizers on CPU copies: several steps with the same gradients, then variables and every slot
// compared within float32 rounding (the kernels repeat the CPU arithmetic operation for operation,
// so they are expected to agree to the bit; the test allows 1e-6 relative). Variable lists cover
// a tensor larger than one launch table, more tensors than one table holds, sizes that are not
// multiples of anything, 16-bit gradients and undefined gradients. Each case is a set of optimizer
// options: every update formula and every kind of clipping appears.
#include <functional>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

constexpr Tolerance kUpdateTolerance{1e-6, 1e-12};

std::vector<Shape> mixed_shapes() {
  return {Shape{3}, Shape{17, 5}, Shape{2 * 16384 + 7}, Shape{1}, Shape{128, 64}};
}

std::vector<Shape> large_shapes() {
  // (400 * 16384 + 3) elements need more than one table of 384 chunks of 16384.
  return {Shape{1000}, Shape{17}, Shape{400 * 16384 + 3}, Shape{5}};
}

std::vector<Shape> many_shapes() {
  std::vector<Shape> shapes;
  for (int i = 0; i < 41; ++i) shapes.push_back(Shape{1 + (i * 37) % 300});
  return shapes;
}

struct Pair {
  std::vector<Tensor> cpu, gpu;
};

Pair variables(const std::vector<Shape>& shapes) {
  Pair p;
  std::uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Tensor v = sample(s, -1.0, 1.0, DType::float32, seed++);
    v.set_requires_grad(true);
    p.cpu.push_back(v);
    p.gpu.push_back(on_gpu(v, true));
  }
  return p;
}

// Gradients of step `step`: float32 (or `dtype`, rounded on the host so both backends read the
// same values); variable `undefined_index` gets none.
Pair gradients(const std::vector<Shape>& shapes, int step, DType dtype, int undefined_index = -1) {
  Pair p;
  std::uint64_t seed = 1000 + 100 * static_cast<std::uint64_t>(step);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (static_cast<int>(i) == undefined_index) {
      p.cpu.emplace_back();
      p.gpu.emplace_back();
      continue;
    }
    const Tensor g = sample(shapes[i], -3.0, 3.0, dtype, seed++);
    p.cpu.push_back(g);
    p.gpu.push_back(on_gpu(g));
  }
  return p;
}

void expect_same_state(optimizers::Optimizer& on_gpu_opt, optimizers::Optimizer& on_cpu_opt,
                       const Pair& vars) {
  for (std::size_t i = 0; i < vars.cpu.size(); ++i) {
    EXPECT_TRUE(matches(vars.gpu[i], vars.cpu[i].detach(), kUpdateTolerance)) << "variable " << i;
  }
  const optimizers::OptimizerState g = on_gpu_opt.get_state(), c = on_cpu_opt.get_state();
  EXPECT_EQ(g.iterations, c.iterations);
  ASSERT_EQ(g.slots.size(), c.slots.size());
  for (std::size_t k = 0; k < g.slots.size(); ++k) {
    EXPECT_EQ(g.slots[k].name, c.slots[k].name);
    EXPECT_TRUE(g.slots[k].value.device().is_cpu()) << "get_state copies slots to the host";
    EXPECT_TRUE(all_close(g.slots[k].value, c.slots[k].value, kUpdateTolerance))
        << "slot " << g.slots[k].name;
  }
}

struct Case {
  std::string name;
  std::function<optimizers::Optimizer()> make;
};

std::vector<Case> cases() {
  using namespace optimizers;
  return {
      {"sgd", [] { return SGD({.learning_rate = 0.1}); }},
      {"sgd momentum", [] { return SGD({.learning_rate = 0.05, .momentum = 0.9}); }},
      {"sgd nesterov",
       [] { return SGD({.learning_rate = 0.05, .momentum = 0.8, .nesterov = true}); }},
      {"sgd clipvalue", [] { return SGD({.learning_rate = 0.1, .clipvalue = 0.5}); }},
      {"adam", [] { return Adam({.learning_rate = 0.01}); }},
      {"adam clipnorm", [] { return Adam({.learning_rate = 0.01, .clipnorm = 1.0}); }},
      {"adamw", [] { return AdamW({.learning_rate = 0.01, .weight_decay = 0.1}); }},
      {"rmsprop", [] { return RMSprop({.learning_rate = 0.01}); }},
      {"rmsprop momentum", [] { return RMSprop({.learning_rate = 0.01, .momentum = 0.5}); }},
      {"rmsprop centered", [] { return RMSprop({.learning_rate = 0.01, .centered = true}); }},
      {"rmsprop centered momentum global_clipnorm",
       [] {
         return RMSprop(
             {.learning_rate = 0.01, .momentum = 0.3, .centered = true, .global_clipnorm = 2.0});
       }},
  };
}

void run_case(const Case& c, const std::vector<Shape>& shapes, DType grad_dtype, int steps) {
  SCOPED_TRACE(c.name + ", gradients " + std::string(dtype_name(grad_dtype)));
  Pair vars = variables(shapes);
  optimizers::Optimizer cpu_opt = c.make(), gpu_opt = c.make();
  for (int step = 0; step < steps; ++step) {
    // Step 1 leaves variable 1 without a gradient (its slots must not move).
    const Pair grads = gradients(shapes, step, grad_dtype, step == 1 ? 1 : -1);
    cpu_opt.apply_gradients(grads.cpu, vars.cpu);
    gpu_opt.apply_gradients(grads.gpu, vars.gpu);
  }
  EXPECT_EQ(gpu_opt.iterations(), steps);
  expect_same_state(gpu_opt, cpu_opt, vars);
}

TEST(GpuOptimizerTest, EveryUpdateMatchesTheCpuOverSeveralSteps) {
  MIXPREC_REQUIRE_GPU();
  for (const Case& c : cases()) run_case(c, mixed_shapes(), DType::float32, 4);
}

TEST(GpuOptimizerTest, ATensorLargerThanOneLaunchHolds) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<Case> all = cases();
  for (std::size_t i : {2u, 5u, 10u}) run_case(all[i], large_shapes(), DType::float32, 2);
}

TEST(GpuOptimizerTest, MoreTensorsThanOneLaunchHolds) {
  MIXPREC_REQUIRE_GPU();
  for (const Case& c : cases()) run_case(c, many_shapes(), DType::float32, 3);
}

TEST(GpuOptimizerTest, HalfPrecisionGradientsAreReadAsFloat32) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<Case> all = cases();
  run_case(all[4], {Shape{1000}, Shape{33}}, DType::float16, 3);   // adam
  run_case(all[8], {Shape{1000}, Shape{33}}, DType::bfloat16, 3);  // rmsprop momentum
}

TEST(GpuOptimizerTest, SlotsLiveOnTheVariablesDevice) {
  MIXPREC_REQUIRE_GPU();
  Pair vars = variables({Shape{10}});
  optimizers::Optimizer opt = optimizers::Adam();
  opt.build(vars.gpu);
  opt.apply_gradients(gradients({Shape{10}}, 0, DType::float32).gpu, vars.gpu);
  EXPECT_TRUE(vars.gpu[0].device() == kGpu);
  EXPECT_EQ(opt.get_state().slots.size(), 2u);
}

TEST(GpuOptimizerTest, StateRoundTripsThroughTheHost) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<Shape> shapes = {Shape{50}, Shape{7, 3}};
  Pair vars = variables(shapes);
  optimizers::Optimizer cpu_opt = optimizers::RMSprop({.momentum = 0.5});
  optimizers::Optimizer gpu_opt = optimizers::RMSprop({.momentum = 0.5});
  for (int step = 0; step < 2; ++step) {
    const Pair g = gradients(shapes, step, DType::float32);
    cpu_opt.apply_gradients(g.cpu, vars.cpu);
    gpu_opt.apply_gradients(g.gpu, vars.gpu);
  }
  // A fresh GPU optimizer restored from the exported state continues as the CPU one does.
  optimizers::Optimizer restored = optimizers::RMSprop({.momentum = 0.5});
  restored.set_state(gpu_opt.get_state());
  for (int step = 2; step < 4; ++step) {
    const Pair g = gradients(shapes, step, DType::float32);
    cpu_opt.apply_gradients(g.cpu, vars.cpu);
    restored.apply_gradients(g.gpu, vars.gpu);
  }
  expect_same_state(restored, cpu_opt, vars);
}

TEST(GpuOptimizerTest, MixedDevicesAreADeviceErrorNamingBoth) {
  MIXPREC_REQUIRE_GPU();
  Pair vars = variables({Shape{4}, Shape{4}});
  optimizers::Optimizer opt = optimizers::SGD();
  const Pair g = gradients({Shape{4}, Shape{4}}, 0, DType::float32);
  try {
    opt.apply_gradients({g.gpu[0], g.cpu[1]}, {vars.gpu[0], vars.cpu[1]});
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cuda:0"), std::string::npos) << message;
    EXPECT_NE(message.find("cpu"), std::string::npos) << message;
  }
  // A CPU gradient for a GPU variable.
  EXPECT_THROW(opt.apply_gradients({g.cpu[0]}, {vars.gpu[0]}), DeviceError);
}

}  // namespace
}  // namespace mixprec::testing
