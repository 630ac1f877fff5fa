// `mixprec tokenize --input PATH --output FILE.tok [--tokenizer byte|gpt2 --encoder encoder.json
// --vocab vocab.bpe]`: reads a text file or a directory of fortune databases
// (mixprec/data/text_corpus.h), tokenizes every document followed by the end-of-text token
// (mixprec/data/tokenizer.h) and writes a token file atomically (mixprec/data/token_file.h), which
// `--dataset text:FILE.tok` then maps. Prints the document, byte and token counts and the vocab
// size.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "mixprec/mixprec.h"
#include "options.h"

namespace mixprec::cli {

namespace {

struct TokenizeOptions {
  std::string input;
  std::string output;
  std::string tokenizer = "byte";
  std::string encoder;
  std::string vocab;
  std::int64_t max_bytes = data::kTextCorpusDefaultMaxBytes;
};

void check(const TokenizeOptions& o) {
  if (o.tokenizer == "gpt2" && (o.encoder.empty() || o.vocab.empty())) {
    throw UsageError(
        "--tokenizer gpt2 needs GPT-2's files: --encoder encoder.json and --vocab vocab.bpe");
  }
  if (o.tokenizer == "byte" && (!o.encoder.empty() || !o.vocab.empty())) {
    throw UsageError(
        "--encoder and --vocab go with --tokenizer gpt2; the byte tokenizer has no "
        "files");
  }
  if (o.max_bytes <= 0) {
    throw UsageError("--max-bytes must be positive, got " + std::to_string(o.max_bytes));
  }
}

void run_tokenize(const TokenizeOptions& o) {
  check(o);
  // The tokenizer first: bad GPT-2 files are found before a large corpus is read.
  std::unique_ptr<data::Tokenizer> tokenizer;
  if (o.tokenizer == "gpt2") {
    tokenizer = std::make_unique<data::Gpt2Tokenizer>(o.encoder, o.vocab);
  } else {
    tokenizer = std::make_unique<data::ByteTokenizer>();
  }
  const std::vector<std::string> documents =
      data::read_text_documents(o.input, {.max_bytes = o.max_bytes});
  std::size_t bytes = 0;
  for (const std::string& d : documents) bytes += d.size();
  const std::vector<std::int32_t> tokens = data::encode_documents(*tokenizer, documents);
  data::write_token_file(o.output, tokens, tokenizer->vocab_size());
  std::printf("tokenized %zu document(s), %zu bytes, from %s with the %s tokenizer\n",
              documents.size(), bytes, o.input.c_str(), tokenizer->name().c_str());
  std::printf("tokens: %zu\n", tokens.size());
  std::printf("vocab size: %lld\n", static_cast<long long>(tokenizer->vocab_size()));
  std::printf("wrote %s\n", o.output.c_str());
  std::fflush(stdout);
}

}  // namespace

Command add_tokenize_command(CLI::App& app, const Invocation& invocation) {
  (void)invocation;
  auto* sub = app.add_subcommand(
      "tokenize",
      "tokenize a text file or a directory of fortune databases into a token file for "
      "--dataset text:FILE.tok (end-of-text after each document)");
  auto o = std::make_shared<TokenizeOptions>();
  sub->add_option("--input", o->input,
                  std::string("a text file (one document) or a directory of fortune databases "
                              "(entries between '%' lines), e.g. ") +
                      data::kFortunesDir)
      ->required();
  sub->add_option("--output", o->output, "the token file to write (atomically), e.g. text.tok")
      ->required();
  sub->add_option("--tokenizer", o->tokenizer,
                  "byte (256 bytes + end-of-text: vocab 257) or gpt2 (needs --encoder and --vocab)")
      ->check(CLI::IsMember({"byte", "gpt2"}))
      ->capture_default_str();
  sub->add_option("--encoder", o->encoder, "GPT-2's encoder.json (with --tokenizer gpt2)");
  sub->add_option("--vocab", o->vocab, "GPT-2's vocab.bpe (with --tokenizer gpt2)");
  sub->add_option("--max-bytes", o->max_bytes, "refuse to read more text than this")
      ->capture_default_str();
  return {sub, [o] { run_tokenize(*o); }};
}

}  // namespace mixprec::cli
