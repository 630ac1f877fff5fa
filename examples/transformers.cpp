// A small GPT trained on English text under mixed_bfloat16, then asked to continue a prompt: the
// Transformer part of the README, run by its check (tests/tools/check_readme_runs.py). The text is
// the fortune databases of Debian's `fortunes` package, tokenized by bytes; a few steps show the
// loss falling, and `mixprec train --model gpt-nano --dataset text:/usr/share/games/fortunes`
// trains the same model for longer.
#include <mixprec/mixprec.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace mp = mixprec;

int main() {
  mp::mixed_precision::set_global_policy("mixed_bfloat16");
  mp::set_seed(1);

  mp::data::ByteTokenizer bytes;  // 256 bytes + end-of-text: vocab 257
  std::vector<std::int32_t> ids =
      mp::data::encode_documents(bytes, mp::data::read_text_documents(mp::data::kFortunesDir));
  mp::data::TokenDataset tokens(ids, bytes.vocab_size(), {.validation_fraction = 0.1});

  mp::Model gpt = mp::applications::gpt(mp::applications::gpt_preset("gpt-nano"));
  auto adamw = mp::optimizers::AdamW({.learning_rate = 2e-3});
  adamw.exclude_from_weight_decay({}, {"bias", "gamma", "beta", "embeddings"});
  gpt.compile({.optimizer = adamw,
               .loss = mp::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  auto train = tokens.train_windows({.context = 64, .batch_size = 16, .steps_per_epoch = 30});
  gpt.fit(train, {.batch_size = 16, .epochs = 1, .verbose = 2});
  std::cout << "validation loss " << gpt.evaluate(tokens.validation_windows(64), {.verbose = 0})[0]
            << "\n";

  std::vector<std::int32_t> prompt = bytes.encode("The ");
  std::vector<std::int64_t> out = mp::applications::generate(
      gpt, {prompt.begin(), prompt.end()}, {.max_tokens = 60, .temperature = 0.8, .top_k = 20});
  std::cout << bytes.decode(std::vector<std::int32_t>(out.begin(), out.end())) << "\n";
}
