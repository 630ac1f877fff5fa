// TokenDataset: tokens numbered so that every window can be checked against its start (token i of
// the test files is i % vocab), the contiguous split, training windows (inside the training part,
// deterministic given the seed, the requested count), validation windows (consecutive, not
// overlapping), the errors, and a fit() on the training pipeline.
#include "mixprec/data/token_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

using testing::expect_error;
using testing::TempDir;

constexpr std::int64_t kVocab = 50000;  // > 2^15: the high byte of the tokens matters

// n tokens, token i = (i * 7919) % kVocab: distinct for i < kVocab, so a window shows its start.
std::vector<std::int32_t> numbered(std::int64_t n) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    t[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * 7919 % kVocab);
  return t;
}

class TokenDatasetTest : public ::testing::Test {
 protected:
  TokenDataset open(std::int64_t n, double fraction) {
    tokens_ = numbered(n);
    write_token_file(dir_.file("t.tok"), tokens_, kVocab);
    return TokenDataset(dir_.file("t.tok"), {.validation_fraction = fraction});
  }
  // The start of a window whose x is `row` (checked against the tokens, with y = x shifted).
  std::int64_t start_of(const std::vector<std::int32_t>& x, const std::vector<std::int32_t>& y,
                        std::int64_t row, std::int64_t T) {
    const auto at = [&](std::int64_t i) { return tokens_[static_cast<std::size_t>(i)]; };
    std::int64_t start = -1;
    for (std::int64_t s = 0; s < static_cast<std::int64_t>(tokens_.size()); ++s) {
      if (at(s) == x[static_cast<std::size_t>(row * T)]) start = s;
    }
    EXPECT_GE(start, 0);
    for (std::int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(x[static_cast<std::size_t>(row * T + t)], at(start + t)) << "row " << row;
      EXPECT_EQ(y[static_cast<std::size_t>(row * T + t)], at(start + t + 1)) << "row " << row;
    }
    return start;
  }
  TempDir dir_;
  std::vector<std::int32_t> tokens_;
};

TEST_F(TokenDatasetTest, MapsTheFileAndSplitsContiguously) {
  const TokenDataset d = open(1000, 0.1);
  EXPECT_EQ(d.size(), 1000);
  EXPECT_EQ(d.vocab_size(), kVocab);
  EXPECT_EQ(d.source(), dir_.file("t.tok"));
  EXPECT_EQ(d.train_tokens(), 900);  // floor(1000 * 0.9)
  EXPECT_EQ(d.validation_tokens(), 100);
  for (std::int64_t i : {0, 1, 899, 900, 999})
    EXPECT_EQ(d.token(i), tokens_[static_cast<std::size_t>(i)]);
  expect_error<ValueError>([&] { d.token(1000); }, {"index 1000", "[0, 1000)"});
  // floor(10 * (1 - 0.25)) = 7; no validation with 0.
  EXPECT_EQ(open(10, 0.25).train_tokens(), 7);
  EXPECT_EQ(open(10, 0.0).train_tokens(), 10);
  EXPECT_EQ(open(10, 0.0).validation_tokens(), 0);
  expect_error<ValueError>([&] { open(10, 1.0); }, {"validation_fraction must be in [0, 1)"});
  expect_error<ValueError>([&] { open(10, -0.1); }, {"validation_fraction"});
}

TEST_F(TokenDatasetTest, WindowsAreXAndXShiftedByOne) {
  const TokenDataset d = open(100, 0.0);
  const std::vector<std::int64_t> starts = {0, 37, 95};
  const Batch b = d.windows(starts, 4);
  EXPECT_EQ(b.x.dtype(), DType::int32);
  EXPECT_EQ(b.y.dtype(), DType::int32);
  EXPECT_EQ(b.x.shape(), Shape({3, 4}));
  EXPECT_EQ(b.y.shape(), Shape({3, 4}));
  const auto x = b.x.to_vector<std::int32_t>(), y = b.y.to_vector<std::int32_t>();
  for (std::int64_t r = 0; r < 3; ++r)
    EXPECT_EQ(start_of(x, y, r, 4), starts[static_cast<std::size_t>(r)]);
  // 96 + 4 + 1 > 100: the last token is missing.
  const std::vector<std::int64_t> late = {96};
  expect_error<ValueError>([&] { d.windows(late, 4); }, {"window at 96", "100 tokens"});
  const std::vector<std::int64_t> negative = {-1};
  expect_error<ValueError>([&] { d.windows(negative, 4); }, {"window at -1"});
}

