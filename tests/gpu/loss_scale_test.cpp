// LossScaleOptimizer on CUDA tensors: the loss-scale state lives on the device. Inf and NaN
// injected into one gradient on the device: the step is skipped (variables and slots bit-
// identical), the scale halves, iterations advance; growth after growth_steps finite steps; a
// fixed scale; the whole sequence against the CPU LossScaleOptimizer; get_state/set_state; and the
// step enqueues only: it is recorded inside a CUDA stream capture, where any synchronisation with
// the GPU would fail.
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

using mixed_precision::LossScaleOptimizer;

const std::vector<Shape> kShapes = {Shape{5}, Shape{40000}, Shape{3, 7}};

std::vector<Tensor> gpu_variables() {
  std::vector<Tensor> vars;
  std::uint64_t seed = 3;
  for (const Shape& s : kShapes)
    vars.push_back(on_gpu(sample(s, -1.0, 1.0, DType::float32, seed++), true));
  return vars;
}

std::vector<Tensor> cpu_copies(const std::vector<Tensor>& gpu) {
  std::vector<Tensor> out;
  for (const Tensor& v : gpu) {
    Tensor c = on_cpu(v);
    c.set_requires_grad(true);
    out.push_back(c);
  }
  return out;
}

enum class Inject { none, inf, nan };

// Gradients of step `step` multiplied by `scale` (as the backward pass of a scaled loss gives
// them), on the CPU; with Inject, element 123 of gradient 1 is replaced by Inf or NaN.
std::vector<Tensor> scaled_gradients(int step, double scale, Inject inject) {
  std::vector<Tensor> grads;
  std::uint64_t seed = 500 + 10 * static_cast<std::uint64_t>(step);
  for (std::size_t i = 0; i < kShapes.size(); ++i) {
    std::vector<float> v = sample(kShapes[i], -1.0, 1.0, DType::float32, seed++).to_vector<float>();
    for (float& x : v) x = static_cast<float>(x * scale);
    if (i == 1 && inject != Inject::none) {
      v[123] = inject == Inject::inf ? std::numeric_limits<float>::infinity()
                                     : std::numeric_limits<float>::quiet_NaN();
    }
    grads.push_back(from_vector(v, kShapes[i]));
  }
  return grads;
}

std::vector<Tensor> to_gpu(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(on_gpu(t));
  return out;
}

