// The core engine in one page: a softmax classifier trained with a custom loop twice, once in
// float32 and once the mixed-precision way (float16 compute, float32 master weights, a fixed loss
// scale, non-finite steps skipped). Layers, policies and LossScaleOptimizer arrive with the
// training issue; this shows the mechanics they are built from.
#include <mixprec/mixprec.h>

#include <cstdio>

namespace mp = mixprec;

namespace {

struct Data {
  mp::Tensor x, y;  // x: (N, 64) float32, y: (N,) int64 labels
};

// Four Gaussian blobs in 64 dimensions, made from a seeded generator.
Data make_data(std::int64_t n, std::uint64_t seed) {
  mp::Generator center_gen(0);  // the same four centers for the training and the test set
  const auto centers = mp::random_normal({4, 64}, 0.0, 1.0, {}, center_gen);
  mp::Generator gen(seed);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (auto& l : labels) l = static_cast<std::int64_t>(gen.below(4));
  const auto y = mp::from_vector(labels, {n});
  const auto noise = mp::random_normal({n, 64}, 0.0, 1.5, {}, gen);
  return {mp::matmul(mp::one_hot(y, 4), centers) + noise, y};
}

double train(const Data& train_set, const Data& test_set, mp::DType compute, int epochs) {
  mp::Generator gen(7);
  auto w = mp::random_normal({64, 4}, 0.0, 0.05, {.requires_grad = true}, gen);  // float32 master
  auto b = mp::zeros({4}, {.requires_grad = true});
  const double loss_scale = compute == mp::kFloat16 ? 1024.0 : 1.0;
  const double learning_rate = 0.5;
  const auto targets = mp::one_hot(train_set.y, 4);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    mp::GradientTape tape;
    // Autocast: inputs and weights are read in the compute dtype; the loss is computed in float32.
    auto logits = mp::matmul(train_set.x.to(compute), w.to(compute)) + b.to(compute);
    auto loss = -mp::mean(mp::sum(targets * mp::log_softmax(logits.to(mp::kFloat32)), {1}));
    auto grads = tape.gradient(loss * loss_scale, {w, b});
    const bool finite = mp::all_finite(grads[0]) && mp::all_finite(grads[1]);
    if (finite) {  // skip the step on overflow instead of writing Inf into the weights
      mp::NoGradScope no_grad;
      w = (w - grads[0] * (learning_rate / loss_scale)).detach().set_requires_grad(true);
      b = (b - grads[1] * (learning_rate / loss_scale)).detach().set_requires_grad(true);
    }
    if (epoch % 10 == 0) {
      std::printf("  %-8s epoch %3d  loss %.4f  (logits %s, grad of w %s)%s\n",
                  std::string(mp::dtype_name(compute)).c_str(), epoch, loss.item(),
                  std::string(mp::dtype_name(logits.dtype())).c_str(),
                  std::string(mp::dtype_name(grads[0].dtype())).c_str(),
                  finite ? "" : "  [skipped]");
    }
  }
  mp::NoGradScope no_grad;
  const auto predicted = mp::argmax(mp::matmul(test_set.x, w) + b, 1);
  return mp::mean(mp::equal(predicted, test_set.y).to(mp::kFloat32)).item();
}

}  // namespace

int main() {
  const Data train_set = make_data(4096, 1), test_set = make_data(1024, 2);
  std::printf("softmax classifier, 4096 samples of 64 features, full-batch gradient descent\n");
  const double acc32 = train(train_set, test_set, mp::kFloat32, 50);
  const double acc16 = train(train_set, test_set, mp::kFloat16, 50);
  std::printf("test accuracy: float32 %.4f, float16 compute with float32 masters %.4f\n", acc32,
              acc16);
  const auto stats = mp::memory_stats(mp::Device::cpu());
  std::printf("peak host memory held by tensors: %.1f MiB\n",
              static_cast<double>(stats.peak_bytes) / (1 << 20));
  return 0;
}
