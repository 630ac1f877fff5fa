// The readers of encoder.json and vocab.bpe: the test vocabulary (gpt2_test_vocab.h) is read
// back, then one broken variant per check, each refused with a DataError naming the file and the
// key or line.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gpt2_test_vocab.h"
#include "mixprec/data/tokenizer.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

using testing::expect_error;
using testing::TempDir;
using namespace gpt2_test;

class Gpt2EncoderReaderTest : public ::testing::Test {
 protected:
  // Writes `json` as encoder.json and expects read_gpt2_encoder to refuse it with `parts`.
  void expect_refused(const std::string& json, std::vector<std::string> parts) {
    write_file(path(), json);
    parts.push_back("encoder.json '" + path() + "'");
    expect_error<DataError>([&] { read_gpt2_encoder(path()); }, parts);
  }
  std::string path() const { return dir_.file("encoder.json"); }
  TempDir dir_;
};

TEST_F(Gpt2EncoderReaderTest, ReadsTheTokensByIdAsBytes) {
  write_file(path(), encoder_json(test_entries()));
  const std::vector<std::string> tokens = read_gpt2_encoder(path());
  ASSERT_EQ(tokens.size(), 271u);
  EXPECT_EQ(tokens[0], std::string(1, '\0'));
  EXPECT_EQ(tokens[' '], " ");
  EXPECT_EQ(tokens['"'], "\"");  // escaped in the JSON
  EXPECT_EQ(tokens[256 + 2], " the");
  EXPECT_EQ(tokens[270], "<|endoftext|>");
  // Entries in any order, and keys with \u escapes ("\u0120t" is "Ġt", the bytes " t").
  const Entries entries = test_entries();
  const Entries reversed(entries.rbegin(), entries.rend());
  std::string json = encoder_json(reversed);
  const std::string plain = json_string(chars(" t")) + ": 256";
  ASSERT_NE(json.find(plain), std::string::npos);
  json.replace(json.find(plain), plain.size(), "\"\\u0120t\": 256");
  write_file(path(), json);
  EXPECT_EQ(read_gpt2_encoder(path()), tokens);
}

TEST_F(Gpt2EncoderReaderTest, RefusesWhatIsNotAnObjectOfIds) {
  expect_refused("[1, 2]", {"an array"});
  expect_refused("{\"a\": {\"b\": 1}}", {"a nested object", "at key 'a'"});
  expect_refused("{\"a\": 1.5}", {"the id 1.5", "not a whole number", "at key 'a'"});
  expect_refused("{\"a\": -3}", {"negative id -3", "at key 'a'"});
  expect_refused("{\"a\": \"1\"}", {"a string value", "at key 'a'"});
  expect_refused("{\"a\": null}", {"null", "at key 'a'"});
  expect_refused("{\"a\": 1,", {"invalid JSON at byte"});
  expect_refused("{\"a\": 1} x", {"invalid JSON at byte"});
  expect_refused("{}", {"no entries"});
  expect_refused("7", {"a number outside the top-level object"});
}

TEST_F(Gpt2EncoderReaderTest, RefusesBadKeysAndIds) {
  Entries e = test_entries();
  // A duplicate key (the byte 'a' again, with the next id).
  Entries dup_key = e;
  dup_key.emplace_back("a", "271");
  expect_refused(encoder_json(dup_key), {"the key 'a' appears twice"});
  // Two keys, one id.
  Entries dup_id = e;
  dup_id.emplace_back("zz", "5");
  expect_refused(encoder_json(dup_id), {"the id 5 is given to two keys", "'zz'"});
  // A gap: ids 0..270 and 272.
  Entries gap = e;
  gap.emplace_back("zz", "272");
  expect_refused(encoder_json(gap), {"no key has the id 271"});
  // A plain space is not one of GPT-2's byte characters (the space byte is U+0120).
  Entries space = e;
  space.emplace_back("a b", "271");
  expect_refused(encoder_json(space), {"'a b'", "not one of GPT-2's 256 byte characters"});
  Entries big = e;
  big.emplace_back("zz", "70000");
  expect_refused(encoder_json(big), {"the id 70000", "at key 'zz'", "limit of 65536"});
  Entries empty = e;
  empty.emplace_back("", "271");
  expect_refused(encoder_json(empty), {"an empty key"});
  Entries long_key = e;
  long_key.emplace_back(std::string(1025, 'x'), "271");
  expect_refused(encoder_json(long_key), {"longer than 1024 bytes"});
}

