// `mixprec generate --model DIR --prompt "..." --max-tokens N --temperature T --top-k K`: text from
// a GPT saved by `mixprec train --model gpt-... --save DIR` (or any model applications::gpt()
// built and Model::save wrote), or from a Hugging Face GPT-2 directory (--hf-gpt2), with the
// key-value cache of applications::GptDecoder: N new tokens cost N single-position steps (past
// the context, the window slides: the cache restarts from the last half context).
// The prompt is tokenized by the byte tokenizer (the default, vocab 257: what `mixprec train`
// uses for text) or by GPT-2's BPE (--encoder encoder.json --vocab vocab.bpe); the prompt and the
// generated text are printed as one string.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "mixprec/applications.h"
#include "mixprec/data/tokenizer.h"
#include "mixprec/mixprec.h"
#include "options.h"

namespace mixprec::cli {

namespace {

struct GenerateCliOptions {
  std::string model_dir;
  bool hf_gpt2 = false;
  std::string prompt;
  std::int64_t max_tokens = 100;
  double temperature = 0.8;
  std::int64_t top_k = 40;
  std::uint64_t seed = 0;
  std::string encoder;  // GPT-2's encoder.json
  std::string vocab;    // GPT-2's vocab.bpe
};

std::unique_ptr<data::Tokenizer> make_tokenizer(const GenerateCliOptions& o) {
  if (o.encoder.empty() != o.vocab.empty()) {
    throw UsageError("--encoder and --vocab go together (GPT-2's encoder.json and vocab.bpe)");
  }
  if (!o.encoder.empty()) return std::make_unique<data::Gpt2Tokenizer>(o.encoder, o.vocab);
  return std::make_unique<data::ByteTokenizer>();
}

void run_generate(const GenerateCliOptions& o) {
  if (o.max_tokens < 0) throw UsageError("--max-tokens must be >= 0");
  if (o.temperature < 0) throw UsageError("--temperature must be >= 0 (0 = greedy)");
  if (o.top_k < 0) throw UsageError("--top-k must be >= 0 (0 = every token)");
  if (o.prompt.empty()) throw UsageError("--prompt must not be empty");
  const std::unique_ptr<data::Tokenizer> tokenizer = make_tokenizer(o);
  // Inference: the float32 master weights whatever policy trained them.
  Model model =
      o.hf_gpt2 ? applications::load_gpt2_huggingface(o.model_dir) : load_model(o.model_dir);
  const applications::GptConfig config = applications::gpt_config(model);
  if (config.vocab != tokenizer->vocab_size()) {
    throw UsageError(
        "the model's vocabulary has " + std::to_string(config.vocab) + " tokens but the " +
        tokenizer->name() + " tokenizer has " + std::to_string(tokenizer->vocab_size()) +
        (tokenizer->name() == "byte" ? "; pass GPT-2's --encoder and --vocab for a GPT-2 vocabulary"
                                     : ""));
  }
  const std::vector<std::int32_t> encoded = tokenizer->encode(o.prompt);
  std::vector<std::int64_t> prompt(encoded.begin(), encoded.end());
  if (prompt.empty()) throw UsageError("--prompt gave no tokens");
  const std::vector<std::int64_t> ids =
      applications::generate(model, prompt,
                             {.max_tokens = o.max_tokens,
                              .temperature = o.temperature,
                              .top_k = o.top_k,
                              .seed = o.seed,
                              .stop_token = static_cast<std::int64_t>(tokenizer->end_of_text())});
  std::vector<std::int32_t> out(ids.begin(), ids.end());
  if (!out.empty() && out.back() == tokenizer->end_of_text()) out.pop_back();
  const std::string text = tokenizer->decode(out);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace

Command add_generate_command(CLI::App& app, const Invocation& invocation) {
  (void)invocation;
  auto* sub = app.add_subcommand(
      "generate", "continue a prompt with a GPT saved by `train --model gpt-... --save DIR`");
  auto o = std::make_shared<GenerateCliOptions>();
  sub->add_option("--model", o->model_dir, "the saved model's directory (train --save DIR)")
      ->required();
  sub->add_flag("--hf-gpt2", o->hf_gpt2,
                "DIR is a Hugging Face GPT-2 directory (config.json, model.safetensors)");
  sub->add_option("--prompt", o->prompt, "the text to continue")->required();
  sub->add_option("--max-tokens", o->max_tokens, "new tokens at most (default 100)");
  sub->add_option("--temperature", o->temperature,
                  "sampling temperature, 0 = greedy (default 0.8)");
  sub->add_option("--top-k", o->top_k,
                  "sample among the k most likely tokens, 0 = all (default 40)");
  sub->add_option("--seed", o->seed, "sampling seed (default 0): the same seed, the same text");
  sub->add_option("--encoder", o->encoder, "GPT-2's encoder.json (with --vocab): BPE tokens");
  sub->add_option("--vocab", o->vocab, "GPT-2's vocab.bpe (with --encoder)");
  return {sub, [o] { run_generate(*o); }};
}

}  // namespace mixprec::cli