TEST_F(TokenDatasetTest, TrainingWindowsStayInTheTrainingPartAndFollowTheSeed) {
  const TokenDataset d = open(2000, 0.2);  // training part: 1600 tokens
  const TokenWindowOptions options{.context = 8, .batch_size = 4, .seed = 5};
  // Default: 1600 / (4 * 8) = 50 batches, 200 windows.
  EXPECT_EQ(d.steps_per_epoch(options), 50);
  const Pipeline p = d.train_windows(options);
  ASSERT_EQ(p.size(), 200);
  EXPECT_EQ(p.describe(), "token_windows(8)");
  const Batch b = p.batch(0, 200);
  ASSERT_EQ(b.x.shape(), Shape({200, 8}));
  const auto x = b.x.to_vector<std::int32_t>(), y = b.y.to_vector<std::int32_t>();
  std::set<std::int64_t> starts;
  for (std::int64_t r = 0; r < 200; ++r) {
    const std::int64_t s = start_of(x, y, r, 8);
    EXPECT_LE(s + 8, 1599) << "the target of a training window is a validation token";
    starts.insert(s);
  }
  EXPECT_GT(starts.size(), 150u);  // 200 draws from 1592 starts: few repeats
  // The same seed, the same windows; another seed, others.
  EXPECT_EQ(d.train_windows(options).dataset().features().to_vector<std::int64_t>(),
            p.dataset().features().to_vector<std::int64_t>());
  TokenWindowOptions other = options;
  other.seed = 6;
  EXPECT_NE(d.train_windows(other).dataset().features().to_vector<std::int64_t>(),
            p.dataset().features().to_vector<std::int64_t>());
}

TEST_F(TokenDatasetTest, WindowCountFollowsStepsAndEpochs) {
  const TokenDataset d = open(500, 0.0);
  EXPECT_EQ(d.train_windows({.context = 4, .batch_size = 3, .steps_per_epoch = 7}).size(), 21);
  EXPECT_EQ(
      d.train_windows({.context = 4, .batch_size = 3, .steps_per_epoch = 7, .epochs = 2}).size(),
      42);
  // Fewer training tokens than B * T: still one batch an epoch.
  EXPECT_EQ(d.steps_per_epoch({.context = 100, .batch_size = 10}), 1);
  expect_error<ValueError>([&] { d.train_windows({.context = 0}); }, {"context", ">= 1, got 0"});
  expect_error<ValueError>([&] { d.train_windows({.context = 4, .batch_size = 0}); },
                           {"batch_size must be >= 1"});
  expect_error<ValueError>([&] { d.train_windows({.context = 4, .steps_per_epoch = 0}); },
                           {"steps_per_epoch must be >= 1"});
  expect_error<ValueError>([&] { d.train_windows({.context = 4, .epochs = 0}); },
                           {"epochs must be >= 1"});
  expect_error<ValueError>([&] { d.train_windows({.context = 500}); },
                           {"training part", "has 500 tokens", "needs 501"});
  expect_error<ValueError>(
      [&] { d.train_windows({.context = 4, .batch_size = 1 << 20, .steps_per_epoch = 1 << 20}); },
      {"more than the limit"});
}

TEST_F(TokenDatasetTest, ValidationWindowsCoverTheValidationPartInOrder) {
  const TokenDataset d = open(1000, 0.1);  // validation: tokens 900..999
  const Pipeline v = d.validation_windows(16);
  // (100 - 1) / 16 = 6 windows: starts 900, 916, ..., 980; the last target is token 996.
  ASSERT_EQ(v.size(), 6);
  const Batch b = v.batch(0, 6);
  const auto x = b.x.to_vector<std::int32_t>(), y = b.y.to_vector<std::int32_t>();
  for (std::int64_t r = 0; r < 6; ++r) EXPECT_EQ(start_of(x, y, r, 16), 900 + 16 * r);
  // Exactly T + 1 tokens make one window.
  EXPECT_EQ(open(1000, 0.1).validation_windows(99).size(), 1);
  expect_error<ValueError>([&] { open(1000, 0.1).validation_windows(100); },
                           {"validation part", "has 100 tokens", "needs 101"});
  expect_error<ValueError>([&] { open(1000, 0.0).validation_windows(4); },
                           {"validation part", "has 0 tokens"});
}

