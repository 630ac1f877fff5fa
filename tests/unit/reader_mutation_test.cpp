// Mutation tests of every reader of outside bytes (issue 11): thousands of deterministic
// mutations of a valid file each either load or throw a mixprec::Error; nothing else escapes
// (no std::bad_alloc from a trusted size, no std::length_error, no crash, no hang). The same
// readers have libFuzzer targets in tests/fuzz/.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/mutator.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `read` on `count` mutations of `seed`; counts those that loaded. Any exception that is not
// a mixprec::Error fails the test with the mutation's index.
template <typename Read>
int mutate_and_read(const std::string& seed, int count, std::uint64_t rng_seed, Read&& read) {
  Generator g(rng_seed);
  int loaded = 0;
  for (int i = 0; i < count; ++i) {
    const std::string bytes = testing::mutate(seed, g);
    try {
      read(bytes);
      ++loaded;
    } catch (const Error&) {
      // refused with a library error: what a bad file must get
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutation " << i << ": " << typeid(e).name() << ": " << e.what();
      return loaded;
    }
  }
  return loaded;
}

TEST(ReaderMutationTest, Safetensors) {
  testing::TempDir dir;
  io::save_safetensors(dir.path() / "s.safetensors",
                       {{"a", ones({3, 4})},
                        {"b", zeros({2}, {.dtype = DType::bfloat16})},
                        {"c", full({}, 3.0, {.dtype = DType::int64})}},
                       {{"format", "test"}});
  const std::string seed = read_file(dir.path() / "s.safetensors");
  const auto parse = [](const std::string& b) {
    return io::parse_safetensors({reinterpret_cast<const std::byte*>(b.data()), b.size()},
                                 "mutated");
  };
  const io::SafetensorsContents original = parse(seed);
  const auto bytes_of = [](const Tensor& t) {
    const auto* p = static_cast<const char*>(t.data_ptr());
    return std::string(p, p + t.nbytes());
  };
  const int loaded = mutate_and_read(seed, 6000, 1, [&](const std::string& b) {
    const io::SafetensorsContents c = parse(b);
    // The file carries checksums (issue 33): whatever still loads is the original, never a
    // silently different tensor (a flip in the header's padding or white space loads).
    EXPECT_EQ(c.metadata, original.metadata);
    ASSERT_EQ(c.tensors.size(), original.tensors.size());
    for (std::size_t i = 0; i < c.tensors.size(); ++i) {
      EXPECT_EQ(c.tensors[i].first, original.tensors[i].first);
      EXPECT_EQ(c.tensors[i].second.shape(), original.tensors[i].second.shape());
      EXPECT_EQ(bytes_of(c.tensors[i].second), bytes_of(original.tensors[i].second));
    }
  });
  EXPECT_LT(loaded, 6000) << "the mutations must break some files";
}

TEST(ReaderMutationTest, TrainingCheckpoint) {
  testing::TempDir dir;
  Model model = testing::tiny_model(1, true);
  model.compile({.optimizer = optimizers::Adam()});
  const auto data = testing::blobs(32, 1);
  model.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .verbose = Verbosity::silent});
  const auto path = dir.path() / "c.safetensors";
  io::save_checkpoint(model, path);
  const std::string seed = read_file(path);
  const auto mutated = dir.path() / "m.safetensors";
  mutate_and_read(seed, 600, 2, [&](const std::string& b) {
    write_file(mutated, b);
    io::load_checkpoint(model, mutated);
  });
}

std::string idx_file() {
  // ubyte, 3 dims (4, 3, 2): magic 00 00 08 03, dims big-endian, payload 24 bytes.
  std::string s = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 2};
  for (int i = 0; i < 24; ++i) s += static_cast<char>(i * 7);
  return s;
}

std::string gzip(const std::string& plain, const std::filesystem::path& scratch) {
  gzFile f = gzopen(scratch.c_str(), "wb");
  gzwrite(f, plain.data(), static_cast<unsigned>(plain.size()));
  gzclose(f);
  return read_file(scratch);
}

