// Synthetic image classification data for throughput runs (`mixprec bench`, `--dataset
// synthetic:224x224x3:100`): seeded uniform-noise images with labels, in bounded memory.
//
// Memory stays bounded however many samples are asked for: a fixed pool of P distinct images
// (P = min(samples, pool_samples)) is generated once, and sample i of a pipeline is pool image
// i mod P. The pipeline's dataset holds only the pool index of each sample ((N,) int64, 8 bytes a
// sample) and its label; its one step, "synthetic_images", gathers the pool images of a batch.
// So 100,000 samples of 224x224x3 cost 0.8 MB of indices plus the pool (by default at most
// 64 MiB of float32 images), not 60 GB, and batching and shuffling work as on real data.
//
//   mp::data::SyntheticImages data({.height = 224, .width = 224, .channels = 3, .classes = 100});
//   model.fit(data.pipeline(1024), {.batch_size = 128});      // 1024 samples, 8 steps per epoch
//
// Pool image p is uniform noise in [0, 1] (float32, drawn from Generator(seed) in row-major order)
// with label p mod classes, so the labels are balanced and a model can fit the pool (the loss
// falls), which makes a throughput run also a smoke test of training.
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/data/pipeline.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

// The pool's byte budget: enough distinct images that a batch is not one image repeated (111
// images of 224x224x3, 4096 (the cap below) of 32x32x3), small next to a CNN's activations. One
// image larger than this is refused.
inline constexpr std::int64_t kSyntheticPoolBytes = std::int64_t{64} << 20;
// At most this many pool images, whatever their size.
inline constexpr std::int64_t kSyntheticMaxPool = 4096;
// Samples of the command line's synthetic:HxWxC:CLASSES when no SAMPLES is given.
inline constexpr std::int64_t kSyntheticDefaultSamples = 1024;

struct SyntheticImageOptions {
  std::int64_t height = 224;  // >= 1
  std::int64_t width = 224;   // >= 1
  std::int64_t channels = 3;  // >= 1
  std::int64_t classes = 10;  // >= 2
  // Pool images; 0: as many as fit in kSyntheticPoolBytes (at least 1, at most
  // kSyntheticMaxPool). A pipeline of fewer samples uses only the first ones.
  std::int64_t pool_samples = 0;
  std::uint64_t seed = 0;
};

class SyntheticImages {
 public:
  // ValueError for a size < 1, fewer than 2 classes, a negative pool size, or one image larger
  // than kSyntheticPoolBytes.
  explicit SyntheticImages(const SyntheticImageOptions& options);

  const SyntheticImageOptions& options() const { return options_; }
  std::int64_t pool_size() const { return pool_images_.dim(0); }
  const Tensor& pool_images() const { return pool_images_; }  // (P, H, W, C) float32 in [0, 1]
  const Tensor& pool_labels() const { return pool_labels_; }  // (P,) int64, p mod classes

  // `samples` (>= 1, ValueError otherwise) samples: sample i is pool image i mod P with its label.
  // The pipeline's dataset is (index (N,) int64, label (N,) int64) and its first step gathers the
  // images, so a batch comes out as x (b, H, W, C) float32 and y (b,) int64.
  Pipeline pipeline(std::int64_t samples) const;

 private:
  SyntheticImageOptions options_;
  Tensor pool_images_;
  Tensor pool_labels_;
};

// The command line's "synthetic:HxWxC:CLASSES[:SAMPLES]", e.g. "synthetic:224x224x3:100" or
// "synthetic:32x32x3:10:5000".
struct SyntheticSpec {
  std::int64_t height = 0, width = 0, channels = 0;
  std::int64_t classes = 0;
  std::int64_t samples = kSyntheticDefaultSamples;
};

// Parses a spec; ValueError saying which part is malformed and showing the expected form for a
// wrong prefix, a missing or extra part, a non-number, a zero size, or fewer than 2 classes.
SyntheticSpec parse_synthetic_spec(const std::string& spec);

}  // namespace mixprec::data

#pragma GCC visibility pop
