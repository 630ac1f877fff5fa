// Data sets and model preprocessing of the command line (see datasets.h).
#include "datasets.h"

#include <algorithm>
#include <string>

namespace mixprec::cli {

namespace {

// Synthetic test split: one sample in five, at least one.
std::int64_t synthetic_test_samples(std::int64_t samples) { return (samples + 4) / 5; }

data::Pipeline first(const data::Pipeline& p, std::optional<std::int64_t> max_samples) {
  if (!max_samples || *max_samples >= p.size()) return p;
  return p.slice(0, *max_samples);
}

}  // namespace

DataGeometry dataset_geometry(const DatasetSpec& spec) {
  switch (spec.kind) {
    case DatasetKind::fashion_mnist:
      return {data::kFashionMnistRows, data::kFashionMnistCols, 1, data::kFashionMnistClasses,
              true};
    case DatasetKind::cifar10:
      return {data::kCifarSide, data::kCifarSide, data::kCifarChannels, data::kCifar10Classes,
              false};
    case DatasetKind::cifar100:
      return {data::kCifarSide, data::kCifarSide, data::kCifarChannels, data::kCifar100FineClasses,
              false};
    case DatasetKind::synthetic:
      return {spec.synthetic.height, spec.synthetic.width, spec.synthetic.channels,
              spec.synthetic.classes, false};
    case DatasetKind::text: return {};  // no images; the vocab size is known once the file is read
  }
  return {};
}

LoadedData load_data(const DatasetSpec& spec, std::uint64_t seed,
                     std::optional<std::int64_t> max_samples) {
  LoadedData out;
  out.spec = spec;
  out.geometry = dataset_geometry(spec);
  switch (spec.kind) {
    case DatasetKind::fashion_mnist: {
      const data::FashionMnist d = data::load_fashion_mnist(spec.dir);
      out.train = data::Pipeline(d.x_train, d.y_train);
      out.test = data::Pipeline(d.x_test, d.y_test);
      break;
    }
    case DatasetKind::cifar10:
    case DatasetKind::cifar100: {
      const data::Cifar d = spec.kind == DatasetKind::cifar10 ? data::load_cifar10(spec.dir)
                                                              : data::load_cifar100(spec.dir);
      out.train = data::Pipeline(d.x_train, d.y_train);
      out.test = data::Pipeline(d.x_test, d.y_test);
      break;
    }
    case DatasetKind::synthetic: {
      const data::SyntheticImages images({.height = spec.synthetic.height,
                                          .width = spec.synthetic.width,
                                          .channels = spec.synthetic.channels,
                                          .classes = spec.synthetic.classes,
                                          .seed = seed});
      // The pipelines share the pool; `images` itself may go.
      out.train = images.pipeline(spec.synthetic.samples);
      out.test = images.pipeline(synthetic_test_samples(spec.synthetic.samples));
      break;
    }
    case DatasetKind::text:
      throw ValueError("--dataset text:" + spec.dir +
                       " holds text for a language model; this command's model takes images or "
                       "feature rows (use an image data set, e.g. fashion_mnist)");
  }
  out.train = first(out.train, max_samples);
  out.test = first(out.test, max_samples);
  return out;
}

data::TokenDataset load_text_dataset(const DatasetSpec& spec, double validation_fraction) {
  if (spec.kind != DatasetKind::text) {
    throw ValueError("load_text_dataset: --dataset " + spec.name +
                     " is not a text data set; expected text:PATH");
  }
  return data::open_text_dataset(spec.dir, {.validation_fraction = validation_fraction});
}

std::int64_t model_channels(const ModelChoice& model, const DataGeometry& g) {
  const bool rgb_network =
      model.kind == ModelKind::efficientnet || model.kind == ModelKind::resnet50;
  return rgb_network && g.channels == 1 ? 3 : g.channels;
}

data::Pipeline model_pipeline(const data::Pipeline& raw, const DataGeometry& g,
                              const ModelChoice& model, std::int64_t input_size) {
  data::Pipeline p = raw;
  if (model.is_language_model()) return p;  // token windows, as the model takes them
  if (!model.takes_images()) {
    return g.flat ? p : p.map(data::flatten());
  }
  if (g.flat) p = p.map(data::reshape_images(g.height, g.width, g.channels));
  // Resize before repeating the channel: bilinear interpolation treats channels independently,
  // so the result is the same and the resize touches a third of the data.
  if (g.height != input_size || g.width != input_size) {
    p = p.map(data::resize(input_size, input_size));
  }
  if (model_channels(model, g) != g.channels) p = p.map(data::grayscale_to_rgb());
  return p;
}

}  // namespace mixprec::cli
