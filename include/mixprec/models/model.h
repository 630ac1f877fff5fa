// Functional models (Keras `Model(inputs, outputs)`): a DAG of layer calls recorded on
// KerasTensors, run in topological order on real tensors. A Model is itself a Layer: it can be
// called on real tensors (`model(x, {.training = true})`) or on KerasTensors inside another model.
// A layer used at several places in the graph shares its variables.
//
// compile()/fit()/evaluate()/predict() are added by the training loop
// (src/models/{training,fit,evaluate,nonfinite_diagnosis}.cpp), which keeps its state in
// models::ModelImpl (src/models/model_impl.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/io/load_options.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/keras_tensor.h"
#include "mixprec/layers/layer.h"
#include "mixprec/models/training.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

namespace models {
class ModelImpl;
}

struct ModelOptions {
  std::string name;  // default: "model", "model_1", ...
  bool trainable = true;
};

class Model : public layers::Layer {
 public:
  // `inputs` must be outputs of mp::Input(); every output must be computable from them (otherwise
  // ValueError naming the Input it needs). Layer names must be unique within the model.
  Model(const KerasTensor& inputs, const KerasTensor& outputs, ModelOptions options = {});
  Model(const std::vector<KerasTensor>& inputs, const KerasTensor& outputs,
        ModelOptions options = {});
  Model(const KerasTensor& inputs, const std::vector<KerasTensor>& outputs,
        ModelOptions options = {});
  Model(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs,
        ModelOptions options = {});
  // A Model handle to an existing model layer (get_layer() of a nested model); ValueError if
  // `layer` is not a model.
  explicit Model(const layers::Layer& layer);

  // Calls: inherited from Layer. model(x, options) for one input and one output;
  // model(std::vector<Tensor>{a, b}, options) returns every output, in `outputs` order.

  const std::vector<KerasTensor>& inputs() const;
  const std::vector<KerasTensor>& outputs() const;
  std::vector<std::string> input_names() const;   // the Input layers' names
  std::vector<std::string> output_names() const;  // the producing layers' names

  // Functional models: every layer of the graph in execution order, InputLayers included (as
  // Keras). Sequential: the added layers, without the InputLayer.
  std::vector<layers::Layer> layers() const;
  // ValueError listing the layer names when there is none of that name.
  layers::Layer get_layer(std::string_view name) const;
  layers::Layer get_layer(int index) const;

  // Keras-style table: per layer "name (Type)", output shape ("(None, 4096)"), parameter count and
  // policy, then total / trainable / non-trainable parameter counts.
  void summary(std::ostream& os = std::cout) const;

  // Variables: variables(), trainable_variables(), non_trainable_variables(), named_variables(),
  // get_weights(), set_weights(), count_params() and set_trainable() are inherited from Layer.
  // Order: layer by layer in layers() order, each layer's variables in creation order; a shared
  // layer's variables appear once. set_trainable(false) freezes every layer of the model.