// The bytes of a tensor, copied to the host.
std::vector<std::uint32_t> bits(const Tensor& t) {
  const std::vector<float> v = on_cpu(t).to_vector<float>();
  std::vector<std::uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

struct Snapshot {
  std::vector<std::vector<std::uint32_t>> variables, slots;
};

Snapshot snapshot(const std::vector<Tensor>& vars, const LossScaleOptimizer& opt) {
  Snapshot s;
  for (const Tensor& v : vars) s.variables.push_back(bits(v));
  for (const auto& slot : opt.inner_optimizer().get_state().slots)
    s.slots.push_back(bits(slot.value));
  return s;
}

void step(LossScaleOptimizer& opt, const std::vector<Tensor>& vars, int index, Inject inject) {
  const std::vector<Tensor> grads = to_gpu(scaled_gradients(index, opt.loss_scale(), inject));
  opt.apply_gradients(opt.get_unscaled_gradients(grads), vars);
}

TEST(GpuLossScaleTest, InjectedInfAndNaNSkipTheStepHalveTheScaleAndLeaveEverythingBitIdentical) {
  MIXPREC_REQUIRE_GPU();
  for (Inject inject : {Inject::inf, Inject::nan}) {
    SCOPED_TRACE(inject == Inject::inf ? "Inf" : "NaN");
    std::vector<Tensor> vars = gpu_variables();
    LossScaleOptimizer opt(optimizers::Adam({.learning_rate = 0.01}), {.initial_scale = 1024.0});
    step(opt, vars, 0, Inject::none);  // slots become non-zero
    ASSERT_EQ(opt.loss_scale(), 1024.0);
    ASSERT_EQ(opt.dynamic_counter(), 1);
    const Snapshot before = snapshot(vars, opt);

    step(opt, vars, 1, inject);
    EXPECT_EQ(opt.loss_scale(), 512.0);
    EXPECT_EQ(opt.dynamic_counter(), 0);
    EXPECT_EQ(opt.skipped_steps(), 1);
    EXPECT_EQ(opt.consecutive_skipped_steps(), 1);
    EXPECT_TRUE(opt.last_step_skipped());
    EXPECT_EQ(opt.iterations(), 2);
    const Snapshot after = snapshot(vars, opt);
    EXPECT_EQ(after.variables, before.variables) << "a skipped step must not touch the weights";
    EXPECT_EQ(after.slots, before.slots) << "a skipped step must not touch the slots";

    step(opt, vars, 2, Inject::none);  // applied again
    EXPECT_FALSE(opt.last_step_skipped());
    EXPECT_EQ(opt.consecutive_skipped_steps(), 0);
    EXPECT_EQ(opt.loss_scale(), 512.0);
    EXPECT_NE(snapshot(vars, opt).variables, before.variables);
  }
}

TEST(GpuLossScaleTest, GrowsAfterGrowthStepsAndHalvesToOne) {
  MIXPREC_REQUIRE_GPU();
  std::vector<Tensor> vars = gpu_variables();
  LossScaleOptimizer opt(optimizers::SGD(), {.initial_scale = 4.0, .dynamic_growth_steps = 3});
  for (int i = 0; i < 3; ++i) step(opt, vars, i, Inject::none);
  EXPECT_EQ(opt.loss_scale(), 8.0);
  EXPECT_EQ(opt.dynamic_counter(), 0);
  step(opt, vars, 3, Inject::none);
  EXPECT_EQ(opt.dynamic_counter(), 1);
  for (int i = 0; i < 5; ++i) step(opt, vars, 4 + i, Inject::inf);
  EXPECT_EQ(opt.loss_scale(), 1.0) << "8 halved five times stops at the floor of 1";
  EXPECT_EQ(opt.skipped_steps(), 5);
  EXPECT_EQ(opt.consecutive_skipped_steps(), 5);
  EXPECT_EQ(opt.iterations(), 9);
}

TEST(GpuLossScaleTest, FixedScaleSkipsAndCounts) {
  MIXPREC_REQUIRE_GPU();
  std::vector<Tensor> vars = gpu_variables();
  LossScaleOptimizer opt(optimizers::SGD(), {.dynamic = false, .initial_scale = 100.0});
  step(opt, vars, 0, Inject::none);
  const Snapshot before = snapshot(vars, opt);
  step(opt, vars, 1, Inject::nan);
  EXPECT_EQ(opt.loss_scale(), 100.0);
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_EQ(snapshot(vars, opt).variables, before.variables);
}

TEST(GpuLossScaleTest, ASequenceMatchesTheCpuLossScaleOptimizer) {
  MIXPREC_REQUIRE_GPU();
  std::vector<Tensor> gpu_vars = gpu_variables();
  std::vector<Tensor> cpu_vars = cpu_copies(gpu_vars);
  const mixed_precision::LossScaleOptions options{.initial_scale = 256.0,
                                                  .dynamic_growth_steps = 2};
  LossScaleOptimizer gpu_opt(optimizers::RMSprop({.learning_rate = 0.01, .momentum = 0.5}),
                             options);
  LossScaleOptimizer cpu_opt(optimizers::RMSprop({.learning_rate = 0.01, .momentum = 0.5}),
                             options);
  const std::vector<Inject> pattern = {Inject::none, Inject::none, Inject::inf,  Inject::nan,
                                       Inject::none, Inject::none, Inject::none, Inject::inf};
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const double scale = cpu_opt.loss_scale();
    ASSERT_EQ(gpu_opt.loss_scale(), scale);
    const std::vector<Tensor> grads = scaled_gradients(static_cast<int>(i), scale, pattern[i]);
    cpu_opt.apply_gradients(cpu_opt.get_unscaled_gradients(grads), cpu_vars);
    gpu_opt.apply_gradients(gpu_opt.get_unscaled_gradients(to_gpu(grads)), gpu_vars);
    EXPECT_EQ(gpu_opt.dynamic_counter(), cpu_opt.dynamic_counter());
    EXPECT_EQ(gpu_opt.skipped_steps(), cpu_opt.skipped_steps());
    EXPECT_EQ(gpu_opt.last_step_skipped(), cpu_opt.last_step_skipped());
  }
  for (std::size_t i = 0; i < gpu_vars.size(); ++i) {
    EXPECT_TRUE(matches(gpu_vars[i], cpu_vars[i].detach(), {1e-6, 1e-12})) << "variable " << i;
  }
}

TEST(GpuLossScaleTest, GradientsNotFromGetUnscaledGradientsAreCheckedInApply) {
  MIXPREC_REQUIRE_GPU();
  std::vector<Tensor> vars = gpu_variables();
  LossScaleOptimizer opt(optimizers::SGD(), {.initial_scale = 64.0});
  const Snapshot before = snapshot(vars, opt);
  opt.apply_gradients(to_gpu(scaled_gradients(0, 1.0, Inject::inf)), vars);
  EXPECT_EQ(opt.skipped_steps(), 1);
  EXPECT_EQ(opt.loss_scale(), 32.0);
  EXPECT_EQ(snapshot(vars, opt).variables, before.variables);
}

