// A GPT through the command line: a text tokenized here, `train --model gpt ... --save`, then
// `generate` and `evaluate` from the saved model. The saved model's context is the training length
// (every position it has was trained); generation is repeatable by seed and stops, with a note,
// where the context ends; evaluate on the token file gives train's test loss; bad input gives one
// error line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_support.h"
#include "mixprec/applications.h"
#include "mixprec/data/token_file.h"
#include "mixprec/mixprec.h"

namespace mixprec::cli_test {
namespace {

constexpr std::int64_t kSeqLen = 16;

class CliGpt : public ::testing::Test {
 protected:
  // Tokenized and trained once for the suite: a 1-block GPT, 2 steps.
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    std::string text;
    for (int i = 0; i < 60; ++i) text += "the quick brown fox jumps over the lazy dog. ";
    std::ofstream(dir_->file("text.txt"), std::ios::binary) << text;
    const CliResult tok =
        run_cli({"tokenize", "--input", dir_->file("text.txt"), "--output", dir_->file("t.tok")});
    ASSERT_EQ(tok.exit_code, 0) << tok.err;
    const CliResult train = run_cli({"train",
                                     "--model",
                                     "gpt",
                                     "--layers",
                                     "1",
                                     "--width",
                                     "32",
                                     "--heads",
                                     "2",
                                     "--dataset",
                                     "text:" + dir_->file("t.tok"),
                                     "--seq-len",
                                     std::to_string(kSeqLen),
                                     "--batch-size",
                                     "4",
                                     "--epochs",
                                     "1",
                                     "--max-samples",
                                     "8",
                                     "--verbose",
                                     "0",
                                     "--save",
                                     dir_->file("gpt"),
                                     "--metrics-json",
                                     dir_->file("train.json")});
    ASSERT_EQ(train.exit_code, 0) << train.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string model() { return dir_->file("gpt"); }
  static TempDir* dir_;
};

TempDir* CliGpt::dir_ = nullptr;

// The preset (gpt-nano) has a context of 128; trained on sequences of 16, the model embeds 16
// positions, so none is left untrained for generation to reach.
TEST_F(CliGpt, SavedModelsContextIsTheTrainingLength) {
  const Model gpt = load_model(model());
  const applications::GptConfig config = applications::gpt_config(gpt);
  EXPECT_EQ(config.context, kSeqLen);
  EXPECT_EQ(config.layers, 1);
  EXPECT_EQ(config.width, 32);
  EXPECT_EQ(config.vocab, 257);
}

// A prompt of 9 bytes in a context of 16: the last token is predicted from a full context, so
// 16 - 9 + 1 = 8 new tokens, then the note; the same seed gives the same text.
TEST_F(CliGpt, GenerateIsRepeatableAndStopsAtTheContext) {
  const std::vector<std::string> args = {
      "generate",     "--model", model(),   "--prompt", "the quick",     "--seed", "5",
      "--max-tokens", "100",     "--top-k", "0",        "--temperature", "1"};
  const CliResult a = run_cli(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CliResult b = run_cli(args);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  ASSERT_EQ(a.out.rfind("the quick", 0), 0u) << a.out;
  EXPECT_EQ(a.out.size(), static_cast<std::size_t>(kSeqLen + 1 + 1)) << a.out;  // + '\n'
  const auto lines = a.err_lines();
  ASSERT_EQ(lines.size(), 1u) << a.err;
  EXPECT_EQ(lines[0], "note: stopped after 8 new tokens: the model's context is 16 positions");
}

// Fewer tokens than the context allows: exactly that many, and no note.
TEST_F(CliGpt, GenerateGivesTheTokensAskedFor) {
  const CliResult r = run_cli({"generate", "--model", model(), "--prompt", "the", "--seed", "1",
                               "--max-tokens", "4", "--top-k", "0", "--temperature", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), 3u + 4u + 1u) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliGpt, PromptLongerThanTheContextIsOneErrorLine) {
  const CliResult r =
      run_cli({"generate", "--model", model(), "--prompt", "the quick brown fox jumps"});
  EXPECT_NE(r.exit_code, 0);
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("the prompt has 25 tokens, more than the model's context of 16"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(r.out, "");
}

// evaluate on the token file runs the validation windows train tested on (--max-samples 8, the
// same default split): the loss train reported, the accuracy, and the perplexity exp(loss).
TEST_F(CliGpt, EvaluateOnTheTokenFileGivesTrainsTestLoss) {
  std::ifstream in(dir_->file("train.json"));
  const nlohmann::json trained = nlohmann::json::parse(in);
  const double loss = trained.at("test").at("loss").get<double>();
  const double accuracy = trained.at("test").at("accuracy").get<double>();
  const CliResult r = run_cli({"evaluate", "--model", model(), "--dataset",
                               "text:" + dir_->file("t.tok"), "--max-samples", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double got_loss = 0, got_accuracy = 0, perplexity = 0;
  const std::size_t at = r.out.find("loss: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "loss: %lf - accuracy: %lf - perplexity: %lf",
                        &got_loss, &got_accuracy, &perplexity),
            3)
      << r.out;
  EXPECT_NEAR(got_loss, loss, 6e-5) << r.out;
  EXPECT_NEAR(got_accuracy, accuracy, 6e-5) << r.out;
  EXPECT_NEAR(perplexity, std::exp(loss), 1e-4 * std::exp(loss)) << r.out;
  EXPECT_NE(r.out.find("(8 test samples)"), std::string::npos) << r.out;
}

TEST_F(CliGpt, PredictOnTextIsAUsageError) {
  const CliResult r = run_cli({"predict", "--model", model(), "--dataset",
                               "text:" + dir_->file("t.tok"), "--output", dir_->file("p.npy")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("use evaluate"), std::string::npos) << lines[0];
}

TEST_F(CliGpt, EvaluateWithATokenFileOfAnotherVocabularyIsOneErrorLine) {
  // The same text through a 24-token GPT-2 vocabulary would need its files; a token file of
  // vocabulary 300 written directly stands for it.
  const std::string other = dir_->file("other.tok");
  data::write_token_file(other, std::vector<std::int32_t>(400, 1), 300);
  const CliResult r = run_cli({"evaluate", "--model", model(), "--dataset", "text:" + other});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("has a vocabulary of 257 tokens"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("one of 300"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace mixprec::cli_test
