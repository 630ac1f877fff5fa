// The models the command line builds (--model), their device- and data-dependent defaults, and
// building one from the public model zoo (mixprec/applications.h).
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/applications.h"
#include "mixprec/mixprec.h"
#include "options.h"

namespace mixprec::cli {

enum class ModelKind { mlp, cnn, efficientnet, resnet50, vit, gpt };

struct ModelChoice {
  ModelKind kind = ModelKind::mlp;
  int variant = 0;   // efficientnet-b<variant>
  std::string name;  // as typed: "efficientnet-b0", "gpt-nano"
  // The mlp takes feature rows and the GPTs token windows (--dataset text:PATH); every other
  // model takes images (N, S, S, C).
  bool takes_images() const { return kind != ModelKind::mlp && kind != ModelKind::gpt; }
  bool is_language_model() const { return kind == ModelKind::gpt; }
};

// "mlp, cnn, efficientnet-b0 .. efficientnet-b7, resnet50, vit, gpt-nano, gpt-micro, gpt-mini,
// gpt2, gpt"
std::string model_names();
// A UsageError listing the valid names for any other.
ModelChoice parse_model(const std::string& name);

// --input-size defaults (square images, side S):
//   cnn: the data set's image side (28 for Fashion-MNIST, 32 for CIFAR), so nothing is resized;
//   efficientnet-b*, resnet50: 224 on a GPU (seed 002); 32 on the CPU, where 224x224 training
//     takes hours per epoch: 32 is CIFAR's native size and the smallest these networks take.
std::int64_t default_input_size(const ModelChoice& model, const ResolvedDevice& device,
                                std::int64_t data_side);
// The smallest --input-size a model takes: 4 for cnn (two 2x2 poolings), 32 for the ImageNet
// networks (five stride-2 stages).
std::int64_t min_input_size(const ModelChoice& model);
// --batch-size defaults: the mlp's device defaults (options.h); 256 for cnn (its 5-epoch Adam
// recipe); 128 for efficientnet/resnet (seed 002's float32 batch).
std::int64_t default_batch_size(const ModelChoice& model, const ResolvedDevice& device);
// --optimizer default: rmsprop for mlp (seed 001), adam for the CNNs (seed 002).
std::string default_optimizer(const ModelChoice& model);

// What one model instance takes and predicts.
struct ModelShape {
  std::int64_t input_size = 0;  // image side (CNNs, vit)
  std::int64_t channels = 0;    // image channels (CNNs)
  std::int64_t features = 0;    // input features (mlp)
  std::int64_t classes = 0;
  std::int64_t units = 0;  // mlp
  int hidden_layers = 0;   // mlp
  // vit: the configuration (image side, channels and classes are set from the fields above)
  applications::VitConfig vit;
  // gpt: the preset's (or --layers/--width/--heads') configuration, its vocabulary the data
  // set's and its context at least the training sequence length.
  applications::GptConfig gpt;
};

// The GPT of --model (a preset name, or "gpt" with --layers/--width/--heads/--vocab), with vocab
// and context set by the caller.
applications::GptConfig gpt_model_config(const ModelChoice& model, const TrainOptions& options);

// Builds the model under the global policy (the caller sets it and the seed).
Model build_model(const ModelChoice& model, const ModelShape& shape);

}  // namespace mixprec::cli
