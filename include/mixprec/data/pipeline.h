// Per-batch preprocessing, as Keras users write it with tf.data's `.batch(...).map(f)`: a
// data::Pipeline is a Dataset plus an ordered list of steps that run on every batch after it is
// gathered (and shuffled), just before the model sees it. The dataset stays in its compact stored
// form (28x28 grayscale, 32x32 CIFAR, a synthetic pool index) and only one batch at a time is
// expanded, so resizing Fashion-MNIST to 224x224x3 for EfficientNet (seed 002) needs memory for
// one batch, not for 60,000 large images.
//
//   mp::data::Pipeline train(x_train, y_train);                       // (N, 784), (N,)
//   train = train.map(mp::data::reshape_images(28, 28, 1))            // (b, 28, 28, 1)
//                .map(mp::data::grayscale_to_rgb())                   // (b, 28, 28, 3)
//                .map(mp::data::resize(224, 224));                    // (b, 224, 224, 3)
//   model.fit(train, {.batch_size = 128, .epochs = 5, .validation_split = 0.2});
//   model.evaluate(mp::data::Pipeline(x_test, y_test).map(...), {.batch_size = 128});
//
// Model::fit/evaluate/predict on a Pipeline batch and shuffle the dataset's rows exactly as the
// tensor forms do (the same seed gives the same batches), then apply the steps to each batch;
// steps run without autograd. A step may change the features' shape and dtype (and the targets'),
// but must keep the number of samples (a ValueError naming the step otherwise), and must not
// write into its input: a batch of an unshuffled pass is a view of the dataset's storage.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mixprec/data/dataset.h"
#include "mixprec/shape.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

// One per-batch transformation: a function Batch -> Batch and a name (for messages and
// Pipeline::describe()). Any callable taking and returning a Batch converts to a Step named "map".
class Step {
 public:
  using Function = std::function<Batch(Batch)>;
  // ValueError when `function` is empty.
  Step(std::string name, Function function);
  template <typename F>
  requires(!std::same_as<std::remove_cvref_t<F>, Step> && std::is_invocable_r_v<Batch, F&, Batch>)
      Step(F function)  // NOLINT: implicit, so that pipeline.map([](Batch b) { ... }) reads
                        // naturally
      : Step("map", Function(std::move(function))) {}

  const std::string& name() const { return name_; }
  Batch operator()(Batch batch) const { return function_(std::move(batch)); }

 private:
  std::string name_;
  Function function_;
};

// ---- ready-made steps; they transform the features (x) and pass the targets through ----

// (N, H, W, 1) -> (N, H, W, 3), the channel repeated (tf.image.grayscale_to_rgb). A ShapeError
// for a rank other than 4 or a channel count other than 1.
Step grayscale_to_rgb();
// Bilinear resize of (N, H, W, C) floating-point images to (N, height, width, C) with half-pixel
// centers (tf.image.resize, Keras Resizing; mixprec::resize_bilinear). Images already of that
// size pass unchanged. ValueError for a size < 1 (at construction); ShapeError for a rank other
// than 4, DTypeError for integer images (rescale() them first).
Step resize(std::int64_t height, std::int64_t width);
// (N, ...) with height * width * channels elements per sample -> (N, height, width, channels),
// e.g. Fashion-MNIST's (N, 784) rows to (N, 28, 28, 1). ValueError for a size < 1 (at
// construction); ShapeError naming both shapes when the element count differs.
Step reshape_images(std::int64_t height, std::int64_t width, std::int64_t channels);
// (N, ...) -> (N, product of the rest), as Keras Flatten (e.g. CIFAR images for an MLP).
Step flatten();
// x * scale + offset (Keras Rescaling); integer features become float32 first, floating ones
// keep their dtype. rescale(1.0 / 255) maps uint8 pixels to [0, 1].
Step rescale(double scale, double offset = 0.0);

struct PipelineSplit;

class Pipeline {
 public:
  Pipeline() = default;
  explicit Pipeline(Dataset data, std::vector<Step> steps = {});
  // Pipeline(Dataset(x, y)); the same checks as Dataset's constructor.
  explicit Pipeline(const Tensor& x, const Tensor& y = Tensor());

  // A new pipeline with `step` appended (tf.data's ds.map(f)); this one is unchanged.
  Pipeline map(Step step) const;

  const Dataset& dataset() const { return data_; }
  const std::vector<Step>& steps() const { return steps_; }
  std::int64_t size() const { return data_.size(); }
  bool has_targets() const { return data_.has_targets(); }

  // Applies the steps in order to a batch of this pipeline's dataset rows, under NoGradScope.
  // Throws ValueError naming the step when one changes the number of samples or leaves the
  // features undefined; a step's own errors propagate unchanged.
  Batch apply(Batch batch) const;
  // apply() on rows [start, stop) of the dataset (in stored order), e.g. to look at one batch.
  Batch batch(std::int64_t start, std::int64_t stop) const;

  // The same steps on part of the data: rows [start, stop), rows `rows` (copied, in that order),
  // or Keras's validation_split (Dataset::split_validation: the last fraction validates).
  Pipeline slice(std::int64_t start, std::int64_t stop) const;
  Pipeline take(const std::vector<std::int64_t>& rows) const;
  PipelineSplit split_validation(double validation_split) const;

  // The features' shape of one sample after every step (runs the steps on the first sample),
  // e.g. (224, 224, 3); ValueError for an empty pipeline.
  Shape sample_shape() const;
  // "reshape_images(28, 28, 1) -> grayscale_to_rgb -> resize(224, 224)"; "" without steps.
  std::string describe() const;

 private:
  Dataset data_;
  std::vector<Step> steps_;
};

struct PipelineSplit {
  Pipeline train;
  Pipeline validation;
};

}  // namespace mixprec::data

#pragma GCC visibility pop
