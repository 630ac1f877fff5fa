// TokenDataset: the token file mapped read-only (or tokens in memory, stored as the file's bytes),
// and the window pipelines over its training and validation parts.
#include "mixprec/data/token_dataset.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "data/token_file_internal.h"
#include "mixprec/creation.h"
#include "mixprec/data/text_corpus.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/error.h"
#include "mixprec/random.h"

namespace mixprec::data {

namespace detail {

// The tokens as the file stores them: `count` little-endian uint16 at `tokens`, in a read-only
// mapping of the whole file or in `memory`.
struct TokenStorage {
  std::string source;
  std::int64_t vocab_size = 0;
  std::int64_t count = 0;
  const std::uint8_t* tokens = nullptr;
  void* mapping = nullptr;
  std::size_t mapping_bytes = 0;
  std::vector<std::uint8_t> memory;

  TokenStorage() = default;
  TokenStorage(const TokenStorage&) = delete;
  TokenStorage& operator=(const TokenStorage&) = delete;
  ~TokenStorage() {
    if (mapping != nullptr) ::munmap(mapping, mapping_bytes);
  }
  std::int32_t at(std::int64_t i) const {
    const std::uint8_t* p = tokens + 2 * i;
    return static_cast<std::int32_t>(p[0] | (p[1] << 8));
  }
};

}  // namespace detail

namespace {

// At most this many windows in a training pipeline (their starts take 8 bytes each: 2 GiB).
constexpr std::int64_t kMaxWindows = std::int64_t{1} << 28;

std::int64_t split_point(std::int64_t n, double fraction) {
  if (!(fraction >= 0.0 && fraction < 1.0)) {
    throw ValueError("TokenDataset: validation_fraction must be in [0, 1), got " +
                     std::to_string(fraction) + "; e.g. 0.1 keeps the last 10% for validation");
  }
  if (fraction == 0.0) return n;
  // As Dataset::split_validation (Keras): floor(N * (1 - fraction)) in double.
  return static_cast<std::int64_t>(std::floor(static_cast<double>(n) * (1.0 - fraction)));
}

void check_positive(const char* what, std::int64_t v) {
  if (v < 1) {
    throw ValueError(std::string("TokenDataset: ") + what + " must be >= 1, got " +
                     std::to_string(v));
  }
}

}  // namespace

TokenDataset::TokenDataset(const std::string& path, TokenDatasetOptions options) {
  const double fraction = options.validation_fraction;
  (void)split_point(0, fraction);  // a bad fraction fails before the file is opened
  const detail::OpenTokenFile f = detail::open_token_file(path);
  auto storage = std::make_shared<detail::TokenStorage>();
  storage->source = path;
  storage->vocab_size = f.info.vocab_size;
  storage->count = f.info.tokens;
  // The size was checked against the header: the mapping is exactly the file.
  void* map = ::mmap(nullptr, f.file_size, PROT_READ, MAP_PRIVATE, f.fd, 0);
  const int map_errno = errno;
  ::close(f.fd);
  if (map == MAP_FAILED) {
    throw DataError("token file '" + path + "': cannot map it (" + std::to_string(f.file_size) +
                    " bytes): " + std::strerror(map_errno));
  }
  storage->mapping = map;
  storage->mapping_bytes = f.file_size;
  storage->tokens = static_cast<const std::uint8_t*>(map) + kTokenFileHeaderBytes;
  detail::check_tokens(storage->tokens, f.info, path);
  storage_ = std::move(storage);
  split_at_ = split_point(storage_->count, fraction);
}

TokenDataset::TokenDataset(std::span<const std::int32_t> tokens, std::int64_t vocab_size,
                           TokenDatasetOptions options) {
  const double fraction = options.validation_fraction;
  (void)split_point(0, fraction);
  if (vocab_size < 1 || vocab_size > kTokenFileMaxVocab) {
    throw ValueError("TokenDataset: the vocab size " + std::to_string(vocab_size) +
                     " is outside [1, " + std::to_string(kTokenFileMaxVocab) +
                     "] (tokens are stored in 16 bits)");
  }
  auto storage = std::make_shared<detail::TokenStorage>();
  storage->source = "(memory)";
  storage->vocab_size = vocab_size;
  storage->count = static_cast<std::int64_t>(tokens.size());
  storage->memory.resize(2 * tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      throw ValueError("TokenDataset: token " + std::to_string(i) + " is " +
                       std::to_string(tokens[i]) + ", outside [0, " + std::to_string(vocab_size) +
                       ") of the vocab size given");
    }
    storage->memory[2 * i] = static_cast<std::uint8_t>(tokens[i] & 0xFF);
    storage->memory[2 * i + 1] = static_cast<std::uint8_t>(tokens[i] >> 8);
  }
  storage->tokens = storage->memory.data();
  storage_ = std::move(storage);
  split_at_ = split_point(storage_->count, fraction);
}

const std::string& TokenDataset::source() const { return storage_->source; }
std::int64_t TokenDataset::vocab_size() const { return storage_->vocab_size; }
std::int64_t TokenDataset::size() const { return storage_->count; }

std::int32_t TokenDataset::token(std::int64_t i) const {
  if (i < 0 || i >= size()) {
    throw ValueError("TokenDataset::token: index " + std::to_string(i) + " is outside [0, " +
                     std::to_string(size()) + ")");
  }
  return storage_->at(i);
}

