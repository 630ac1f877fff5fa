// Seed 002 (the EfficientNet notebook) in C++: EfficientNet-B0 trained from scratch with Adam,
// once in float32 at batch B and once under mixed_float16 at batch 2B (16-bit activations take
// half the memory, so the batch doubles), each run with a TensorBoard callback writing histograms
// every epoch, then evaluated on the test split; a table of seconds per epoch and accuracy at the
// end, as the notebook compares its two runs.
//
//   seed002_efficientnet [data=synthetic] [input_size=32] [epochs=2] [batch=8] [log_dir=logs/fit]
//                        [samples=128]
//   tensorboard --logdir logs/fit        # the runs EfficientNet-B0-baseline and -mixed overlay
//
// data: "synthetic" (seeded noise images of 100 classes, samples of them; nothing to download) or
// "cifar100:DIR" (the extracted binary CIFAR-100, as the notebook; samples caps both splits).
// The notebook runs 224x224 inputs, batch 128 / 256 and 20 epochs on a V100; on the CPU keep the
// defaults (32x32, CIFAR's own size, is the smallest EfficientNet takes), on a GPU pass
// `cifar100:DIR 224 20 128 logs/fit 50000`. The defaults take a few minutes on two busy CPU
// cores. mixed_float16 on a CPU without fast float16 runs slower than float32 (the library says
// so once); the comparison means something on a GPU.
#include <mixprec/callbacks/tensorboard.h>
#include <mixprec/mixprec.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace mp = mixprec;

namespace {

struct Data {
  mp::data::Pipeline train;  // (N, S, S, 3) float32 in [0, 1] per batch, labels int64
  mp::data::Pipeline test;
  std::int64_t classes = 100;
};

// The notebook's resize_and_rescale: pixels already come as float32 in [0, 1]; resize per batch.
Data load(const std::string& spec, std::int64_t input_size, std::int64_t samples) {
  Data d;
  if (spec == "synthetic") {
    const mp::data::SyntheticImages images(
        {.height = 32, .width = 32, .channels = 3, .classes = 100, .seed = 42});
    d.train = images.pipeline(samples);
    d.test = images.pipeline(std::max<std::int64_t>(samples / 5, 1));
  } else if (spec.rfind("cifar100:", 0) == 0) {
    const mp::data::Cifar c = mp::data::load_cifar100(spec.substr(9));
    const std::int64_t n_train = std::min(samples, c.x_train.dim(0));
    const std::int64_t n_test = std::min(samples, c.x_test.dim(0));
    d.train = mp::data::Pipeline(c.x_train.slice(0, 0, n_train), c.y_train.slice(0, 0, n_train));
    d.test = mp::data::Pipeline(c.x_test.slice(0, 0, n_test), c.y_test.slice(0, 0, n_test));
  } else {
    throw mp::ValueError("data must be 'synthetic' or 'cifar100:DIR', got '" + spec + "'");
  }
  if (input_size != 32) {
    d.train = d.train.map(mp::data::resize(input_size, input_size));
    d.test = d.test.map(mp::data::resize(input_size, input_size));
  }
  return d;
}

struct Run {
  std::string name, policy;
  std::int64_t batch = 0;
  double seconds_per_epoch = 0.0;
  double test_accuracy = 0.0;
  double val_accuracy = 0.0;
};

Run train_one(const std::string& policy, const std::string& prefix, std::int64_t batch, int epochs,
              std::int64_t input_size, const Data& data, const std::filesystem::path& log_dir) {
  mp::mixed_precision::set_global_policy(policy);
  mp::set_seed(42);  // the same initial weights and batch order for both runs
  mp::clear_session();
  const std::string name = "EfficientNet-B0-" + prefix;
  mp::Model model = mp::applications::efficientnet(
      0, {.input_size = input_size, .channels = 3, .classes = data.classes, .name = name});
  model.compile({.optimizer = mp::optimizers::Adam(),  // "adam": learning rate 1e-3
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"},
                 .steps_per_execution = 16});  // as the notebook: 16 batches per execution
  std::printf("\n%s: policy %s, global batch size %lld, %lld parameters\n", name.c_str(),
              policy.c_str(), static_cast<long long>(batch),
              static_cast<long long>(model.count_params()));
  // The notebook holds out 10,000 of CIFAR-100's 50,000 training images: validation_split 0.2.
  const mp::History history =
      model.fit(data.train, {.batch_size = batch,
                             .epochs = epochs,
                             .verbose = mp::Verbosity::one_line_per_epoch,
                             .validation_split = 0.2,
                             .seed = 42,
                             .callbacks = {mp::callbacks::TensorBoard(
                                 {.log_dir = log_dir / name, .histogram_freq = 1})}});
  const mp::Scores test = model.evaluate(data.test, {.batch_size = batch});
  Run run{name, policy, batch};
  // Epoch 1 includes the one-time costs (primitive creation, allocator warm-up); the notebook's
  // first epoch is slower for the same reason. Average the others when there are any.
  double total = 0.0;
  int counted = 0;
  for (std::size_t e = history.epochs.size() > 1 ? 1 : 0; e < history.epochs.size(); ++e) {
    total += history.epochs[e].seconds;
    ++counted;
  }
  run.seconds_per_epoch = counted ? total / counted : 0.0;
  run.test_accuracy = test.at("accuracy");
  if (!history.epochs.empty()) run.val_accuracy = history.epochs.back().metrics.at("val_accuracy");
  return run;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string data_spec = argc > 1 ? argv[1] : "synthetic";
  const std::int64_t input_size = argc > 2 ? std::atoll(argv[2]) : 32;
  const int epochs = argc > 3 ? std::atoi(argv[3]) : 2;
  const std::int64_t batch = argc > 4 ? std::atoll(argv[4]) : 8;
  const std::filesystem::path log_dir = argc > 5 ? argv[5] : "logs/fit";
  const std::int64_t samples = argc > 6 ? std::atoll(argv[6]) : 128;
  if (input_size < 32 || epochs < 1 || batch < 1 || samples < 10) {
    std::fprintf(stderr, "error: need input_size >= 32, epochs >= 1, batch >= 1, samples >= 10\n");
    return 2;
  }

  const Data data = load(data_spec, input_size, samples);
  std::printf(
      "EfficientNet-B0 on %s at %lldx%lld: %lld training images (20%% validate), %lld test\n",
      data_spec.c_str(), static_cast<long long>(input_size), static_cast<long long>(input_size),
      static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()));
  std::vector<Run> runs;
  runs.push_back(train_one("float32", "baseline", batch, epochs, input_size, data, log_dir));
  runs.push_back(train_one("mixed_float16", "mixed", 2 * batch, epochs, input_size, data, log_dir));
  mp::mixed_precision::set_global_policy("float32");

  std::printf("\n%-26s %-14s %6s %10s %9s %9s\n", "run", "policy", "batch", "s/epoch", "val acc",
              "test acc");
  for (const Run& r : runs) {
    std::printf("%-26s %-14s %6lld %10.2f %9.4f %9.4f\n", r.name.c_str(), r.policy.c_str(),
                static_cast<long long>(r.batch), r.seconds_per_epoch, r.val_accuracy,
                r.test_accuracy);
  }
  std::printf("\nTensorBoard logs: tensorboard --logdir %s\n", log_dir.string().c_str());
  return 0;
} catch (const mp::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
