// GPT-2's byte-level BPE on a small vocabulary written here: the 256 byte tokens, 14 hand-made
// merges and "<|endoftext|>". Every expected tokenization is derived by hand in the comments from
// the merge ranks (the pair of lowest rank merged everywhere, left to right, until no pair has a
// rank). The pre-tokenization cases are worked out from GPT-2's pattern by hand.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gpt2_test_vocab.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/random.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

using testing::expect_error;
using testing::TempDir;
using namespace gpt2_test;

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view p : gpt2_pretokenize(text)) out.emplace_back(p);
  return out;
}

using Strings = std::vector<std::string>;

// ---- the byte table ----

TEST(Gpt2ByteTableTest, PrintableBytesStandForThemselvesOthersFollow256) {
  EXPECT_EQ(gpt2_byte_to_char('A'), U'A');
  EXPECT_EQ(gpt2_byte_to_char('!'), U'!');
  EXPECT_EQ(gpt2_byte_to_char(0xA1), char32_t{0xA1});
  EXPECT_EQ(gpt2_byte_to_char(0xAE), char32_t{0xAE});
  EXPECT_EQ(gpt2_byte_to_char(0), char32_t{0x100});
  EXPECT_EQ(gpt2_byte_to_char(' '), char32_t{0x120});   // 'Ġ': the 33rd non-printable byte
  EXPECT_EQ(gpt2_byte_to_char(0x7F), char32_t{0x121});  // after 0x00..0x20
  EXPECT_EQ(gpt2_byte_to_char(0xAD), char32_t{0x143});  // the last of the 68
}

// ---- pre-tokenization ----

TEST(Gpt2PretokenizeTest, WordsNumbersAndPunctuationTakeTheSpaceBeforeThem) {
  EXPECT_EQ(pieces("Hello world"), (Strings{"Hello", " world"}));
  EXPECT_EQ(pieces("abc123def"), (Strings{"abc", "123", "def"}));
  EXPECT_EQ(pieces("x = 42;"), (Strings{"x", " =", " 42", ";"}));
  EXPECT_EQ(pieces(" !!"), (Strings{" !!"}));
  EXPECT_EQ(pieces("  !"), (Strings{" ", " !"}));
  EXPECT_EQ(pieces(""), Strings{});
}

TEST(Gpt2PretokenizeTest, Contractions) {
  EXPECT_EQ(pieces("I'm"), (Strings{"I", "'m"}));
  EXPECT_EQ(pieces("I'd it's don't"), (Strings{"I", "'d", " it", "'s", " don", "'t"}));
  EXPECT_EQ(pieces("they'll've"), (Strings{"they", "'ll", "'ve"}));
  EXPECT_EQ(pieces("we're 'd"), (Strings{"we", "'re", " '", "d"}));  // " '" is a space + other
  EXPECT_EQ(pieces("'sam"), (Strings{"'s", "am"}));  // the contraction is tried first
  EXPECT_EQ(pieces("''s"), (Strings{"''", "s"}));    // an other-run does not stop for it
  EXPECT_EQ(pieces("'S"), (Strings{"'", "S"}));      // case-sensitive
}

TEST(Gpt2PretokenizeTest, WhitespaceRunsLeaveTheirLastSpaceToTheNextWord) {
  EXPECT_EQ(pieces("a   b"), (Strings{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a\n\nb"), (Strings{"a", "\n", "\n", "b"}));
  EXPECT_EQ(pieces("a \nb"), (Strings{"a", " ", "\n", "b"}));
  EXPECT_EQ(pieces("end  \n"), (Strings{"end", "  \n"}));  // at the end: the whole run
  EXPECT_EQ(pieces(" "), (Strings{" "}));
  EXPECT_EQ(pieces("\tx"), (Strings{"\t", "x"}));
}

TEST(Gpt2PretokenizeTest, NonAsciiAndInvalidUtf8) {
  EXPECT_EQ(pieces("h\xc3\xa9llo w\xc3\xb6rld"), (Strings{"h\xc3\xa9llo", " w\xc3\xb6rld"}));
  EXPECT_EQ(pieces("\xe6\x97\xa5\xe6\x9c\xac"), (Strings{"\xe6\x97\xa5\xe6\x9c\xac"}));  // 日本
  EXPECT_EQ(pieces("x\xe2\x80\x94y"), (Strings{"x", "\xe2\x80\x94", "y"}));  // em dash: other
  EXPECT_EQ(pieces("3\xc2\xbd"), (Strings{"3\xc2\xbd"}));                    // ½ is a number
  EXPECT_EQ(pieces("\xc2\xa0x"), (Strings{"\xc2\xa0", "x"}));  // no-break space: whitespace
  EXPECT_EQ(pieces("a\xff"
                   "b"),
            (Strings{"a", "\xff", "b"}));                              // invalid byte: other
  EXPECT_EQ(pieces("\xc3(\xc0\x80"), (Strings{"\xc3(\xc0\x80"}));      // truncated, overlong
  EXPECT_EQ(pieces("\xed\xa0\x80x"), (Strings{"\xed\xa0\x80", "x"}));  // a surrogate
}

TEST(Gpt2PretokenizeTest, PiecesConcatenateToTheText) {
  Generator gen(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(gen.below(40), '\0');
    const char alphabet[] = "ab 1'\n\t!\xc3\xa9\xe2\x80\x94\xff";
    for (char& c : s) c = alphabet[gen.below(sizeof alphabet - 1)];
    std::string joined;
    for (std::string_view p : gpt2_pretokenize(s)) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, s);
  }
}

// ---- BPE on the test vocabulary (gpt2_test_vocab.h) ----

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(dir_.file("encoder.json"), encoder_json(test_entries()));
    write_file(dir_.file("vocab.bpe"), vocab_bpe(test_merges()));
  }
  Gpt2Tokenizer load() const {
    return Gpt2Tokenizer(dir_.file("encoder.json"), dir_.file("vocab.bpe"));
  }
  // The tokens of `text` as their bytes.
  static Strings tokens(const Gpt2Tokenizer& tok, std::string_view text) {
    Strings out;
    for (std::int32_t id : tok.encode(text)) out.push_back(tok.token_bytes(id));
    return out;
  }
  TempDir dir_;
};