  // ---- training (src/models/training.cpp, fit.cpp, evaluate.cpp) ----
  // fit/evaluate/train_on_batch take models with one input and one output (a ValueError
  // otherwise; train other models with a custom GradientTape loop).
  //
  // Sets the optimizer (default RMSprop()), the loss (a name or a Loss; always computed in
  // float32) and the metrics (names, "accuracy" resolved by the loss, or Metric objects; two with
  // one name are a ValueError). When the model or any of its layers uses mixed_float16 the
  // optimizer is wrapped in a dynamic LossScaleOptimizer unless it already is one (Keras; the
  // rule is compile_optimizer() below). Under a mixed policy, warns once per output that is not
  // float32 (the seed's "softmax in float16" mistake); an unbuilt Sequential is checked at its
  // first training step.
  //
  // Metric state: fit()'s training epochs and train_on_batch() count into the Metric objects
  // given here (a caller's own handle reads the training value); evaluate(), fit()'s validation
  // included, counts into metrics of the same kinds and names with a state of their own, so a
  // validation pass never resets or mixes into the training values.
  void compile(CompileOptions options = {});
  // Trains on x (features, first axis = samples) and y (targets). Throws ValueError before any
  // work when the model is not compiled, batch_size <= 0, epochs < 0, x/y sample counts differ
  // (or are 0), or validation_split is outside [0, 1). Each step: forward with training = true,
  // float32 loss, gradients of trainable_variables() only (scaled and unscaled when the
  // optimizer is a LossScaleOptimizer), apply_gradients, metrics. Progress: a Keras bar on a
  // terminal, one line per epoch otherwise (FitOptions::verbose). When 100 consecutive steps are
  // skipped at a loss scale that cannot go lower (1, or a fixed scale), throws mixprec::Error
  // naming the first layer whose output, or else whose gradient, is Inf/NaN on that batch.
  History fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  // The loss (mean over samples) then the metrics in compile order, with training = false.
  Scores evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options = {});
  // The model's output for every row of x, computed in batches without autograd and
  // concatenated (a new tensor). Needs no compile().
  Tensor predict(const Tensor& x, PredictOptions options = {});

  // The same on a data::Pipeline (include/mixprec/data/pipeline.h): its dataset's rows are
  // batched and shuffled exactly as fit(x, y) batches and shuffles x and y (the same seed gives
  // the same batches), and the pipeline's steps run on each batch before the model sees it
  // (outside EpochLog::step_ms, as batch assembly). validation_split splits the dataset and keeps
  // the steps. fit and evaluate need a pipeline with targets and at least one sample (a
  // ValueError otherwise); predict ignores the targets.
  History fit(const data::Pipeline& train, FitOptions options = {});
  Scores evaluate(const data::Pipeline& data, EvaluateOptions options = {});
  Tensor predict(const data::Pipeline& data, PredictOptions options = {});
  // One optimisation step on a batch (Keras train_on_batch): resets the metrics, steps, and
  // returns the batch's loss (before the update) and metrics.
  Scores train_on_batch(const Tensor& x, const Tensor& y);
  // The optimizer compile() installed (a LossScaleOptimizer under mixed_float16); undefined
  // before compile().
  optimizers::Optimizer optimizer() const;
  // ---- weights in safetensors (src/io/weights.cpp; include/mixprec/io/safetensors.h) ----
  // Every variable (trainable or not: BatchNormalization's moving statistics too) under its name
  // ("dense_1/kernel"), in its stored dtype; written atomically. IOError when writing fails.
  void save_weights(const std::filesystem::path& path) const;
  // Loads a file written by save_weights (or any safetensors file with the same names): every
  // variable must be present with its shape and dtype and nothing else may be in the file; the
  // checks come first and the model is untouched on any error (IOError for a bad file, ValueError
  // naming the variable for a mismatch). A training checkpoint (io::save_checkpoint, written by
  // ModelCheckpoint and BackupAndRestore) loads too: its model part, without the optimizer state
  // (io::load_checkpoint restores that). A file written by save_weights carries checksums of its
  // tensors and metadata, verified here (IOError naming the first tensor that differs); files
  // without them (Hugging Face's, older ones) load unchecked. Weights holding NaN or Inf are an
  // IOError naming the tensor and the count unless options.allow_nonfinite.
  void load_weights(const std::filesystem::path& path, const LoadOptions& options = {});

  // ---- the architecture as JSON (src/models/model_config.cpp; read it back with
  // mixprec::model_from_json, include/mixprec/models/model_config.h) ----
  // Keras's model.to_json(): {"class_name": "Functional" | "Sequential", "config": {...}} with
  // every layer's class, options and dtype policy, and for a functional model the graph (each
  // layer's inbound nodes, the input and output layers). No weights. ValueError for a model that
  // holds something a config cannot describe (a custom Layer class, a custom initializer).
  std::string to_json() const;

  // ---- saving the whole model (src/io/model_saving.cpp; load it with mixprec::load_model,
  // include/mixprec/models/saving.h) ----
  // Writes `dir` (created, or replaced as a whole): the architecture and compile settings as JSON
  // and the weights in safetensors. IOError on a failing write; ValueError for a model whose
  // layers the config cannot describe (a custom Layer class).
  void save(const std::filesystem::path& dir) const;

  // Keras's model.stop_training: a callback sets it to end fit() after the current batch; fit()
  // clears it when it starts.
  bool stop_training() const;
  void set_stop_training(bool stop);

  // Internal: the model's state, for the training loop (src/models/model_impl.h).
  models::ModelImpl& model_impl() const;

 protected:
  explicit Model(std::shared_ptr<models::ModelImpl> impl);
};

// compile()'s optimizer rule, for a custom training loop that wants what fit() gets: `optimizer`
// (RMSprop() when undefined), wrapped in a dynamic mixed_precision::LossScaleOptimizer when
// `model` or any of its layers uses the mixed_float16 policy and it is not one already (Keras:
// mixed_bfloat16 and float16 get no loss scaling); otherwise `optimizer` itself.
optimizers::Optimizer compile_optimizer(const Model& model, optimizers::Optimizer optimizer = {});

}  // namespace mixprec

#pragma GCC visibility pop
