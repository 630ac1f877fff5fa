// Token files: the byte layout written (checked byte by byte), round trips, and one rejection per
// kind of bad file; a header claiming an absurd count is refused from the file size alone.
#include "mixprec/data/token_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using testing::expect_error;
using testing::TempDir;

void put_le(Bytes& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// A file's bytes built by hand: magic, version, vocab, count, tokens.
Bytes file_bytes(std::uint64_t vocab, std::uint64_t count, const std::vector<std::uint16_t>& tokens,
                 std::uint32_t version = 1, const std::string& magic = "MPTOKENS") {
  Bytes b(magic.begin(), magic.end());
  put_le(b, version, 4);
  put_le(b, vocab, 4);
  put_le(b, count, 8);
  for (std::uint16_t t : tokens) put_le(b, t, 2);
  return b;
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(TokenFileTest, WritesTheDocumentedLayout) {
  TempDir dir;
  const std::vector<std::int32_t> tokens = {0, 1, 256, 65535, 513};
  write_token_file(dir.file("t.tok"), tokens, 65536);
  EXPECT_EQ(read_bytes(dir.file("t.tok")), file_bytes(65536, 5, {0, 1, 256, 65535, 513}));
  const TokenFileInfo info = read_token_file_info(dir.file("t.tok"));
  EXPECT_EQ(info.vocab_size, 65536);
  EXPECT_EQ(info.tokens, 5);
  EXPECT_EQ(read_token_file(dir.file("t.tok")), tokens);
}

TEST(TokenFileTest, RoundTripsEmptyAndLargerFiles) {
  TempDir dir;
  write_token_file(dir.file("empty.tok"), {}, 257);
  EXPECT_EQ(read_token_file_info(dir.file("empty.tok")).tokens, 0);
  EXPECT_TRUE(read_token_file(dir.file("empty.tok")).empty());
  // More than one of the writer's 65536-token chunks.
  std::vector<std::int32_t> many(200000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<std::int32_t>(i * 7 % 257);
  write_token_file(dir.file("many.tok"), many, 257);
  EXPECT_EQ(read_token_file(dir.file("many.tok")), many);
  EXPECT_EQ(fs::file_size(dir.file("many.tok")), 24u + 2u * many.size());
}

TEST(TokenFileTest, WriterRefusesBadTokensBeforeWriting) {
  TempDir dir;
  const std::vector<std::int32_t> bad = {1, 2, 257, 3};
  expect_error<ValueError>([&] { write_token_file(dir.file("a.tok"), bad, 257); },
                           {"token 2 is 257", "[0, 257)"});
  EXPECT_FALSE(fs::exists(dir.file("a.tok")));
  const std::vector<std::int32_t> negative = {-1};
  expect_error<ValueError>([&] { write_token_file(dir.file("a.tok"), negative, 257); },
                           {"token 0 is -1"});
  expect_error<ValueError>([&] { write_token_file(dir.file("a.tok"), {}, 65537); },
                           {"vocab size 65537"});
  expect_error<ValueError>([&] { write_token_file(dir.file("a.tok"), {}, 0); }, {"vocab size 0"});
  // A failed write leaves an existing file as it was.
  write_token_file(dir.file("a.tok"), std::vector<std::int32_t>{5}, 10);
  expect_error<ValueError>([&] { write_token_file(dir.file("a.tok"), bad, 10); }, {"token 2"});
  EXPECT_EQ(read_token_file(dir.file("a.tok")), std::vector<std::int32_t>{5});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

class TokenFileRejectionTest : public ::testing::Test {
 protected:
  // Both the info reader and the full reader refuse `bytes` with `parts` in the message.
  void expect_refused(const Bytes& bytes, std::vector<std::string> parts) {
    write_bytes(path(), bytes);
    parts.push_back("token file '" + path() + "'");
    expect_error<DataError>([&] { read_token_file(path()); }, parts);
    expect_error<DataError>([&] { parse_token_file_header(bytes, path()); }, parts);
  }
  std::string path() const { return dir_.file("bad.tok"); }
  TempDir dir_;
};

TEST_F(TokenFileRejectionTest, BadHeaders) {
  expect_refused(Bytes{'M', 'P'}, {"truncated: 2 bytes", "24-byte header"});
  expect_refused(Bytes{}, {"truncated: 0 bytes"});
  expect_refused(file_bytes(257, 0, {}, 1, "MPTOKENZ"), {"not a mixprec token file"});
  expect_refused(file_bytes(257, 0, {}, 2), {"version 2 is not supported"});
  expect_refused(file_bytes(0, 0, {}), {"vocab size 0 is outside [1, 65536]"});
  expect_refused(file_bytes(65537, 0, {}), {"vocab size 65537"});
}

TEST_F(TokenFileRejectionTest, SizesThatDisagreeWithTheCount) {
  expect_refused(file_bytes(257, 3, {1, 2}), {"says 3 tokens (30 bytes)", "28 bytes", "truncated"});
  expect_refused(file_bytes(257, 1, {1, 2}),
                 {"says 1 tokens (26 bytes)", "28 bytes", "trailing bytes"});
  Bytes odd = file_bytes(257, 1, {1});
  odd.push_back(0);
  expect_refused(odd, {"trailing bytes"});
  // 2^63 tokens: refused from the size, nothing allocated or mapped.
  expect_refused(file_bytes(257, std::uint64_t{1} << 63, {1}),
                 {"says 9223372036854775808 tokens", "more bytes than a file can hold"});
  expect_refused(file_bytes(257, ~std::uint64_t{0}, {}), {"truncated"});
}

TEST_F(TokenFileRejectionTest, TokensOutsideTheVocabNameTheirIndex) {
  write_bytes(path(), file_bytes(10, 4, {1, 9, 10, 3}));
  expect_error<DataError>([&] { read_token_file(path()); },
                          {"token 2 is 10", "vocab size 10", path()});
  const Bytes bytes = file_bytes(10, 4, {1, 9, 3, 65535});
  const TokenFileInfo info = parse_token_file_header(bytes, "mem");
  expect_error<DataError>([&] { check_token_file_tokens(bytes, info, "mem"); },
                          {"token 3 is 65535", "'mem'"});
  // A header claiming more tokens than the bytes hold.
  expect_error<DataError>(
      [&] {
        check_token_file_tokens(bytes, TokenFileInfo{10, 5}, "mem");
      },
      {"fewer than the 5"});
}

TEST(TokenFileTest, MissingFilesAndTheReadLimit) {
  TempDir dir;
  expect_error<DataError>([&] { read_token_file_info(dir.file("none.tok")); },
                          {"none.tok", "cannot open", "mixprec tokenize"});
  expect_error<DataError>([&] { read_token_file_info(dir.str()); }, {"not a regular file"});
  write_token_file(dir.file("t.tok"), std::vector<std::int32_t>{1, 2, 3}, 4);
  expect_error<DataError>([&] { read_token_file(dir.file("t.tok"), 2); },
                          {"3 tokens is more than the limit of 2", "TokenDataset"});
}

}  // namespace
}  // namespace mixprec::data
