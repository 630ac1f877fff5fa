// Loading a saved model and shaping the data for it (see saved_model.h).
#include "saved_model.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "mixprec/applications.h"
#include "mixprec/models/saving.h"

namespace mixprec::cli {

namespace {

// The test split as the model takes it. `input` is the model's input shape, batch axis first.
data::Pipeline shape_for_model(const data::Pipeline& raw, const DataGeometry& g,
                               const PartialShape& input, const std::string& dir) {
  const std::int64_t image_size = g.height * g.width * g.channels;
  const std::string what =
      "the model in " + dir + " takes inputs of shape " + partial_shape_to_string(input);
  if (input.size() == 2) {  // (None, F): rows
    if (input[1] != image_size) {
      throw ValueError(what + ", the data set's samples have " + std::to_string(image_size) +
                       " values (" + std::to_string(g.height) + "x" + std::to_string(g.width) +
                       "x" + std::to_string(g.channels) + "); use the data set it was trained on");
    }
    return g.flat ? raw : raw.map(data::flatten());
  }
  if (input.size() == 4 && input[1] > 0 && input[2] > 0 && input[3] > 0) {  // (None, H, W, C)
    data::Pipeline p = raw;
    if (g.flat) p = p.map(data::reshape_images(g.height, g.width, g.channels));
    if (g.height != input[1] || g.width != input[2]) p = p.map(data::resize(input[1], input[2]));
    if (input[3] != g.channels) {
      if (g.channels != 1 || input[3] != 3) {
        throw ValueError(what + ", the data set's images have " + std::to_string(g.channels) +
                         " channels; use the data set it was trained on");
      }
      p = p.map(data::grayscale_to_rgb());
    }
    return p;
  }
  throw ValueError(what +
                   "; evaluate and predict take models of (None, F) or (None, H, W, C) "
                   "inputs");
}

// The newest checkpoint file of a `train --checkpoint-dir` directory ("" when it has none).
std::string newest_checkpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  std::string newest;
  long best = -1;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "ckpt-", suffix = ".safetensors";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string number =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (number.find_first_not_of("0123456789") != std::string::npos || number.size() > 9) continue;
    if (std::stol(number) > best) {
      best = std::stol(number);
      newest = entry.path().string();
    }
  }
  return newest;
}

// --model names a saved-model directory or a checkpoint file; load_model tells the kinds of file
// apart. What it cannot see is a missing path or a checkpoint directory given for one of its files.
void check_model_path(const std::string& model) {
  std::error_code ec;
  const std::filesystem::path path(model);
  const std::string kinds =
      "pass a saved model's directory (mixprec train ... --save DIR) or a training checkpoint "
      "file (mixprec train ... --checkpoint-dir DIR writes DIR/ckpt-N.safetensors)";
  if (!std::filesystem::exists(path, ec)) {
    throw IOError("--model " + model + ": no such file or directory; " + kinds);
  }
  if (std::filesystem::is_directory(path, ec) &&
      !std::filesystem::exists(path / "config.json", ec)) {
    const std::string newest = newest_checkpoint(path);
    if (!newest.empty()) {
      throw IOError("--model " + model + ": a checkpoint directory (train --checkpoint-dir), " +
                    "not a saved model; pass one of its checkpoint files, the newest is " + newest);
    }
  }
}

// A GPT on a token file: the consecutive windows of its context over the validation part.
SavedModelRun text_run(const SavedModelOptions& o, const DatasetSpec& spec,
                       const ResolvedDevice& device, Model model) {
  applications::GptConfig config;
  try {
    config = applications::gpt_config(model);
  } catch (const ValueError& e) {
    throw ValueError(
        "--dataset text: takes a GPT (mixprec train --model gpt-... --save DIR); the "
        "model in " +
        o.model_dir + " is not one: " + e.what());
  }
  const data::TokenDataset tokens = load_text_dataset(spec, o.validation_split);
  if (tokens.vocab_size() != config.vocab) {
    throw ValueError("the model in " + o.model_dir + " has a vocabulary of " +
                     std::to_string(config.vocab) + " tokens, " + spec.dir + " one of " +
                     std::to_string(tokens.vocab_size()) +
                     "; use the token file it was trained on");
  }
  LoadedData data;
  data.spec = spec;
  data.geometry.classes = tokens.vocab_size();
  data.test = tokens.validation_windows(config.context);
  if (o.max_samples) data.test = data.test.slice(0, std::min(data.test.size(), *o.max_samples));
  data::Pipeline test = data.test;
  return {device, std::move(model), std::move(data), std::move(test), config.vocab};
}

}  // namespace