TEST(GpuLossScaleTest, ScaledLossReadsTheDeviceScale) {
  MIXPREC_REQUIRE_GPU();
  std::vector<Tensor> vars = gpu_variables();
  LossScaleOptimizer opt(optimizers::SGD(), {.initial_scale = 1024.0});
  const Tensor loss = on_gpu(scalar(0.75));
  EXPECT_EQ(on_cpu(opt.get_scaled_loss(loss)).item(), 768.0);
  step(opt, vars, 0, Inject::inf);  // the scale halves on the device
  const Tensor scaled = opt.get_scaled_loss(loss);
  EXPECT_EQ(on_cpu(scaled).item(), 384.0);
  const Tensor half_loss = on_gpu(scalar(0.75, {.dtype = DType::float16}));
  const Tensor scaled_half = opt.get_scaled_loss(half_loss);
  EXPECT_EQ(scaled_half.dtype(), DType::float16);
  EXPECT_EQ(on_cpu(scaled_half).item(), 384.0);
  // Differentiable: d(scaled)/d(loss) = scale.
  Tensor x = on_gpu(scalar(2.0), true);
  const std::vector<Tensor> g = grad(opt.get_scaled_loss(mul(x, x)), {x});
  EXPECT_EQ(on_cpu(g[0]).item(), 4.0 * 512.0);
}

TEST(GpuLossScaleTest, StateRoundTripsAndSetStateReachesTheDevice) {
  MIXPREC_REQUIRE_GPU();
  std::vector<Tensor> vars = gpu_variables();
  LossScaleOptimizer opt(optimizers::Adam(), {.initial_scale = 32.0, .dynamic_growth_steps = 5});
  step(opt, vars, 0, Inject::none);
  step(opt, vars, 1, Inject::nan);
  step(opt, vars, 2, Inject::none);
  const optimizers::OptimizerState state = opt.get_state();
  EXPECT_EQ(state.scalars.at("loss_scale"), 16.0);
  EXPECT_EQ(state.scalars.at("dynamic_counter"), 1.0);
  EXPECT_EQ(state.scalars.at("skipped_steps"), 1.0);
  EXPECT_EQ(state.iterations, 3);

  // A second optimizer, already on the device with another state, takes the exported one.
  std::vector<Tensor> other_vars = gpu_variables();
  LossScaleOptimizer other(optimizers::Adam(), {.initial_scale = 32.0, .dynamic_growth_steps = 5});
  step(other, other_vars, 7, Inject::inf);
  other.set_state(state);
  EXPECT_EQ(other.loss_scale(), 16.0);
  EXPECT_EQ(other.dynamic_counter(), 1);
  EXPECT_EQ(other.skipped_steps(), 1);
  // Both continue identically (same variables, same slots, same scale).
  for (std::size_t i = 0; i < vars.size(); ++i) other_vars[i].assign(vars[i]);
  for (int i = 3; i < 7; ++i) {
    step(opt, vars, i, Inject::none);
    step(other, other_vars, i, Inject::none);
  }
  EXPECT_EQ(other.loss_scale(), opt.loss_scale());
  EXPECT_EQ(opt.loss_scale(), 32.0) << "5 finite steps since the scale last changed";
  for (std::size_t i = 0; i < vars.size(); ++i) {
    EXPECT_EQ(bits(other_vars[i]), bits(vars[i])) << "variable " << i;
  }
}

TEST(GpuLossScaleTest, ATrainingStepEnqueuesOnly) {
  MIXPREC_REQUIRE_GPU();
  std::vector<Tensor> vars = gpu_variables();
  LossScaleOptimizer opt(optimizers::Adam(), {.initial_scale = 1024.0});
  const std::vector<Tensor> grads = to_gpu(scaled_gradients(0, 1024.0, Inject::none));
  opt.apply_gradients(opt.get_unscaled_gradients(grads), vars);  // warm-up: slots, cached blocks
  cuda::synchronize(kGpu);

  // Inside a capture, any synchronisation with the GPU (a stream or event wait, a blocking copy
  // back) fails with a capture error: the step below must only enqueue work.
  const cudaStream_t stream = cuda::context(0).compute;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  bool threw = false;
  std::string message;
  try {
    opt.apply_gradients(opt.get_unscaled_gradients(grads), vars);
  } catch (const std::exception& e) {
    threw = true;
    message = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  (void)cudaGetLastError();
  EXPECT_FALSE(threw) << message;
  EXPECT_EQ(end, cudaSuccess) << cudaGetErrorString(end);
  if (graph != nullptr) {
    std::size_t nodes = 0;
    EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
    // memset of the flag, the unscale pass, the update, the loss-scale rule.
    EXPECT_GE(nodes, 4u);
    cudaGraphDestroy(graph);
  }
}

}  // namespace
}  // namespace mixprec::testing
