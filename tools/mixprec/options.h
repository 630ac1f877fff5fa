// Options shared by `mixprec train`, `compare` and `bench`: what the user typed (TrainOptions),
// checked after parsing (usage errors, exit 2), then resolved against the machine (device-dependent
// defaults, the CUDA check) into what a run needs.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec::cli {

// A bad command line that CLI11 cannot see (a batch size of 0, an unknown policy name): main()
// prints "error: <message>" and exits 2, like CLI11's own parse errors.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class DeviceChoice { automatic, cpu, cuda };
enum class Loop { fit, custom };

// Everything `train` takes (and `compare`, with several policies; `bench` uses a subset).
struct TrainOptions {
  std::string model = "mlp";          // mlp, cnn, efficientnet-b0..b7, resnet50 (parse_model())
  std::optional<std::int64_t> units;  // mlp only; default: 4096 on a GPU, 512 on the CPU
  int hidden_layers = 2;              // mlp only
  // Image side of the CNNs (models.h: default_input_size()).
  std::optional<std::int64_t> input_size;
  std::optional<std::int64_t> classes;  // default: the data set's
  // vit: the patch side (default 4); the image side must be a multiple of it.
  std::optional<std::int64_t> patch_size;
  // vit: "mean" (of the patch tokens, the default) or "token" (a class token).
  std::optional<std::string> pooling;
  // gpt: tokens per training sequence (default: the context, at most 128 on the CPU and 1024 on
  // a GPU) and the shape of --model gpt (or changes to a preset's): blocks, width, heads,
  // vocabulary (bench only: training takes the data set's vocabulary). vit takes blocks, width
  // and heads too.
  std::optional<std::int64_t> seq_len;
  std::optional<int> layers;
  std::optional<std::int64_t> width;
  std::optional<int> heads;
  std::optional<std::int64_t> vocab;
  // fashion_mnist[:DIR], cifar10:DIR, cifar100:DIR or synthetic:HxWxC:CLASSES[:SAMPLES]
  std::string dataset = "fashion_mnist";
  // At most this many training samples and this many test samples (the first ones), for quick runs.
  std::optional<std::int64_t> max_samples;
  std::string policy = "float32";
  int epochs = 5;
  // Default: 8192 on a GPU, 256 on the CPU for mlp; 256 for cnn; 128 for efficientnet/resnet.
  std::optional<std::int64_t> batch_size;
  std::string optimizer;  // "" = rmsprop for mlp (seed 001), adam otherwise (seed 002)
  std::optional<double> learning_rate;  // default: the optimizer's Keras default
  // "constant", or "cosine": Keras's CosineDecay from the learning rate to 0 over the whole run
  // (epochs x steps per epoch), after a linear warm-up from 0 over warmup_steps steps.
  std::string lr_schedule = "constant";
  std::int64_t warmup_steps = 0;
  std::string loop = "fit";  // fit or custom (loop_choice())
  // fit: batches per execution (CompileOptions::steps_per_execution).
  std::int64_t steps_per_execution = 1;
  // Seed 001 trains with validation_split=0.2; so does mixprec train by default, so that the
  // progress shows val_loss / val_accuracy as in the guide. 0 trains on all 60,000 samples.
  double validation_split = 0.2;
  std::uint64_t seed = 42;
  std::string device = "auto";   // auto, cpu or cuda (device_choice())
  std::string verbose = "auto";  // auto, 0, 1, 2 (Keras fit verbosity)
  std::string metrics_json;      // train: write the run's metrics here
  // Keeping and watching the run (run_callbacks.h). train and compare: TensorBoard event files
  // under this directory (compare: one run per policy, DIR/<policy>), histograms every N epochs.
  std::string tensorboard;
  std::optional<int> histogram_freq;
  // train only: BackupAndRestore checkpoints here (the same command run again resumes), every
  // epoch or every N batches (--save-freq), and Model::save to --save when training ends.
  std::string checkpoint_dir;
  std::string save_freq;  // "" = "epoch"
  std::string save_model;
  // train only, with --checkpoint-dir: start a new run even when DIR holds checkpoints (they are
  // kept); without it a DIR whose checkpoints cannot be read is an error, never a fresh start.
  bool restart = false;
  // Restore checkpoints whose weights or slots hold NaN or Inf (LoadOptions::allow_nonfinite).
  bool allow_nonfinite = false;
  // train and compare, with --model gpt: fine-tune, starting from the configuration and weights of
  // a GPT saved by `train --save DIR` or (hf_gpt2) of a Hugging Face GPT-2 directory.
  std::string init_from;
  bool hf_gpt2 = false;
};

