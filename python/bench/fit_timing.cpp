// The C++ side of scripts/python-overhead.py: Model::fit of the seed MLP (784-512-512-10,
// RMSprop, sparse crossentropy) on Fashion-MNIST, and a loop of 16-element adds, timed the way the
// script times the same calls from Python. Prints one JSON object.
//
//   mixprec_python_fit_timing fit POLICY EPOCHS BATCH_SIZE SAMPLES
//   mixprec_python_fit_timing add ITERATIONS
#include <mixprec/mixprec.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace mp = mixprec;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run_fit(const std::string& policy, int epochs, std::int64_t batch_size, std::int64_t samples) {
  mp::mixed_precision::set_global_policy(policy);
  mp::set_seed(0);
  auto data = mp::data::load_fashion_mnist();
  mp::Tensor x = data.x_train.slice(0, 0, samples).contiguous();
  mp::Tensor y = data.y_train.slice(0, 0, samples).contiguous();
  mp::Model model = mp::applications::mlp();
  model.compile({.optimizer = mp::optimizers::RMSprop(),
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"}});
  const auto start = std::chrono::steady_clock::now();
  auto history =
      model.fit(x, y, {.batch_size = batch_size, .epochs = epochs, .verbose = 0, .seed = 1});
  const double total = seconds_since(start);
  std::printf("{\"system\": \"c++\", \"fit_seconds\": %.6f, \"epoch_seconds\": [", total);
  for (std::size_t e = 0; e < history.epochs.size(); ++e) {
    std::printf("%s%.6f", e ? ", " : "", history.epochs[e].seconds);
  }
  std::vector<double> steps;
  for (const auto& e : history.epochs)
    steps.insert(steps.end(), e.step_ms.begin(), e.step_ms.end());
  std::sort(steps.begin(), steps.end());
  const double median = steps.empty() ? 0.0 : steps[steps.size() / 2];
  std::printf("], \"step_ms_median\": %.6f, \"loss\": %.17g}\n", median,
              history.history.at("loss").back());
  return 0;
}

int run_add(std::int64_t iterations) {
  mp::Tensor a = mp::ones({16}), b = mp::ones({16});
  mp::Tensor c = mp::add(a, b);
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < iterations; ++i) c = mp::add(a, b);
  const double total = seconds_since(start);
  std::printf("{\"system\": \"c++\", \"add_us\": %.4f}\n", total / iterations * 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "fit" && argc == 6) {
    return run_fit(argv[2], std::atoi(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]));
  }
  if (mode == "add" && argc == 3) return run_add(std::atoll(argv[2]));
  std::fprintf(stderr, "usage: %s fit POLICY EPOCHS BATCH_SIZE SAMPLES | add ITERATIONS\n",
               argv[0]);
  return 2;
} catch (const mp::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
