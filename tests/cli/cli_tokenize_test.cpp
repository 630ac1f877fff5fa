// `mixprec tokenize`: a fortune directory and a text file written here, tokenized with the byte
// tokenizer and with a small GPT-2 vocabulary (tests/unit/gpt2_test_vocab.h); the token file read
// back and decoded. Bad input gives one "error: ..." line, exit 2 for usage and 1 for bad files.
// And `--dataset text:PATH` is understood, refused by the image models with a usage error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "mixprec/data/token_file.h"
#include "mixprec/data/tokenizer.h"
#include "unit/gpt2_test_vocab.h"

namespace mixprec::cli_test {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

void expect_one_error_line(const CliResult& r, int exit_code,
                           const std::vector<std::string>& fragments) {
  EXPECT_EQ(r.exit_code, exit_code) << "stderr: " << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << "stderr: " << r.err;
  EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
  for (const std::string& f : fragments) {
    EXPECT_NE(lines[0].find(f), std::string::npos) << "expected '" << f << "' in: " << lines[0];
  }
}

class CliTokenize : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(dir_.path() / "fortunes");
    write_text(dir_.path() / "fortunes" / "wisdom", "Look up.\n%\nHello world.\n%\n");
    write_text(dir_.path() / "fortunes" / "wisdom.dat", std::string("\0\0\0\2", 4));
  }
  TempDir dir_;
};

TEST_F(CliTokenize, ByteTokenizerWritesTheDocumentsWithEndOfText) {
  const CliResult r =
      run_cli({"tokenize", "--input", dir_.file("fortunes"), "--output", dir_.file("f.tok")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // "Look up." (8 bytes) + EOT + "Hello world." (12 bytes) + EOT = 22 tokens.
  EXPECT_NE(r.out.find("tokenized 2 document(s), 20 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens: 22\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab size: 257\n"), std::string::npos) << r.out;
  const std::vector<std::int32_t> tokens = data::read_token_file(dir_.file("f.tok"));
  ASSERT_EQ(tokens.size(), 22u);
  EXPECT_EQ(data::ByteTokenizer().decode(tokens), "Look up.<|endoftext|>Hello world.<|endoftext|>");
  EXPECT_EQ(data::read_token_file_info(dir_.file("f.tok")).vocab_size, 257);
}

TEST_F(CliTokenize, Gpt2TokenizerWithItsFiles) {
  using namespace data::gpt2_test;
  write_file(dir_.file("encoder.json"), encoder_json(test_entries()));
  write_file(dir_.file("vocab.bpe"), vocab_bpe(test_merges()));
  write_text(dir_.path() / "hello.txt", "hello world");
  const CliResult r = run_cli({"tokenize", "--input", dir_.file("hello.txt"), "--output",
                               dir_.file("h.tok"), "--tokenizer", "gpt2", "--encoder",
                               dir_.file("encoder.json"), "--vocab", dir_.file("vocab.bpe")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("with the gpt2 tokenizer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens: 5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab size: 271\n"), std::string::npos) << r.out;
  // he, ll, o, " world" (gpt2_tokenizer_test.cpp derives them), end-of-text.
  const std::vector<std::int32_t> expected = {256 + 1, 256 + 3, 'o', 256 + 13, 270};
  EXPECT_EQ(data::read_token_file(dir_.file("h.tok")), expected);
}

TEST_F(CliTokenize, UsageErrors) {
  const std::string in = dir_.file("fortunes"), out = dir_.file("x.tok");
  expect_one_error_line(run_cli({"tokenize", "--output", out}), 2, {"--input"});
  expect_one_error_line(run_cli({"tokenize", "--input", in}), 2, {"--output"});
  expect_one_error_line(
      run_cli({"tokenize", "--input", in, "--output", out, "--tokenizer", "gpt2"}), 2,
      {"--encoder encoder.json and --vocab vocab.bpe"});
  expect_one_error_line(
      run_cli({"tokenize", "--input", in, "--output", out, "--encoder", dir_.file("e.json")}), 2,
      {"--tokenizer gpt2"});
  expect_one_error_line(
      run_cli({"tokenize", "--input", in, "--output", out, "--tokenizer", "words"}), 2,
      {"--tokenizer"});
  expect_one_error_line(run_cli({"tokenize", "--input", in, "--output", out, "--max-bytes", "0"}),
                        2, {"--max-bytes must be positive"});
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliTokenize, BadFilesNameThePath) {
  const std::string out = dir_.file("x.tok");
  expect_one_error_line(run_cli({"tokenize", "--input", dir_.file("nothing"), "--output", out}), 1,
                        {dir_.file("nothing"), "does not exist"});
  expect_one_error_line(
      run_cli({"tokenize", "--input", dir_.file("fortunes"), "--output", out, "--max-bytes", "10"}),
      1, {"limit of 10 bytes"});
  write_text(dir_.path() / "encoder.json", "{\"a\": 0");
  write_text(dir_.path() / "vocab.bpe", "");
  expect_one_error_line(
      run_cli({"tokenize", "--input", dir_.file("fortunes"), "--output", out, "--tokenizer", "gpt2",
               "--encoder", dir_.file("encoder.json"), "--vocab", dir_.file("vocab.bpe")}),
      1, {dir_.file("encoder.json"), "invalid JSON"});
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliTokenize, TextDatasetSpecIsParsedAndRefusedByImageModels) {
  expect_one_error_line(run_cli({"train", "--dataset", "text", "--epochs", "1"}), 2,
                        {"--dataset text needs a path"});
  expect_one_error_line(run_cli({"train", "--dataset", "text:", "--epochs", "1"}), 2,
                        {"the path after ':' is empty"});
  expect_one_error_line(
      run_cli({"train", "--dataset", "text:" + dir_.file("fortunes"), "--epochs", "1"}), 2,
      {"holds text for a language model", "--model mlp"});
}

}  // namespace
}  // namespace mixprec::cli_test
