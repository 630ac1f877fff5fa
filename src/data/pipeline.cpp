// data::Pipeline and its ready-made steps. Steps are compositions of public ops run under
// NoGradScope, so preprocessing never records an autograd graph.
#include "mixprec/data/pipeline.h"

#include <cstdio>
#include <string>
#include <utility>

#include "mixprec/autograd.h"
#include "mixprec/error.h"
#include "mixprec/nn_ops.h"
#include "mixprec/ops.h"

namespace mixprec::data {

namespace {

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

void check_positive(const char* step, const char* what, std::int64_t v) {
  if (v < 1) {
    throw ValueError(std::string(step) + ": " + what + " must be >= 1, got " + std::to_string(v));
  }
}

void check_images(const char* step, const Tensor& x) {
  if (x.rank() != 4) {
    throw ShapeError(std::string(step) + ": expects images (N, H, W, C), got shape " +
                     x.shape().to_string() +
                     "; reshape flat rows first with reshape_images(height, width, channels)");
  }
}

// Adds the step's name to the batches-of-size message.
void check_same_samples(const Step& step, const Batch& before, const Batch& after) {
  const std::int64_t n = before.x.dim(0);
  if (!after.x.defined() || after.x.rank() < 1 || after.x.dim(0) != n ||
      (before.y.defined() && (!after.y.defined() || after.y.rank() < 1 || after.y.dim(0) != n))) {
    const auto describe = [](const Tensor& t) {
      return t.defined() ? t.shape().to_string() : std::string("undefined");
    };
    throw ValueError("pipeline step '" + step.name() + "' must keep the batch's " +
                     std::to_string(n) + " samples on the first axis: it turned features " +
                     before.x.shape().to_string() + " into " + describe(after.x) +
                     (before.y.defined() ? " and targets " + before.y.shape().to_string() +
                                               " into " + describe(after.y)
                                         : std::string()) +
                     "; map per sample, not across the batch");
  }
}

}  // namespace

Step::Step(std::string name, Function function)
    : name_(std::move(name)), function_(std::move(function)) {
  if (!function_) {
    throw ValueError("Step '" + name_ + "': the function is empty; pass a callable Batch(Batch)");
  }
}

Step grayscale_to_rgb() {
  return Step("grayscale_to_rgb", [](Batch b) {
    check_images("grayscale_to_rgb", b.x);
    if (b.x.dim(3) != 1) {
      throw ShapeError("grayscale_to_rgb: expects one channel (N, H, W, 1), got shape " +
                       b.x.shape().to_string() + "; the images already have " +
                       std::to_string(b.x.dim(3)) + " channels");
    }
    // A stride-0 view of the channel, made contiguous: (N, H, W, 1) -> (N, H, W, 3).
    b.x = broadcast_to(b.x, Shape{b.x.dim(0), b.x.dim(1), b.x.dim(2), 3}).contiguous();
    return b;
  });
}

Step resize(std::int64_t height, std::int64_t width) {
  check_positive("resize", "height", height);
  check_positive("resize", "width", width);
  return Step("resize(" + std::to_string(height) + ", " + std::to_string(width) + ")",
              [height, width](Batch b) {
                check_images("resize", b.x);
                if (!is_floating(b.x.dtype())) {
                  throw DTypeError("resize: expects floating-point images, got " +
                                   std::string(dtype_name(b.x.dtype())) +
                                   "; add rescale(1.0 / 255) before resize");
                }
                if (b.x.dim(1) == height && b.x.dim(2) == width) return b;
                b.x = resize_bilinear(b.x, height, width);
                return b;
              });
}

Step reshape_images(std::int64_t height, std::int64_t width, std::int64_t channels) {
  check_positive("reshape_images", "height", height);
  check_positive("reshape_images", "width", width);
  check_positive("reshape_images", "channels", channels);
  return Step("reshape_images(" + std::to_string(height) + ", " + std::to_string(width) + ", " +
                  std::to_string(channels) + ")",
              [height, width, channels](Batch b) {
                const std::int64_t n = b.x.rank() >= 1 ? b.x.dim(0) : 0;
                const std::int64_t per_sample = n > 0 ? b.x.numel() / n : 0;
                if (b.x.rank() < 1 || per_sample != height * width * channels) {
                  throw ShapeError("reshape_images(" + std::to_string(height) + ", " +
                                   std::to_string(width) + ", " + std::to_string(channels) +
                                   "): expects " + std::to_string(height * width * channels) +
                                   " elements per sample, got features of shape " +
                                   b.x.shape().to_string() +
                                   "; check the image size and channel count of the data set");
                }
                b.x = b.x.reshape(Shape{n, height, width, channels});
                return b;
              });
}

Step flatten() {
  return Step("flatten", [](Batch b) {
    if (b.x.rank() < 1) {
      throw ShapeError("flatten: expects features (N, ...), got a scalar");
    }
    const std::int64_t n = b.x.dim(0);
    std::int64_t rest = 1;
    for (int a = 1; a < b.x.rank(); ++a) rest *= b.x.dim(a);
    b.x = b.x.reshape(Shape{n, rest});
    return b;
  });
}

Step rescale(double scale, double offset) {
  std::string name = "rescale(" + number(scale);
  if (offset != 0.0) name += ", " + number(offset);
  return Step(name + ")", [scale, offset](Batch b) {
    Tensor x = is_floating(b.x.dtype()) ? b.x : b.x.to(DType::float32);
    x = mul(x, scale);
    if (offset != 0.0) x = add(x, offset);
    b.x = x;
    return b;
  });
}

Pipeline::Pipeline(Dataset data, std::vector<Step> steps)
    : data_(std::move(data)), steps_(std::move(steps)) {}

Pipeline::Pipeline(const Tensor& x, const Tensor& y) : data_(x, y) {}

Pipeline Pipeline::map(Step step) const {
  Pipeline out = *this;
  out.steps_.push_back(std::move(step));
  return out;
}

Batch Pipeline::apply(Batch batch) const {
  if (steps_.empty()) return batch;
  NoGradScope no_grad;
  for (const Step& step : steps_) {
    Batch next = step(batch);
    check_same_samples(step, batch, next);
    batch = std::move(next);
  }
  return batch;
}

Batch Pipeline::batch(std::int64_t start, std::int64_t stop) const {
  const Dataset rows = data_.slice(start, stop);
  return apply(Batch{rows.features(), rows.targets()});
}

Pipeline Pipeline::slice(std::int64_t start, std::int64_t stop) const {
  return Pipeline(data_.slice(start, stop), steps_);
}

Pipeline Pipeline::take(const std::vector<std::int64_t>& rows) const {
  return Pipeline(data_.take(rows), steps_);
}

PipelineSplit Pipeline::split_validation(double validation_split) const {
  ValidationSplit split = data_.split_validation(validation_split);
  return {Pipeline(std::move(split.train), steps_), Pipeline(std::move(split.validation), steps_)};
}

Shape Pipeline::sample_shape() const {
  if (size() == 0) {
    throw ValueError(
        "Pipeline::sample_shape: the pipeline has no samples; build it from a "
        "non-empty dataset");
  }
  const Batch one = batch(0, 1);
  std::vector<std::int64_t> dims(one.x.shape().dims().begin() + 1, one.x.shape().dims().end());
  return Shape(std::move(dims));
}

std::string Pipeline::describe() const {
  std::string out;
  for (const Step& step : steps_) out += (out.empty() ? "" : " -> ") + step.name();
  return out;
}

}  // namespace mixprec::data