Batch TokenDataset::windows(std::span<const std::int64_t> starts, std::int64_t context) const {
  check_positive("the context (tokens per window)", context);
  const std::int64_t n = size();
  for (std::size_t k = 0; k < starts.size(); ++k) {
    if (starts[k] < 0 || context + 1 > n || starts[k] > n - context - 1) {
      throw ValueError("TokenDataset::windows: the window at " + std::to_string(starts[k]) +
                       " (position " + std::to_string(k) + ") needs tokens up to " +
                       std::to_string(starts[k] + context) + " but the dataset has " +
                       std::to_string(n) + " tokens (" + source() + ")");
    }
  }
  const auto b = static_cast<std::int64_t>(starts.size());
  Batch out;
  out.x = core::make_tensor(Shape{b, context}, kInt32, Device::cpu());  // (b, T)
  out.y = core::make_tensor(Shape{b, context}, kInt32, Device::cpu());  // (b, T), x shifted by one
  std::int32_t* x = out.x.data<std::int32_t>();
  std::int32_t* y = out.y.data<std::int32_t>();
  const detail::TokenStorage& s = *storage_;
  for (std::int64_t k = 0; k < b; ++k) {
    const std::int64_t start = starts[static_cast<std::size_t>(k)];
    std::int32_t* xr = x + k * context;
    std::int32_t* yr = y + k * context;
    for (std::int64_t t = 0; t < context; ++t) xr[t] = s.at(start + t);
    for (std::int64_t t = 0; t + 1 < context; ++t) yr[t] = xr[t + 1];
    yr[context - 1] = s.at(start + context);
  }
  return out;
}

std::int64_t TokenDataset::steps_per_epoch(const TokenWindowOptions& options) const {
  check_positive("the context (tokens per window)", options.context);
  check_positive("batch_size", options.batch_size);
  if (options.steps_per_epoch) {
    check_positive("steps_per_epoch", *options.steps_per_epoch);
    return *options.steps_per_epoch;
  }
  // Division in two steps: no overflow of B * T.
  return std::max<std::int64_t>(1, train_tokens() / options.batch_size / options.context);
}

Pipeline TokenDataset::train_windows(const TokenWindowOptions& options) const {
  const std::int64_t steps = steps_per_epoch(options);
  check_positive("epochs", options.epochs);
  const std::int64_t T = options.context;
  if (train_tokens() < T + 1) {
    throw ValueError("TokenDataset: the training part of " + source() + " has " +
                     std::to_string(train_tokens()) + " tokens; a window of context " +
                     std::to_string(T) + " needs " + std::to_string(T + 1) +
                     "; use a shorter context, more text or a smaller validation_fraction");
  }
  const double windows = static_cast<double>(options.batch_size) * static_cast<double>(steps) *
                         static_cast<double>(options.epochs);
  if (windows > static_cast<double>(kMaxWindows)) {
    throw ValueError("TokenDataset: batch_size * steps_per_epoch * epochs = " +
                     std::to_string(windows) + " windows is more than the limit of " +
                     std::to_string(kMaxWindows) + "; draw fewer windows");
  }
  const auto w = static_cast<std::int64_t>(windows);
  // Starts uniform over the training part: [0, train_tokens - T - 1], train_tokens - T values.
  Generator gen(options.seed);
  std::vector<std::int64_t> starts(static_cast<std::size_t>(w));
  const auto choices = static_cast<std::uint64_t>(train_tokens() - T);
  for (std::int64_t& s : starts) s = static_cast<std::int64_t>(gen.below(choices));
  const Tensor index = from_vector(starts, Shape{w});  // (W,) int64
  const TokenDataset self = *this;
  Step gather("token_windows(" + std::to_string(T) + ")", [self, T](Batch b) {
    const std::vector<std::int64_t> rows = b.x.to_vector<std::int64_t>();
    return self.windows(rows, T);
  });
  // The starts are the targets too: fit needs targets, the step replaces both.
  return Pipeline(Dataset(index, index), {gather});
}

Pipeline TokenDataset::validation_windows(std::int64_t context) const {
  check_positive("the context (tokens per window)", context);
  const std::int64_t count = (validation_tokens() - 1) / context;  // start + T + 1 <= end
  if (validation_tokens() < context + 1 || count < 1) {
    throw ValueError("TokenDataset: the validation part of " + source() + " has " +
                     std::to_string(validation_tokens()) + " tokens; a window of context " +
                     std::to_string(context) + " needs " + std::to_string(context + 1) +
                     "; raise validation_fraction or use a shorter context");
  }
  std::vector<std::int64_t> starts(static_cast<std::size_t>(count));
  for (std::int64_t k = 0; k < count; ++k)
    starts[static_cast<std::size_t>(k)] = split_at_ + k * context;
  const Tensor index = from_vector(starts, Shape{count});  // (K,) int64
  const TokenDataset self = *this;
  Step gather("token_windows(" + std::to_string(context) + ")", [self, context](Batch b) {
    const std::vector<std::int64_t> rows = b.x.to_vector<std::int64_t>();
    return self.windows(rows, context);
  });
  return Pipeline(Dataset(index, index), {gather});
}

bool is_token_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof kTokenFileMagic] = {};
  return in.read(magic, sizeof magic) && std::memcmp(magic, kTokenFileMagic, sizeof magic) == 0;
}

TokenDataset open_text_dataset(const std::string& path, TokenDatasetOptions options) {
  if (is_token_file(path)) return TokenDataset(path, options);
  const ByteTokenizer bytes;
  const std::vector<std::int32_t> tokens = encode_documents(bytes, read_text_documents(path));
  return TokenDataset(tokens, bytes.vocab_size(), options);
}

}  // namespace mixprec::data