// Adds the options of `train` to `app` (compare and bench add a subset by passing `what`).
enum class OptionSet { train, compare, bench };
void add_common_options(CLI::App& app, TrainOptions& options, OptionSet what);

// Usage checks CLI11 does not do: positive batch size, non-negative epochs, a known model, policy
// and dataset, validation split in [0, 1), options that apply to the chosen model. Throws
// UsageError.
void check_options(const TrainOptions& options);
// The names --policy accepts (Policy::valid_names()) and a UsageError for any other.
void check_policy_name(const std::string& name);
// "a,b,c" -> {"a", "b", "c"}; empty items are a UsageError naming the option.
std::vector<std::string> split_list(const std::string& text, const std::string& option);
// The options of run_callbacks.h: --histogram-freq needs --tensorboard, --save-freq needs
// --checkpoint-dir, all of them need --loop fit, the directories must differ. Part of
// check_options().
void check_keep_options(const TrainOptions& options);
// --save-freq: "epoch" (or empty) -> 0, a positive whole number N -> N; a UsageError otherwise.
std::int64_t parse_save_freq(const std::string& text);
// A positive whole number for `option`; a UsageError otherwise.
std::int64_t parse_positive(const std::string& text, const std::string& option);

enum class DatasetKind { fashion_mnist, cifar10, cifar100, synthetic, text };
struct DatasetSpec {
  std::string name;  // "fashion_mnist", "cifar10", "cifar100", "synthetic", "text"
  DatasetKind kind = DatasetKind::fashion_mnist;
  // The files' directory ("" for synthetic); text: the token file, text file or fortune directory.
  std::string dir;
  data::SyntheticSpec synthetic;  // kind == synthetic
};
// --dataset's value: fashion_mnist[:DIR], cifar10:DIR, cifar100:DIR,
// synthetic:HxWxC:CLASSES[:SAMPLES], text:PATH. UsageError for an unknown name (listing the valid
// forms), a CIFAR or text name without a path, or a malformed synthetic spec.
DatasetSpec parse_dataset(const std::string& spec);

// The device a run uses. cuda in a build without the CUDA backend is a DeviceError ("this build of
// mixprec has no CUDA backend"); automatic is the CPU unless a usable GPU is present.
struct ResolvedDevice {
  Device device;
  std::string name;  // the physical device's name ("AMD EPYC ...")
  bool is_gpu = false;
};
ResolvedDevice resolve_device(DeviceChoice choice);

// Device-dependent defaults of the mlp (DESIGN §1, seed 001): a GPU gets the guide's 4096 units
// and batch 8192; the CPU gets 512 units and batch 256 so that an epoch of Fashion-MNIST takes
// seconds. The CNNs' defaults are in models.h.
std::int64_t default_units(const ResolvedDevice& device);
std::int64_t default_batch_size(const ResolvedDevice& device);

Verbosity parse_verbosity(const std::string& text);
DeviceChoice device_choice(const std::string& text);
Loop loop_choice(const std::string& text);

// The optimizer by name with the learning rate, if given (else the Keras default).
// The learning rate a run asks for: --learning-rate or the optimizer's Keras default, held
// constant or (--lr-schedule cosine) decayed over `total_steps` optimizer steps.
struct LearningRatePlan {
  std::optional<double> learning_rate;
  std::string schedule = "constant";
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;  // cosine only: warm-up plus decay
};
optimizers::Optimizer make_optimizer(const std::string& name, const LearningRatePlan& plan);
// The rate a schedule starts from or rises to: `learning_rate`, else the optimizer's Keras
// default (ValueError listing the valid names for an unknown optimizer).
double peak_learning_rate(const std::string& name, std::optional<double> learning_rate);
// "adamw", or "adamw, cosine decay (warm-up 100 steps)" for the run headers.
std::string optimizer_text(const std::string& name, const TrainOptions& options);

}  // namespace mixprec::cli