TEST_F(Gpt2EncoderReaderTest, RefusesAVocabularyWithoutEveryByteOrEndOfText) {
  Entries e = test_entries();
  Entries no_z;
  for (const auto& [k, v] : e) {
    if (k != "z") no_z.emplace_back(k, std::to_string(no_z.size()));
  }
  expect_refused(encoder_json(no_z), {"single-byte token of byte 122", "U+007A"});
  Entries no_eot(e.begin(), e.end() - 1);
  expect_refused(encoder_json(no_eot), {"\"<|endoftext|>\" is missing"});
}

TEST_F(Gpt2EncoderReaderTest, RefusesTooManyEntriesAndMissingFiles) {
  Entries many = test_entries();
  for (int i = 0; many.size() <= 65536; ++i) {
    many.emplace_back("x" + std::to_string(i), std::to_string(many.size()));
  }
  expect_refused(encoder_json(many), {"more than 65536 entries"});
  expect_error<DataError>([&] { read_gpt2_encoder(dir_.file("missing.json")); },
                          {"missing.json", "cannot read it"});
}

class Gpt2MergesReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir_.file("encoder.json"), encoder_json(test_entries()));
    tokens_ = read_gpt2_encoder(dir_.file("encoder.json"));
  }
  std::vector<Gpt2Merge> read(const std::string& text) {
    write_file(path(), text);
    return read_gpt2_merges(path(), tokens_);
  }
  void expect_refused(const std::string& text, std::vector<std::string> parts) {
    parts.push_back("vocab.bpe '" + path() + "'");
    expect_error<DataError>([&] { read(text); }, parts);
  }
  std::string path() const { return dir_.file("vocab.bpe"); }
  TempDir dir_;
  std::vector<std::string> tokens_;
};

TEST_F(Gpt2MergesReaderTest, ReadsMergesInRankOrder) {
  const std::vector<Gpt2Merge> merges = read(vocab_bpe(test_merges()));
  ASSERT_EQ(merges.size(), 14u);
  EXPECT_EQ(merges[1].left, 'h');
  EXPECT_EQ(merges[1].right, 'e');
  EXPECT_EQ(merges[1].merged, 257);
  // No version line, CRLF endings and blank lines are accepted.
  const std::vector<Gpt2Merge> crlf = read("h e\r\n\r\nl l\r\n");
  ASSERT_EQ(crlf.size(), 2u);
  EXPECT_EQ(crlf[1].merged, 256 + 3);
  EXPECT_TRUE(read("#version: 0.2\n").empty());
}

TEST_F(Gpt2MergesReaderTest, RefusesBadLinesNamingThem) {
  expect_refused("#version: 0.2\nh e\nhe\n", {"line 3", "'he' is not a merge"});
  expect_refused("h  e\n", {"line 1", "not a merge"});
  expect_refused("h e \n", {"line 1", "not a merge"});
  expect_refused(" h\n", {"line 1", "not a merge"});
  // "x" + "y" = "xy" is not a token of the encoder.
  expect_refused("h e\nx y\n", {"line 2", "'xy'", "not in the encoder"});
  expect_refused("h e\nh e\n", {"line 2", "appears twice"});
  // U+017F is past GPT-2's 324 characters.
  expect_refused("h \xc5\xbf\n", {"line 1", "not one of GPT-2's 256 byte characters"});
}

}  // namespace
}  // namespace mixprec::data
