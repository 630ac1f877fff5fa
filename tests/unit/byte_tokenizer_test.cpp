// The byte tokenizer: every byte value round-trips, random bytes round-trip, end-of-text is 256
// and decodes to "<|endoftext|>", ids outside [0, 257) are refused with their position, and
// encode_documents puts end-of-text after every document.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/data/tokenizer.h"
#include "mixprec/random.h"
#include "support/expect_error.h"

namespace mixprec::data {
namespace {

using testing::expect_error;

TEST(ByteTokenizerTest, EveryByteIsItsOwnId) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 257);
  EXPECT_EQ(tok.end_of_text(), 256);
  EXPECT_EQ(tok.name(), "byte");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::vector<std::int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[static_cast<std::size_t>(b)], b);
  EXPECT_EQ(tok.decode(ids), all);
  const std::vector<std::int32_t> hi = {72, 105, 33};
  EXPECT_EQ(tok.encode("Hi!"), hi);
}

TEST(ByteTokenizerTest, RandomBytesRoundTrip) {
  ByteTokenizer tok;
  Generator gen(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::string s(gen.below(200), '\0');
    for (char& c : s) c = static_cast<char>(gen.below(256));
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
  }
}

TEST(ByteTokenizerTest, EndOfTextAndBadIds) {
  ByteTokenizer tok;
  const std::vector<std::int32_t> ids = {65, 256, 66};
  EXPECT_EQ(tok.decode(ids), "A<|endoftext|>B");
  // A literal "<|endoftext|>" in text is text, not the end-of-text id.
  for (std::int32_t id : tok.encode("<|endoftext|>")) EXPECT_LT(id, 256);
  const std::vector<std::int32_t> bad = {65, 66, 257};
  expect_error<ValueError>([&] { tok.decode(bad); }, {"token 257", "position 2", "[0, 257)"});
  const std::vector<std::int32_t> negative = {-1};
  expect_error<ValueError>([&] { tok.decode(negative); }, {"token -1", "position 0"});
}

TEST(ByteTokenizerTest, EncodeDocumentsEndsEachWithEndOfText) {
  ByteTokenizer tok;
  const std::vector<std::int32_t> expected = {'a', 'b', 256, 'c', 256};
  EXPECT_EQ(encode_documents(tok, {"ab", "c"}), expected);
  EXPECT_TRUE(encode_documents(tok, {}).empty());
}

}  // namespace
}  // namespace mixprec::data
