// The data sets of --dataset, loaded into pipelines, and the per-batch preprocessing each model
// needs (data::Pipeline steps, as seed 002 maps resize over tf.data batches):
//
//   data set        stored as (one sample)              classes
//   fashion_mnist   (784,) float32 in [0, 1]            10      /usr/share/datasets/fashion-mnist
//   cifar10:DIR     (32, 32, 3) float32 in [0, 1]       10      the binary files (data/cifar.h)
//   cifar100:DIR    (32, 32, 3) float32 in [0, 1]       100     fine labels
//   synthetic:HxWxC:CLASSES[:SAMPLES]                   CLASSES a seeded pool (data/synthetic.h)
//   text:PATH       tokens for language models: load_text_dataset() below, not load_data()
//
//   model                 steps added per batch
//   mlp                   flatten (image data sets only: the mlp takes rows)
//   cnn                   reshape_images(28, 28, 1) for Fashion-MNIST; resize when --input-size
//                         differs from the data's size
//   efficientnet, resnet  reshape_images for Fashion-MNIST; resize(S, S) to --input-size;
//                         grayscale_to_rgb for one-channel images (after the resize: the same
//                         values, a third of the interpolation work)
//
// Synthetic data has no held-out set: its test split is ceil(SAMPLES / 5) samples of the same
// pool, so test accuracy there shows the model fitting the pool, not generalising.
#pragma once

#include <cstdint>
#include <optional>

#include "mixprec/mixprec.h"
#include "models.h"
#include "options.h"

namespace mixprec::cli {

// One sample's image geometry and the label count, known from the spec before loading.
struct DataGeometry {
  std::int64_t height = 0, width = 0, channels = 0;
  std::int64_t classes = 0;
  bool flat = false;  // stored as rows of height * width * channels (Fashion-MNIST)
};
DataGeometry dataset_geometry(const DatasetSpec& spec);

struct LoadedData {
  DatasetSpec spec;
  DataGeometry geometry;
  data::Pipeline train;  // as stored (see above), no model steps yet
  data::Pipeline test;
  // text: fit's batches per epoch (the training windows hold every epoch's), and the validation
  // windows are the test split (the text's last --validation-split).
  std::optional<std::int64_t> steps_per_epoch;
};

// Loads the data set (DataError with a hint when files are missing or bad). max_samples keeps the
// first N training and the first N test samples. `seed` seeds synthetic data. A text data set is
// a ValueError here (its samples are windows whose length the model sets: load_text_dataset).
LoadedData load_data(const DatasetSpec& spec, std::uint64_t seed,
                     std::optional<std::int64_t> max_samples);

// --dataset text:PATH for a language model (data::open_text_dataset): PATH a token file
// (recognised by its magic, whatever its name: `mixprec tokenize` writes them) is mapped; any other
// file, or a directory of fortune databases, is read as text (data/text_corpus.h) and tokenized in
// memory with the byte tokenizer (vocab 257, end-of-text after each document). The last
// validation_fraction (in [0, 1)) of the tokens validate. Then:
//   data::TokenDataset tokens = load_text_dataset(spec, 0.1);
//   model.fit(tokens.train_windows({.context = T, .batch_size = B, .seed = seed}), ...
//             .validation_data = tokens.validation_windows(T));
// DataError naming the path for a missing or bad file; ValueError for a spec of another kind.
data::TokenDataset load_text_dataset(const DatasetSpec& spec, double validation_fraction);

// The channels a model sees: 3 after grayscale_to_rgb for the ImageNet networks, else the data's.
std::int64_t model_channels(const ModelChoice& model, const DataGeometry& geometry);

// `raw` with the steps `model` needs at image side `input_size` (see above).
data::Pipeline model_pipeline(const data::Pipeline& raw, const DataGeometry& geometry,
                              const ModelChoice& model, std::int64_t input_size);

}  // namespace mixprec::cli