TEST_F(Gpt2TokenizerTest, MergesByRankNotByPosition) {
  const Gpt2Tokenizer tok = load();
  EXPECT_EQ(tok.vocab_size(), 271);
  EXPECT_EQ(tok.end_of_text(), 270);
  EXPECT_EQ(tok.name(), "gpt2");
  // "hello": pairs (h,e) rank 1 and (l,l) rank 3 -> "he" first, then "ll"; "e ll" (rank 4) has
  // no "e" left to merge.
  EXPECT_EQ(tokens(tok, "hello"), (Strings{"he", "ll", "o"}));
  // "ell": only (l,l) has a rank -> e, ll; then (e,ll) rank 4 -> "ell".
  EXPECT_EQ(tokens(tok, "ell"), (Strings{"ell"}));
  // "abc": (a,b) rank 6, (b,c) rank 5 -> the later pair first: a, bc.
  EXPECT_EQ(tokens(tok, "abc"), (Strings{"a", "bc"}));
  // "the": (t,h) has no rank (only "Ġ t" does) -> t, he.
  EXPECT_EQ(tokens(tok, "the"), (Strings{"t", "he"}));
  // " the": (Ġ,t) 0 -> Ġt h e; (h,e) 1 -> Ġt he; (Ġt,he) 2 -> Ġthe.
  EXPECT_EQ(tokens(tok, " the"), (Strings{" the"}));
}

TEST_F(Gpt2TokenizerTest, RepeatedPairsMergeLeftToRight) {
  const Gpt2Tokenizer tok = load();
  EXPECT_EQ(tokens(tok, "aaa"), (Strings{"aa", "a"}));      // (a,a) at 0 taken, at 1 overlaps
  EXPECT_EQ(tokens(tok, "aaaa"), (Strings{"aaaa"}));        // aa aa -> rank 8
  EXPECT_EQ(tokens(tok, "aaaaa"), (Strings{"aaaa", "a"}));  // aa aa a -> aaaa a
}

TEST_F(Gpt2TokenizerTest, EncodesTextPieceByPieceWithIds) {
  const Gpt2Tokenizer tok = load();
  // " world": Ġw (9), or (10), Ġwor (11), Ġworl (12), Ġworld (13): id 256 + 13.
  EXPECT_EQ(tokens(tok, "hello world"), (Strings{"he", "ll", "o", " world"}));
  const std::vector<std::int32_t> ids = tok.encode("hello world");
  const std::vector<std::int32_t> expected = {256 + 1, 256 + 3, 'o', 256 + 13};
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tok.decode(ids), "hello world");
  // Not merged across pieces: "a" + "  " + " b" + ...
  EXPECT_EQ(tokens(tok, "ab  bc"), (Strings{"ab", " ", " ", "bc"}));
}

TEST_F(Gpt2TokenizerTest, DecodeIsExactForAnyBytes) {
  const Gpt2Tokenizer tok = load();
  Generator gen(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::string s(gen.below(64), '\0');
    for (char& c : s)
      c = static_cast<char>(gen.below(4) == 0 ? gen.below(256) : "helo wrdabc"[gen.below(11)]);
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
  }
  const std::vector<std::int32_t> eot = {'a', 270};
  EXPECT_EQ(tok.decode(eot), "a<|endoftext|>");
  const std::vector<std::int32_t> bad = {'a', 271};
  expect_error<ValueError>([&] { tok.decode(bad); }, {"token 271", "position 1", "[0, 271)"});
}

TEST_F(Gpt2TokenizerTest, InMemoryVocabularyMatchesTheFiles) {
  const Gpt2Tokenizer from_files = load();
  std::vector<std::string> tokens = read_gpt2_encoder(dir_.file("encoder.json"));
  std::vector<Gpt2Merge> merges = read_gpt2_merges(dir_.file("vocab.bpe"), tokens);
  ASSERT_EQ(merges.size(), test_merges().size());
  EXPECT_EQ(merges[2].left, 256);        // Ġt
  EXPECT_EQ(merges[2].right, 256 + 1);   // he
  EXPECT_EQ(merges[2].merged, 256 + 2);  // Ġthe
  const Gpt2Tokenizer in_memory(std::move(tokens), std::move(merges));
  EXPECT_EQ(in_memory.encode("hello the world aaaaa"), from_files.encode("hello the world aaaaa"));
  // A merge that does not join its parts' bytes is refused.
  std::vector<std::string> t2 = read_gpt2_encoder(dir_.file("encoder.json"));
  expect_error<DataError>(
      [&] {
        Gpt2Tokenizer(t2, {Gpt2Merge{'a', 'b', 'c'}});
      },
      {"merge 0", "does not join"});
}

}  // namespace
}  // namespace mixprec::data
