// applications::mlp: the seed 001 model (see include/mixprec/applications.h).
#include <string>

#include "mixprec/applications.h"
#include "mixprec/error.h"
#include "mixprec/layers/activation.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/input_layer.h"

namespace mixprec::applications {

namespace {

void validate(const MlpOptions& o) {
  auto positive = [](const char* field, std::int64_t value, std::int64_t minimum) {
    if (value < minimum) {
      throw ValueError("applications::mlp: " + std::string(field) +
                       " must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
    }
  };
  positive("units", o.units, 1);
  positive("hidden_layers", o.hidden_layers, 0);
  positive("input_features", o.input_features, 1);
  positive("classes", o.classes, 2);
}

}  // namespace

Model mlp(const MlpOptions& options) {
  validate(options);
  auto inputs = Input({options.input_features}, {.name = "digits"});
  KerasTensor x = inputs;
  layers::DenseOptions dense;
  dense.activation = options.activation;
  dense.dtype = options.dtype;
  for (int i = 1; i <= options.hidden_layers; ++i) {
    // (batch, features) -> (batch, units), in the policy's compute dtype.
    dense.name = "dense_" + std::to_string(i);
    x = layers::Dense(options.units, dense)(x);
  }
  dense.activation.clear();  // logits: linear
  dense.name = "dense_logits";
  x = layers::Dense(options.classes, dense)(x);
  // The float32 island of seed 001: softmax over float16 logits loses precision, so the output
  // layer computes (and returns) float32 whatever the policy.
  layers::ActivationOptions softmax;
  softmax.dtype = mixed_precision::Policy("float32");
  softmax.name = "predictions";
  auto outputs = layers::Activation("softmax", softmax)(x);
  return Model(inputs, outputs, {.name = options.name});
}

std::int64_t mlp_kernel_elements(const MlpOptions& options) {
  validate(options);
  if (options.hidden_layers == 0) return options.input_features * options.classes;
  return options.input_features * options.units +
         static_cast<std::int64_t>(options.hidden_layers - 1) * options.units * options.units +
         options.units * options.classes;
}

}  // namespace mixprec::applications
