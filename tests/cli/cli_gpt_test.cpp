// A GPT through the command line: a text's bytes as tokens, `train --model gpt ... --save`, then
// `generate` and `evaluate` from the saved model. The saved model's context is the training length
// (every position it has was trained); generation slides on past the context and repeats by seed;
// evaluate on the token file gives train's test loss; bad input gives one error line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
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
  // Written and trained once for the suite: a 1-block GPT, 40 steps on a repeated sentence.
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    std::string text;
    for (int i = 0; i < 60; ++i) text += "the quick brown fox jumps over the lazy dog. ";
    // The text's bytes without an end-of-text token: generation runs to --max-tokens.
    const std::vector<std::int32_t> bytes(text.begin(), text.end());
    data::write_token_file(dir_->file("t.tok"), bytes, 257);
    const CliResult train =
        run_cli(args_of("train", {"--max-samples", "160", "--save", dir_->file("gpt"),
                                  "--metrics-json", dir_->file("train.json")}));
    ASSERT_EQ(train.exit_code, 0) << train.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string model() { return dir_->file("gpt"); }
  // `command` (train or compare) of the 1-block GPT on the suite's token file for one epoch,
  // then `extra`.
  static std::vector<std::string> args_of(const std::string& command,
                                          const std::vector<std::string>& extra) {
    std::vector<std::string> args = {command,
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
                                     "--verbose",
                                     "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
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

// A prompt of 9 bytes in a context of 16: the window slides on past the context to the 40 tokens
// asked for (byte tokens: one byte of text each); sampling is repeatable by seed.
TEST_F(CliGpt, GenerateGoesPastTheContextAndRepeatsBySeed) {
  const CliResult greedy = run_cli({"generate", "--model", model(), "--prompt", "the quick",
                                    "--max-tokens", "40", "--temperature", "0"});
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  ASSERT_EQ(greedy.out.rfind("the quick", 0), 0u) << greedy.out;
  EXPECT_EQ(greedy.out.size(), 9u + 40u + 1u) << greedy.out;  // + '\n'
  EXPECT_EQ(greedy.err, "");
  const std::vector<std::string> sampled = {"generate", "--model",       model(), "--prompt",
                                            "the",      "--seed",        "5",     "--max-tokens",
                                            "30",       "--temperature", "1"};
  const CliResult a = run_cli(sampled);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const CliResult b = run_cli(sampled);
  EXPECT_EQ(a.out, b.out);
}

// compare on text: one row per policy, the throughput counted in sequences (token windows).
TEST_F(CliGpt, CompareCountsSequences) {
  const CliResult r =
      run_cli(args_of("compare", {"--max-samples", "8", "--policies", "float32,mixed_bfloat16"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sequences/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sequences/s: training sequences / time in steps"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("images/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nfloat32 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nmixed_bfloat16 "), std::string::npos) << r.out;
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

// evaluate on the token file runs the validation windows train tested on (the same default
// split): the loss train reported, the accuracy, and the perplexity exp(loss).
TEST_F(CliGpt, EvaluateOnTheTokenFileGivesTrainsTestLoss) {
  std::ifstream in(dir_->file("train.json"));
  const nlohmann::json trained = nlohmann::json::parse(in);
  const double loss = trained.at("test").at("loss").get<double>();
  const double accuracy = trained.at("test").at("accuracy").get<double>();
  const CliResult r = run_cli({"evaluate", "--model", model(), "--dataset",
                               "text:" + dir_->file("t.tok"), "--max-samples", "160"});
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
  // 2700 tokens, the last 540 validate: 33 windows of 16 (+1), fewer than --max-samples.
  EXPECT_NE(r.out.find("(33 test samples)"), std::string::npos) << r.out;
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

// The weights of a model as float32 values, for exact comparisons.
std::vector<std::vector<float>> float_weights(const Model& model) {
  std::vector<std::vector<float>> out;
  for (const Tensor& w : model.get_weights()) {
    out.push_back(w.to(DType::float32).contiguous().to_vector<float>());
  }
  return out;
}

// --init-from with no epoch: the run's model is the saved one, weight for weight (saved again
// under another policy), and tests to the loss train reported for it.
TEST_F(CliGpt, InitFromStartsWithTheSavedWeights) {
  const std::string again = dir_->file("again");
  const CliResult r = run_cli({"train",
                               "--model",
                               "gpt",
                               "--init-from",
                               model(),
                               "--dataset",
                               "text:" + dir_->file("t.tok"),
                               "--seq-len",
                               std::to_string(kSeqLen),
                               "--max-samples",
                               "160",
                               "--epochs",
                               "0",
                               "--policy",
                               "mixed_bfloat16",
                               "--verbose",
                               "0",
                               "--save",
                               again,
                               "--metrics-json",
                               dir_->file("again.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 blocks x 32 wide, 2 heads, 16 tokens, vocab 257, from " + model()),
            std::string::npos)
      << r.out;
  EXPECT_EQ(float_weights(load_model(again)), float_weights(load_model(model())));
  std::ifstream in(dir_->file("again.json")), first(dir_->file("train.json"));
  const nlohmann::json run = nlohmann::json::parse(in), trained = nlohmann::json::parse(first);
  EXPECT_EQ(run.at("init_from"), model());
  EXPECT_EQ(run.at("gpt").at("context"), kSeqLen);
  EXPECT_EQ(trained.at("init_from"), nullptr);
  // bfloat16 compute against train's float32: the same weights, a loss within bf16's rounding.
  EXPECT_NEAR(run.at("test").at("loss").get<double>(), trained.at("test").at("loss").get<double>(),
              0.02);
}

// Fine-tuning goes on from the saved weights: one more epoch from them ends below where the
// first epoch (from the seed's weights) ended.
TEST_F(CliGpt, InitFromContinuesTraining) {
  const CliResult r = run_cli({"train", "--model", "gpt", "--init-from", model(), "--dataset",
                               "text:" + dir_->file("t.tok"), "--seq-len", std::to_string(kSeqLen),
                               "--batch-size", "4", "--max-samples", "160", "--epochs", "1",
                               "--verbose", "0", "--metrics-json", dir_->file("tuned.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir_->file("tuned.json")), first(dir_->file("train.json"));
  const nlohmann::json tuned = nlohmann::json::parse(in), trained = nlohmann::json::parse(first);
  EXPECT_LT(tuned.at("test").at("loss").get<double>(), trained.at("test").at("loss").get<double>());
}

// A Hugging Face GPT-2 directory (the 2-block fixture of vocabulary 61, context 16) as the start.
TEST_F(CliGpt, InitFromAHuggingFaceGpt2) {
  const char* tests_dir = std::getenv("MIXPREC_TEST_SOURCE_DIR");
  const std::filesystem::path tests =
      tests_dir
          ? std::filesystem::path(tests_dir)
          : std::filesystem::absolute(std::filesystem::path(__FILE__)).parent_path().parent_path();
  const std::string hf = (tests / "data" / "gpt2-tiny").string();
  std::vector<std::int32_t> ids(600);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7) % 61);
  data::write_token_file(dir_->file("hf.tok"), ids, 61);
  const std::string saved = dir_->file("hf-start");
  const CliResult r = run_cli({"train", "--model", "gpt", "--init-from", hf, "--hf-gpt2",
                               "--dataset", "text:" + dir_->file("hf.tok"), "--seq-len", "8",
                               "--epochs", "0", "--verbose", "0", "--save", saved});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Model start = load_model(saved);
  EXPECT_EQ(applications::gpt_config(start).context, 16);  // the pretrained positions stay
  EXPECT_EQ(float_weights(start), float_weights(applications::load_gpt2_huggingface(hf)));
}

TEST_F(CliGpt, InitFromErrorsAreOneLine) {
  const std::string text = "text:" + dir_->file("t.tok");
  const std::string other = dir_->file("other-init.tok");
  data::write_token_file(other, std::vector<std::int32_t>(400, 1), 300);
  const struct {
    std::vector<std::string> args;
    int exit_code;
    std::string says;
  } cases[] = {
      {{"--model", "gpt-nano", "--init-from", model(), "--dataset", text}, 2, "pass --model gpt"},
      {{"--model", "gpt", "--init-from", model(), "--layers", "2", "--dataset", text},
       2,
       "the saved GPT's shape"},
      {{"--model", "gpt", "--hf-gpt2", "--dataset", text}, 2, "give --init-from DIR"},
      {{"--model", "gpt", "--init-from", model(), "--seq-len", "17", "--dataset", text},
       2,
       "--seq-len 17 is longer than the 16 positions"},
      {{"--model", "gpt", "--init-from", model(), "--dataset", "text:" + other},
       2,
       "has a vocabulary of 257 tokens, text:" + other + " of 300"},
      {{"--model", "gpt", "--init-from", dir_->file("nothing-here"), "--dataset", text},
       1,
       "nothing-here"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"train", "--epochs", "0", "--verbose", "0"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.says << ": " << r.err;
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_NE(lines[0].find(c.says), std::string::npos) << lines[0];
    EXPECT_EQ(r.out, "") << c.says;
  }
}

}  // namespace
}  // namespace mixprec::cli_test