TEST(ReaderMutationTest, IdxPlainAndGzip) {
  testing::TempDir dir;
  const auto path = dir.path() / "m.idx";
  for (const bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "gzip" : "plain");
    const std::string seed = compressed ? gzip(idx_file(), dir.path() / "seed.gz") : idx_file();
    write_file(path, seed);
    ASSERT_EQ(data::read_idx(path.string()).numel(), 24);
    mutate_and_read(seed, 1200, compressed ? 4 : 3, [&](const std::string& b) {
      write_file(path, b);
      (void)data::read_idx(path.string());
    });
  }
}

TEST(ReaderMutationTest, CifarBinary) {
  testing::TempDir dir;
  // CIFAR-100: records of coarse label, fine label, 3072 pixel bytes; two records per file.
  std::string records;
  for (int r = 0; r < 2; ++r) {
    records += static_cast<char>(r);
    records += static_cast<char>(r * 3);
    records += std::string(3072, static_cast<char>(r + 1));
  }
  write_file(dir.path() / "train.bin", records);
  write_file(dir.path() / "test.bin", records);
  ASSERT_EQ(data::load_cifar100(dir.str()).x_train.dim(0), 2);
  mutate_and_read(records, 500, 5, [&](const std::string& b) {
    write_file(dir.path() / "train.bin", b);
    (void)data::load_cifar100(dir.str());
  });
}

// The model config reader (model_from_json) and the compile-settings reader: every mutation of a
// valid config either builds a model or is refused with a mixprec::Error. The limits are tight
// so that a mutated extent cannot make a mutation build a large model (the reader's own refusal
// of huge ones is model_config_errors_test's subject); the whole run is bounded in time.
TEST(ReaderMutationTest, ModelConfig) {
  clear_session();
  auto in = Input({6, 6, 2}, {.name = "in"});
  auto x = layers::ZeroPadding2D(1, {.name = "pad"})(in);
  x = layers::Conv2D(3, 3, {.padding = "same", .activation = "relu", .name = "conv"})(x);
  x = layers::BatchNormalization({.name = "bn"})(x);
  auto a = layers::DepthwiseConv2D(3, {.padding = "same", .name = "dw"})(x);
  x = layers::Add({.name = "add"})({a, x});
  x = layers::Concatenate({.name = "cat"})({x, a});
  x = layers::MaxPooling2D(2, {.name = "pool"})(x);
  x = layers::Resizing(3, 3, {.name = "resize"})(x);
  x = layers::Flatten({.name = "flat"})(x);
  x = layers::Dense(4, {.activation = "tanh", .name = "dense"})(x);
  x = layers::Dropout(0.2, {.seed = 3, .name = "drop"})(x);
  x = layers::Reshape({2, 2}, {.name = "reshape"})(x);
  x = layers::Flatten({.name = "flat2"})(x);
  auto out = layers::Activation("softmax", {.dtype = "float32", .name = "probs"})(x);
  Model model(in, out, {.name = "m"});
  const std::string seed = model.to_json();
  const ModelConfigLimits limits{.max_params = 100000, .max_extent = 4096};
  ASSERT_EQ(model_from_json(seed, limits).to_json(), seed);
  const auto start = std::chrono::steady_clock::now();
  const int loaded = mutate_and_read(
      seed, 4000, 6, [&](const std::string& b) { (void)model_from_json(b, limits); });
  EXPECT_LT(loaded, 4000) << "the mutations must break some configs";
  EXPECT_GT(loaded, 0) << "some mutations (in names, values) still describe a model";

  model.compile(
      {.optimizer = mixed_precision::LossScaleOptimizer(optimizers::Adam(
           {.learning_rate = optimizers::schedules::ExponentialDecay{0.01, 10, 0.9, false}})),
       .loss = losses::CategoricalCrossentropy({.from_logits = true}),
       .metrics = {"accuracy", metrics::BinaryAccuracy({.threshold = 0.3})}});
  const std::string compile_seed = compile_config_to_json(model);
  (void)compile_options_from_json(compile_seed);
  mutate_and_read(compile_seed, 2000, 7,
                  [&](const std::string& b) { (void)compile_options_from_json(b); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace mixprec
