// Token files: the header checked against the file size before anything trusts the token count,
// the tokens checked against the vocab size, and the atomic writer.
#include "mixprec/data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "data/token_file_internal.h"
#include "io/atomic_file.h"
#include "mixprec/error.h"

namespace mixprec::data {

namespace {

std::uint64_t load_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

namespace detail {

TokenFileInfo parse_token_header(const std::uint8_t* header, std::uint64_t available,
                                 std::uint64_t file_size, const std::string& name) {
  const std::string where = "token file '" + name + "': ";
  const auto header_bytes = static_cast<std::uint64_t>(kTokenFileHeaderBytes);
  if (file_size < header_bytes || available < header_bytes) {
    throw DataError(where + "truncated: " + std::to_string(file_size) +
                    " bytes, shorter than the " + std::to_string(header_bytes) +
                    "-byte header; write it again with `mixprec tokenize`");
  }
  if (std::memcmp(header, kTokenFileMagic, sizeof kTokenFileMagic) != 0) {
    throw DataError(where + "not a mixprec token file (the first 8 bytes are not \"MPTOKENS\"); " +
                    "make one with `mixprec tokenize --input TEXT --output FILE.tok`");
  }
  const std::uint64_t version = load_le(header + 8, 4);
  if (version != kTokenFileVersion) {
    throw DataError(where + "version " + std::to_string(version) + " is not supported (this " +
                    "mixprec reads version " + std::to_string(kTokenFileVersion) +
                    "); write it again with this mixprec's `mixprec tokenize`");
  }
  const std::uint64_t vocab = load_le(header + 12, 4);
  if (vocab < 1 || vocab > static_cast<std::uint64_t>(kTokenFileMaxVocab)) {
    throw DataError(where + "the vocab size " + std::to_string(vocab) + " is outside [1, " +
                    std::to_string(kTokenFileMaxVocab) + "] (tokens are 16-bit)");
  }
  const std::uint64_t count = load_le(header + 16, 8);
  // In this order so that nothing overflows: count * 2 + 24 is computed only when it fits.
  const std::uint64_t payload = file_size - header_bytes;
  if (count > payload / 2 || payload != 2 * count) {
    throw DataError(where + "the header says " + std::to_string(count) + " tokens (" +
                    (count > (UINT64_MAX - header_bytes) / 2
                         ? std::string("more bytes than a file can hold")
                         : std::to_string(header_bytes + 2 * count) + " bytes") +
                    ") but the file has " + std::to_string(file_size) + " bytes (" +
                    (count > payload / 2 ? "truncated" : "trailing bytes") +
                    "); write it again with `mixprec tokenize`");
  }
  return {static_cast<std::int64_t>(vocab), static_cast<std::int64_t>(count)};
}

void check_tokens(const std::uint8_t* tokens, const TokenFileInfo& info, const std::string& name) {
  const auto vocab = static_cast<std::uint64_t>(info.vocab_size);
  for (std::int64_t i = 0; i < info.tokens; ++i) {
    const std::uint64_t t = load_le(tokens + 2 * i, 2);
    if (t >= vocab) {
      throw DataError("token file '" + name + "': token " + std::to_string(i) + " is " +
                      std::to_string(t) + ", not below the vocab size " +
                      std::to_string(info.vocab_size) +
                      " of the header; the file is corrupt or was written with another vocab");
    }
  }
}

}  // namespace detail

TokenFileInfo parse_token_file_header(std::span<const std::uint8_t> bytes,
                                      const std::string& name) {
  return detail::parse_token_header(bytes.data(), bytes.size(), bytes.size(), name);
}

void check_token_file_tokens(std::span<const std::uint8_t> bytes, const TokenFileInfo& info,
                             const std::string& name) {
  const std::size_t room =
      bytes.size() < static_cast<std::size_t>(kTokenFileHeaderBytes)
          ? 0
          : (bytes.size() - static_cast<std::size_t>(kTokenFileHeaderBytes)) / 2;
  if (info.tokens < 0 || static_cast<std::uint64_t>(info.tokens) > room) {
    throw DataError("token file '" + name + "': " + std::to_string(bytes.size()) +
                    " bytes hold fewer than the " + std::to_string(info.tokens) +
                    " tokens of the header");
  }
  detail::check_tokens(bytes.data() + kTokenFileHeaderBytes, info, name);
}

detail::OpenTokenFile detail::open_token_file(const std::string& path) {
  OpenTokenFile out;
  out.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (out.fd < 0) {
    throw DataError("token file '" + path + "': cannot open it: " + std::strerror(errno) +
                    "; make one with `mixprec tokenize --input TEXT --output FILE.tok`");
  }
  Fd guard{out.fd};
  struct stat st {};
  if (::fstat(out.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw DataError("token file '" + path + "': not a regular file");
  }
  std::uint8_t header[kTokenFileHeaderBytes] = {};
  std::size_t got = 0;
  while (got < sizeof header) {
    const ssize_t r = ::pread(out.fd, header + got, sizeof header - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      throw DataError("token file '" + path + "': reading failed: " + std::strerror(errno));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.file_size = static_cast<std::uint64_t>(st.st_size);
  out.info = parse_token_header(header, got, out.file_size, path);
  guard.fd = -1;  // the caller owns it now
  return out;
}

TokenFileInfo read_token_file_info(const std::string& path) {
  const detail::OpenTokenFile f = detail::open_token_file(path);
  ::close(f.fd);
  return f.info;
}

std::vector<std::int32_t> read_token_file(const std::string& path, std::int64_t max_tokens) {
  const detail::OpenTokenFile f = detail::open_token_file(path);
  Fd guard{f.fd};
  if (f.info.tokens > max_tokens) {
    throw DataError("token file '" + path + "': " + std::to_string(f.info.tokens) +
                    " tokens is more than the limit of " + std::to_string(max_tokens) +
                    " for reading into memory; open it with data::TokenDataset (mapped)");
  }
  // Validated size: the allocation is what the file holds.
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(2 * f.info.tokens));
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::pread(f.fd, bytes.data() + got, bytes.size() - got,
                              static_cast<off_t>(kTokenFileHeaderBytes + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      throw DataError(
          "token file '" + path + "': reading the tokens failed after " + std::to_string(got) +
          " bytes" +
          (r < 0 ? std::string(": ") + std::strerror(errno) : std::string(" (the file shrank)")));
    }
    got += static_cast<std::size_t>(r);
  }
  detail::check_tokens(bytes.data(), f.info, path);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(f.info.tokens));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>(load_le(bytes.data() + 2 * i, 2));
  }
  return tokens;
}

void write_token_file(const std::string& path, std::span<const std::int32_t> tokens,
                      std::int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > kTokenFileMaxVocab) {
    throw ValueError("write_token_file: the vocab size " + std::to_string(vocab_size) +
                     " is outside [1, " + std::to_string(kTokenFileMaxVocab) +
                     "] (token files hold 16-bit tokens)");
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size) {
      throw ValueError("write_token_file: token " + std::to_string(i) + " is " +
                       std::to_string(tokens[i]) + ", outside [0, " + std::to_string(vocab_size) +
                       ") of the vocab size given; '" + path + "' was not written");
    }
  }
  std::uint8_t header[kTokenFileHeaderBytes] = {};
  std::memcpy(header, kTokenFileMagic, sizeof kTokenFileMagic);
  store_le(header + 8, kTokenFileVersion, 4);
  store_le(header + 12, static_cast<std::uint64_t>(vocab_size), 4);
  store_le(header + 16, tokens.size(), 8);
  io::AtomicFile file{std::filesystem::path(path)};
  file.write(header, sizeof header);
  // In chunks: little-endian whatever the host, without a second copy of the whole file.
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  std::vector<std::uint8_t> chunk(2 * kChunk);
  for (std::size_t start = 0; start < tokens.size(); start += kChunk) {
    const std::size_t n = std::min(kChunk, tokens.size() - start);
    for (std::size_t i = 0; i < n; ++i) {
      store_le(chunk.data() + 2 * i, static_cast<std::uint64_t>(tokens[start + i]), 2);
    }
    file.write(chunk.data(), 2 * n);
  }
  file.commit();
}

}  // namespace mixprec::data
