// The command line's models (see models.h).
#include "models.h"

#include "mixprec/applications.h"

namespace mixprec::cli {

namespace {

constexpr int kEfficientNetVariants = 8;  // B0..B7
constexpr std::int64_t kGpuImageSize = 224;
constexpr std::int64_t kCpuImageSize = 32;

}  // namespace

std::string model_names() {
  return "mlp, cnn, efficientnet-b0 .. efficientnet-b" + std::to_string(kEfficientNetVariants - 1) +
         ", resnet50";
}

ModelChoice parse_model(const std::string& name) {
  ModelChoice out;
  out.name = name;
  if (name == "mlp") return out;
  if (name == "cnn") {
    out.kind = ModelKind::cnn;
    return out;
  }
  if (name == "resnet50") {
    out.kind = ModelKind::resnet50;
    return out;
  }
  const std::string prefix = "efficientnet-b";
  if (name.size() == prefix.size() + 1 && name.compare(0, prefix.size(), prefix) == 0) {
    const char digit = name.back();
    if (digit >= '0' && digit < '0' + kEfficientNetVariants) {
      out.kind = ModelKind::efficientnet;
      out.variant = digit - '0';
      return out;
    }
  }
  throw UsageError("unknown model '" + name + "'; valid models: " + model_names());
}

std::int64_t default_input_size(const ModelChoice& model, const ResolvedDevice& device,
                                std::int64_t data_side) {
  if (model.kind == ModelKind::cnn) return data_side;
  return device.is_gpu ? kGpuImageSize : kCpuImageSize;
}

std::int64_t min_input_size(const ModelChoice& model) {
  return model.kind == ModelKind::cnn ? 4 : 32;
}

std::int64_t default_batch_size(const ModelChoice& model, const ResolvedDevice& device) {
  switch (model.kind) {
    case ModelKind::mlp: return default_batch_size(device);
    // 128: 5 epochs of Adam at 256 left the small CNN just under 0.91 test accuracy on
    // Fashion-MNIST (0.908 float32); 375 steps per epoch instead of 188 clear it.
    case ModelKind::cnn: return 128;
    case ModelKind::efficientnet:
    case ModelKind::resnet50: return 128;
  }
  return 128;
}

std::string default_optimizer(const ModelChoice& model) {
  return model.kind == ModelKind::mlp ? "rmsprop" : "adam";
}

Model build_model(const ModelChoice& model, const ModelShape& s) {
  switch (model.kind) {
    case ModelKind::mlp:
      return applications::mlp({.units = s.units,
                                .hidden_layers = s.hidden_layers,
                                .input_features = s.features,
                                .classes = s.classes});
    case ModelKind::cnn:
      return applications::cnn(
          {.input_size = s.input_size, .channels = s.channels, .classes = s.classes});
    case ModelKind::efficientnet:
      return applications::efficientnet(
          model.variant,
          {.input_size = s.input_size, .channels = s.channels, .classes = s.classes});
    case ModelKind::resnet50:
      return applications::resnet50(
          {.input_size = s.input_size, .channels = s.channels, .classes = s.classes});
  }
  throw ValueError("build_model: unknown model kind");
}

}  // namespace mixprec::cli
