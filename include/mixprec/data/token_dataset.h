// A tokenized corpus for language-model training: a token file (token_file.h) mapped read-only,
// split into a training and a validation part, served as batches of windows through
// data::Pipeline, so Model::fit and Model::evaluate take it as they take any pipeline.
//
//   mp::data::TokenDataset tokens("fortunes.tok", {.validation_fraction = 0.1});
//   auto train = tokens.train_windows({.context = 128, .batch_size = 32, .seed = 42});
//   model.fit(train, {.batch_size = 32, .epochs = 10,
//                     .validation_data = tokens.validation_windows(128)});
//   // each batch: x (32, 128) int32 tokens, y (32, 128) int32 = x shifted left by one
//
// The split is contiguous: the LAST validation_fraction of the tokens validate (split_at =
// floor(N * (1 - fraction)), as Dataset::split_validation), the first split_at train.
//
// train_windows: W = batch_size * steps_per_epoch windows of T + 1 tokens, their starts drawn
// uniformly (with replacement) from the training part with Generator(seed); x = window[0:T],
// y = window[1:T+1]. The pipeline's dataset holds only the starts ((W,) int64, 8 bytes a
// window); its step "token_windows(T)" reads the tokens of a batch from the mapping. fit shuffles
// the windows each epoch (FitOptions::seed) and runs W / batch_size batches an epoch; for fresh
// windows in every epoch ask for several epochs' worth (.epochs below) and pass
// FitOptions::steps_per_epoch = steps_per_epoch(): each epoch then takes its batches from a new
// shuffle of the whole set. The same seed gives the same windows.
//
// validation_windows: the validation part cut into consecutive windows that do not overlap
// (starts split_at, split_at + T, ...: every token is predicted once), in order; for
// Model::evaluate or FitOptions::validation_data. Do not use fit's validation_split on these
// pipelines: it would split the windows, not the text.
//
// The mapping is shared by every pipeline made from the dataset (copies are cheap) and stays
// valid while one of them lives. The file must not change while mapped (reading a truncated
// mapping is a SIGBUS, as for any mapped file); `mixprec tokenize` replaces files atomically.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mixprec/data/pipeline.h"
#include "mixprec/data/token_file.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

struct TokenDatasetOptions {
  // In [0, 1): the last fraction of the tokens validates. 0: no validation part.
  double validation_fraction = 0.0;
};

struct TokenWindowOptions {
  std::int64_t context = 0;      // T >= 1: tokens a window feeds the model
  std::int64_t batch_size = 32;  // B >= 1
  // Batches per epoch. Default: training tokens / (B * T), at least 1 (about one pass over the
  // training tokens an epoch).
  std::optional<std::int64_t> steps_per_epoch;
  // Epochs' worth of distinct windows to draw (>= 1): W = B * steps_per_epoch * epochs.
  std::int64_t epochs = 1;
  std::uint64_t seed = 0;
};

namespace detail {
struct TokenStorage;  // the mapping (or memory) holding the tokens
}

class TokenDataset {
 public:
  // Maps a token file after every check of read_token_file (DataError naming the file). A
  // ValueError for a fraction outside [0, 1).
  explicit TokenDataset(const std::string& path, TokenDatasetOptions options = {});
  // Tokens held in memory (e.g. text tokenized on the fly); the same checks as a file's
  // (ValueError for a token outside [0, vocab_size) naming its index, a vocab size outside
  // [1, 65536]).
  TokenDataset(std::span<const std::int32_t> tokens, std::int64_t vocab_size,
               TokenDatasetOptions options = {});

  const std::string& source() const;  // the file's path, or "(memory)"
  std::int64_t vocab_size() const;
  std::int64_t size() const;  // all tokens
  std::int64_t train_tokens() const { return split_at_; }
  std::int64_t validation_tokens() const { return size() - split_at_; }
  // Token i of the whole sequence (ValueError outside [0, size())).
  std::int32_t token(std::int64_t i) const;

  // The batch of windows starting at `starts` (offsets into the whole sequence, each with
  // start + T + 1 <= size(), a ValueError otherwise): x (b, T) and y (b, T) int32, CPU.
  Batch windows(std::span<const std::int64_t> starts, std::int64_t context) const;

  // Batches per epoch of train_windows(options) (options.steps_per_epoch or the default).
  std::int64_t steps_per_epoch(const TokenWindowOptions& options) const;
  // See above. ValueError for T or B < 1, steps or epochs < 1, or a training part shorter than
  // T + 1 tokens (naming both counts).
  Pipeline train_windows(const TokenWindowOptions& options) const;
  // See above. ValueError for T < 1 or a validation part shorter than T + 1 tokens.
  Pipeline validation_windows(std::int64_t context) const;

 private:
  std::shared_ptr<const detail::TokenStorage> storage_;
  std::int64_t split_at_ = 0;
};

// True for a regular file that starts with the token files' magic ("MPTOKENS"), whatever its name.
bool is_token_file(const std::string& path);

// The command line's --dataset text:PATH. A token file (is_token_file) is mapped; any other file,
// or a directory of fortune databases, is read as text (text_corpus.h, default limits) and
// tokenized in memory with the ByteTokenizer (vocab 257, end-of-text after each document).
// DataError naming the path for a missing or bad file.
TokenDataset open_text_dataset(const std::string& path, TokenDatasetOptions options = {});

}  // namespace mixprec::data

#pragma GCC visibility pop