void add_saved_model_options(CLI::App& app, SavedModelOptions& o) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--model", o.model_dir,
                 "a saved model's directory (mixprec train --save DIR, Model::save) or a training "
                 "checkpoint file (train --checkpoint-dir DIR: DIR/ckpt-N.safetensors)")
      ->required();
  app.add_option("--dataset", o.dataset,
                 "fashion_mnist[:DIR], cifar10:DIR, cifar100:DIR, "
                 "synthetic:HxWxC:CLASSES[:SAMPLES], text:PATH (a GPT's token file, evaluate "
                 "only); its test split is used")
      ->capture_default_str();
  app.add_option("--max-samples", o.max_samples, "use only the first N test samples");
  app.add_flag("--allow-nonfinite", o.allow_nonfinite,
               "load the model even when its weights hold NaN or Inf (to inspect a diverged run)");
  app.add_option("--validation-split", o.validation_split,
                 "text: the fraction at the end of the token file that is its test split (train's "
                 "--validation-split)")
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "samples per batch")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of synthetic data (the one train used)")
      ->capture_default_str();
  app.add_option("--device", o.device, "auto, cpu or cuda (auto: a GPU when one is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
}

void check_saved_model_options(const SavedModelOptions& o) {
  if (o.batch_size <= 0) {
    throw UsageError("--batch-size must be positive, got " + std::to_string(o.batch_size));
  }
  if (o.max_samples && *o.max_samples <= 0) {
    throw UsageError("--max-samples must be positive, got " + std::to_string(*o.max_samples));
  }
  if (!(o.validation_split > 0.0 && o.validation_split < 1.0)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", o.validation_split);
    throw UsageError(std::string("--validation-split must be in (0, 1), got ") + text);
  }
  parse_dataset(o.dataset);
}

SavedModelRun load_saved_model_run(const SavedModelOptions& o) {
  const DatasetSpec spec = parse_dataset(o.dataset);
  const ResolvedDevice device = resolve_device(device_choice(o.device));
  check_model_path(o.model_dir);
  // The variables on the run's device; batches follow them.
  DeviceScope device_scope(device.device);
  Model model = load_model(o.model_dir, {.allow_nonfinite = o.allow_nonfinite});
  if (model.inputs().size() != 1 || model.outputs().size() != 1) {
    throw ValueError("the model in " + o.model_dir + " has " +
                     std::to_string(model.inputs().size()) + " inputs and " +
                     std::to_string(model.outputs().size()) +
                     " outputs; evaluate and predict take one of each");
  }
  if (spec.kind == DatasetKind::text) return text_run(o, spec, device, std::move(model));
  const PartialShape& output = model.outputs()[0].shape();
  LoadedData data = load_data(spec, o.seed, o.max_samples);
  const std::int64_t classes = output.size() == 2 ? output[1] : -1;
  if (classes > 0 && data.geometry.classes > classes) {
    throw ValueError("the model in " + o.model_dir + " predicts " + std::to_string(classes) +
                     " classes, " + spec.name + " has " + std::to_string(data.geometry.classes) +
                     "; use the data set it was trained on");
  }
  data::Pipeline test =
      shape_for_model(data.test, data.geometry, model.inputs()[0].shape(), o.model_dir);
  return {device, std::move(model), std::move(data), std::move(test), classes};
}

}  // namespace mixprec::cli