TEST_F(TokenDatasetTest, InMemoryTokensBehaveAsAFile) {
  const std::vector<std::int32_t> t = numbered(300);
  const TokenDataset mem(t, kVocab, {.validation_fraction = 0.5});
  const TokenDataset file = open(300, 0.5);
  EXPECT_EQ(mem.source(), "(memory)");
  EXPECT_EQ(mem.train_tokens(), 150);
  const TokenWindowOptions options{.context = 5, .batch_size = 2, .seed = 1};
  EXPECT_EQ(mem.train_windows(options).batch(0, 8).x.to_vector<std::int32_t>(),
            file.train_windows(options).batch(0, 8).x.to_vector<std::int32_t>());
  const std::vector<std::int32_t> bad = {1, 2, kVocab};
  expect_error<ValueError>([&] { TokenDataset(bad, kVocab); }, {"token 2 is 50000"});
  const std::vector<std::int32_t> negative = {-1};
  expect_error<ValueError>([&] { TokenDataset(negative, kVocab); }, {"token 0 is -1"});
  expect_error<ValueError>([&] { TokenDataset(t, 65537); }, {"vocab size 65537"});
}

TEST_F(TokenDatasetTest, BadFilesAreRefusedBeforeMapping) {
  tokens_ = {1, 2, 3};
  write_token_file(dir_.file("small.tok"), tokens_, 4);
  // Make token 1 out of range: byte 24 + 2 = 0x10 -> token 16 >= 4.
  {
    std::fstream f(dir_.file("small.tok"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(26);
    f.put(16);
  }
  expect_error<DataError>([&] { TokenDataset(dir_.file("small.tok")); },
                          {"token 1 is 16", "vocab size 4", "small.tok"});
  expect_error<DataError>([&] { TokenDataset(dir_.file("none.tok")); },
                          {"none.tok", "cannot open"});
}

TEST_F(TokenDatasetTest, OpenTextDatasetMapsTokenFilesAndTokenizesText) {
  // A token file under any name is recognised by its magic.
  tokens_ = {1, 2, 3, 4};
  write_token_file(dir_.file("tokens.txt"), tokens_, 7);
  EXPECT_TRUE(is_token_file(dir_.file("tokens.txt")));
  const TokenDataset mapped = open_text_dataset(dir_.file("tokens.txt"));
  EXPECT_EQ(mapped.vocab_size(), 7);
  EXPECT_EQ(mapped.size(), 4);
  // Text: bytes, end-of-text (256) after the document.
  { std::ofstream(dir_.file("story.tok"), std::ios::binary) << "MPTOKEN, not quite"; }
  EXPECT_FALSE(is_token_file(dir_.file("story.tok")));
  const TokenDataset text = open_text_dataset(dir_.file("story.tok"), {.validation_fraction = 0.5});
  EXPECT_EQ(text.vocab_size(), 257);
  ASSERT_EQ(text.size(), 19);
  EXPECT_EQ(text.token(0), 'M');
  EXPECT_EQ(text.token(17), 'e');
  EXPECT_EQ(text.token(18), 256);
  EXPECT_EQ(text.train_tokens(), 9);  // floor(19 * 0.5)
  // A fortune directory: one document per entry.
  std::filesystem::create_directory(dir_.path() / "db");
  { std::ofstream(dir_.path() / "db" / "quotes", std::ios::binary) << "Ab\n%\nC\n"; }
  EXPECT_FALSE(is_token_file(dir_.file("db")));
  const TokenDataset fortunes = open_text_dataset(dir_.file("db"));
  ASSERT_EQ(fortunes.size(), 5);
  const std::vector<std::int32_t> expected = {'A', 'b', 256, 'C', 256};
  for (std::int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(fortunes.token(i), expected[static_cast<std::size_t>(i)]);
  expect_error<DataError>([&] { open_text_dataset(dir_.file("none")); },
                          {"none", "does not exist"});
}

// fit() takes the training pipeline as any other: the steps run, W / B batches an epoch. The
// model sees x as float32 and predicts the last target (a Dense softmax over the vocabulary).
TEST_F(TokenDatasetTest, FitTrainsOnTheWindows) {
  std::vector<std::int32_t> t(400);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>(i % 5);
  const TokenDataset d(t, 5, {.validation_fraction = 0.25});
  const Pipeline train =
      d.train_windows({.context = 4, .batch_size = 8, .steps_per_epoch = 6, .seed = 3})
          .map(Step("last_target", [](Batch b) {
            b.x = cast(b.x, DType::float32);
            b.y = b.y.slice(1, 3, 4).reshape(Shape{b.y.dim(0)});
            return b;
          }));
  clear_session();
  set_seed(1);
  Sequential model({layers::Dense(5, {.activation = "softmax"})});
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.05}),
                 .loss = std::string("sparse_categorical_crossentropy")});
  const History h =
      model.fit(train, {.batch_size = 8, .epochs = 3, .verbose = Verbosity::silent, .seed = 4});
  ASSERT_EQ(h.epochs.size(), 3u);
  EXPECT_EQ(h.epochs[0].step_ms.size(), 6u);
  EXPECT_LT(h.history.at("loss").back(), h.history.at("loss").front());
}

}  // namespace
}  // namespace mixprec::data
