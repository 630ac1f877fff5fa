// Synthetic images (a seeded pool gathered per batch) and the parser of the command line's
// "synthetic:HxWxC:CLASSES[:SAMPLES]".
#include "mixprec/data/synthetic.h"

#include <algorithm>
#include <string>
#include <vector>

#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/random.h"

namespace mixprec::data {

namespace {

// Spec numbers above this are refused as typos (a 10^9-pixel side, a billion classes).
constexpr std::int64_t kMaxSpecNumber = 1'000'000'000;

void check_at_least(const char* what, std::int64_t v, std::int64_t low) {
  if (v < low) {
    throw ValueError(std::string("SyntheticImages: ") + what +
                     " must be >= " + std::to_string(low) + ", got " + std::to_string(v));
  }
}

std::string expected_form() {
  return "expected synthetic:HxWxC:CLASSES[:SAMPLES], e.g. synthetic:224x224x3:100 or "
         "synthetic:32x32x3:10:5000";
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {
    const auto end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

// A positive decimal number (digits only), at most kMaxSpecNumber.
std::int64_t parse_number(const std::string& spec, const std::string& text, const char* what) {
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || text.size() > 10) {
    throw ValueError("synthetic data '" + spec + "': the " + what + " '" + text +
                     "' is not a positive whole number; " + expected_form());
  }
  const std::int64_t v = std::stoll(text);
  if (v < 1 || v > kMaxSpecNumber) {
    throw ValueError("synthetic data '" + spec + "': the " + what + " must be in [1, " +
                     std::to_string(kMaxSpecNumber) + "], got " + text + "; " + expected_form());
  }
  return v;
}

}  // namespace

SyntheticImages::SyntheticImages(const SyntheticImageOptions& options) : options_(options) {
  check_at_least("height", options.height, 1);
  check_at_least("width", options.width, 1);
  check_at_least("channels", options.channels, 1);
  check_at_least("classes", options.classes, 2);
  check_at_least("pool_samples", options.pool_samples, 0);
  // In double: exact far beyond the budget, and no integer overflow for absurd sizes.
  const double image_bytes =
      static_cast<double>(sizeof(float)) * static_cast<double>(options.height) *
      static_cast<double>(options.width) * static_cast<double>(options.channels);
  if (image_bytes > static_cast<double>(kSyntheticPoolBytes)) {
    throw ValueError("SyntheticImages: one " + std::to_string(options.height) + "x" +
                     std::to_string(options.width) + "x" + std::to_string(options.channels) +
                     " float32 image is larger than the " +
                     std::to_string(kSyntheticPoolBytes >> 20) +
                     " MiB synthetic pool; use a smaller image size");
  }
  const std::int64_t pool =
      options.pool_samples > 0
          ? options.pool_samples
          : std::clamp<std::int64_t>(
                static_cast<std::int64_t>(static_cast<double>(kSyntheticPoolBytes) / image_bytes),
                1, kSyntheticMaxPool);
  Generator gen(options.seed);
  pool_images_ = random_uniform(Shape{pool, options.height, options.width, options.channels}, 0.0,
                                1.0, {}, gen);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(pool));
  for (std::int64_t p = 0; p < pool; ++p) labels[static_cast<std::size_t>(p)] = p % options.classes;
  pool_labels_ = from_vector(labels, Shape{pool});
}

Pipeline SyntheticImages::pipeline(std::int64_t samples) const {
  if (samples < 1) {
    throw ValueError("SyntheticImages::pipeline: samples must be >= 1, got " +
                     std::to_string(samples));
  }
  const std::int64_t pool = pool_size();
  std::vector<std::int64_t> index(static_cast<std::size_t>(samples));
  std::vector<std::int64_t> labels(static_cast<std::size_t>(samples));
  const std::int64_t* pool_labels = pool_labels_.data<std::int64_t>();
  for (std::int64_t i = 0; i < samples; ++i) {
    index[static_cast<std::size_t>(i)] = i % pool;
    labels[static_cast<std::size_t>(i)] = pool_labels[i % pool];
  }
  // The step holds the pool (shared storage, not a copy) and gathers a batch's images by index:
  // x (b,) int64 -> (b, H, W, C) float32.
  const Tensor images = pool_images_;
  Step gather("synthetic_images", [images](Batch b) {
    const std::vector<std::int64_t> rows = b.x.to_vector<std::int64_t>();
    b.x = take_rows(images, rows);
    return b;
  });
  return Pipeline(Dataset(from_vector(index, Shape{samples}), from_vector(labels, Shape{samples})),
                  {gather});
}

SyntheticSpec parse_synthetic_spec(const std::string& spec) {
  const std::vector<std::string> parts = split(spec, ':');
  if (parts[0] != "synthetic") {
    throw ValueError("synthetic data '" + spec + "': does not start with 'synthetic:'; " +
                     expected_form());
  }
  if (parts.size() < 3 || parts.size() > 4) {
    throw ValueError("synthetic data '" + spec + "': expected 2 or 3 parts after 'synthetic:', " +
                     "got " + std::to_string(parts.size() - 1) + "; " + expected_form());
  }
  const std::vector<std::string> sizes = split(parts[1], 'x');
  if (sizes.size() != 3) {
    throw ValueError("synthetic data '" + spec + "': the image size '" + parts[1] +
                     "' is not HxWxC (height x width x channels); " + expected_form());
  }
  SyntheticSpec out;
  out.height = parse_number(spec, sizes[0], "height");
  out.width = parse_number(spec, sizes[1], "width");
  out.channels = parse_number(spec, sizes[2], "channel count");
  out.classes = parse_number(spec, parts[2], "class count");
  if (out.classes < 2) {
    throw ValueError("synthetic data '" + spec + "': at least 2 classes are needed, got " +
                     parts[2] + "; " + expected_form());
  }
  if (parts.size() == 4) out.samples = parse_number(spec, parts[3], "sample count");
  return out;
}

}  // namespace mixprec::data
