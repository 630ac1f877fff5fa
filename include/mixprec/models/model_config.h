// A model's architecture and compile settings as JSON (Keras's model.to_json(),
// keras.models.model_from_json() and the "compile_config" of a saved model).
//
//   std::string config = model.to_json();                  // Model::to_json, model.h
//   mp::Model again = mp::model_from_json(config);          // same layers, names, policies, graph
//   again.load_weights("weights.safetensors");              // then predicts bit-identically
//
// The reader trusts nothing: the whole config is checked before a layer is built or a variable
// allocated (known class names, every key present with the right type and no unknown key, values
// in range, known policy names, a graph whose references exist and hold no cycle, and the limits
// below, so that a hostile file cannot make the loader allocate gigabytes). Every failure is a
// mixprec::ValueError with a one-line message naming the place:
//   layers[3] (dense_2): "units" must be a positive integer, got -4
//
// Config format (version 1), a functional model:
//   {"class_name": "Functional",
//    "config": {"name": "mlp", "trainable": true,
//               "layers": [{"class_name": "InputLayer", "config": {"name": "digits", ...},
//                           "inbound_nodes": []},
//                          {"class_name": "Dense", "config": {"name": "dense", "units": 512,
//                           "activation": "relu", "use_bias": true, "dtype": "mixed_float16",
//                           "kernel_initializer": "glorot_uniform", ...},
//                           "inbound_nodes": [[["digits", 0, 0]]]}, ...],
//               "input_layers": [["digits", 0, 0]], "output_layers": [["predictions", 0, 0]]}}
// Each inbound node is one call of the layer: a list of [layer name, node index, tensor index]
// (node index: which call of that layer in this model, in execution order). A Sequential is
// {"class_name": "Sequential", "config": {"name", "trainable", "layers": [{"class_name",
// "config"}, ...]}} with its InputLayer first when it has one. A model used as a layer appears as
// a layer entry whose "config" is its own model config.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mixprec/models/model.h"
#include "mixprec/models/training.h"

#pragma GCC visibility push(default)

namespace mixprec {

// What model_from_json refuses to build. The defaults admit ResNet-50 and EfficientNet-B7 with
// room to spare and refuse what would not fit a machine's memory.
struct ModelConfigLimits {
  std::size_t max_bytes = 64u << 20;        // the JSON text
  std::int64_t max_layers = 10000;          // layers in one model (nested models count theirs)
  std::int64_t max_params = 2'000'000'000;  // variables' elements in the whole model
  std::int64_t max_extent = 1 << 20;        // units, filters, channels, image sizes, shapes
  std::int64_t max_kernel_size = 1024;      // kernel, pool, stride, dilation, padding extents
  int max_nesting = 8;                      // models inside models
};

// Builds the model `json` (Model::to_json()) describes, with fresh variables (load the weights
// afterwards). ValueError, before anything is built, for any config that is not valid.
Model model_from_json(const std::string& json, ModelConfigLimits limits = {});

// The settings compile() was given, as JSON: {"optimizer": {"class_name": "Adam", "config":
// {"learning_rate": 0.001 or {"class_name": "ExponentialDecay", "config": {...}}, "beta_1": ...}}
// (a LossScaleOptimizer as {"class_name": "LossScaleOptimizer", "config": {"inner_optimizer":
// {...}, "dynamic": true, "initial_scale": ..., "dynamic_growth_steps": ...}}), "loss": a name or
// {"class_name": "SparseCategoricalCrossentropy", "config": {"from_logits": false}}, "metrics":
// [names or {"class_name", "config"}]}. ValueError when the model is not compiled or a part cannot
// be described (a loss, metric, optimizer or learning-rate schedule made from a custom function).
std::string compile_config_to_json(const Model& model);
// The CompileOptions that JSON describes (validated like a model config; ValueError naming the
// key). compile(compile_options_from_json(compile_config_to_json(m))) compiles as m was.
CompileOptions compile_options_from_json(const std::string& json);

}  // namespace mixprec

#pragma GCC visibility pop
