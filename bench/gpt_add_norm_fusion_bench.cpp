// The residual Add + LayerNormalization fusion in a whole GPT training step on the CPU: the same
// model and batch, train_on_batch with the fusion on and off alternated step by step in one
// process (their ratio holds under background load), the attention fusion kept on in both (the
// environment's MIXPREC_FUSION=0 would turn both off, so it cannot isolate this one).
//
//   gpt_add_norm_fusion_bench [--layers 6] [--width 384] [--heads 6] [--seq 256] [--batch 8]
//                             [--vocab 50257] [--steps 3] [--warmup 1] [--only on|off]
//                             [--json PATH]
// --only runs one setting (for an instruction count under callgrind, one process per setting).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "mixprec/applications.h"
#include "mixprec/attention.h"
#include "mixprec/mixprec.h"
#include "ops/batch_norm_activation.h"

namespace mp = mixprec;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto start = line.find_first_not_of(" \t", line.find(':') + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "unknown CPU";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  mp::applications::GptConfig c{
      .layers = 6, .width = 384, .heads = 6, .context = 256, .vocab = 50257};
  std::int64_t seq = 256, batch = 8;
  int steps = 3, warmup = 1;
  std::string only, json;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i], value = argv[i + 1];
    if (arg == "--layers") {
      c.layers = std::stoi(value);
    } else if (arg == "--width") {
      c.width = std::stoll(value);
    } else if (arg == "--heads") {
      c.heads = std::stoi(value);
    } else if (arg == "--seq") {
      seq = std::stoll(value);
    } else if (arg == "--batch") {
      batch = std::stoll(value);
    } else if (arg == "--vocab") {
      c.vocab = std::stoll(value);
    } else if (arg == "--steps") {
      steps = std::max(1, std::stoi(value));
    } else if (arg == "--warmup") {
      warmup = std::max(0, std::stoi(value));
    } else if (arg == "--only" && (value == "on" || value == "off")) {
      only = value;
    } else if (arg == "--json") {
      json = value;
    } else {
      std::cerr << "gpt_add_norm_fusion_bench: unknown option " << arg
                << " (see the file's head)\n";
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::cerr << "gpt_add_norm_fusion_bench: options take one value each\n";
    return 2;
  }
  c.context = seq;
  mp::set_attention_fusion(true);
  mp::set_seed(1);
  mp::Model m = mp::applications::gpt(c);
  m.compile({.optimizer = mp::optimizers::AdamW(),
             .loss = mp::losses::SparseCategoricalCrossentropy({.from_logits = true})});
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seq));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::int32_t>((i * 7919) % static_cast<std::size_t>(c.vocab));
  }
  const mp::Tensor x = mp::from_vector(ids, {batch, seq});
  std::vector<bool> settings;
  if (only.empty() || only == "on") settings.push_back(true);
  if (only.empty() || only == "off") settings.push_back(false);
  auto step = [&](bool fused) {
    mp::ops::set_batch_norm_activation_fusion(fused);
    const auto t0 = std::chrono::steady_clock::now();
    m.train_on_batch(x, x);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < warmup; ++i) {
    for (const bool s : settings) step(s);
  }
  std::vector<double> ms[2];
  for (int i = 0; i < steps; ++i) {
    for (const bool s : settings) ms[s ? 0 : 1].push_back(step(s));
  }
  std::cout << "GPT " << c.layers << " x " << c.width << ", " << c.heads << " heads, T " << seq
            << ", batch " << batch << ", vocab " << c.vocab << ", float32, AdamW\n";
  for (int k = 0; k < 2; ++k) {
    if (ms[k].empty()) continue;
    std::cout << (k == 0 ? "fused   " : "unfused ") << "median " << median(ms[k]) << " ms, min "
              << *std::min_element(ms[k].begin(), ms[k].end()) << " ms\n";
  }
  if (!ms[0].empty() && !ms[1].empty()) {
    std::cout << "fused / unfused: median " << median(ms[0]) / median(ms[1]) << "\n";
  }
  if (!json.empty() && !ms[0].empty() && !ms[1].empty()) {
    std::ofstream out(json);
    out << "{\n  \"device\": \"" << cpu_model() << "\",\n  \"workload\": {\"bench\": "
        << "\"gpt-add-norm-fusion\", \"layers\": " << c.layers << ", \"width\": " << c.width
        << ", \"heads\": " << c.heads << ", \"seq\": " << seq << ", \"batch\": " << batch
        << ", \"vocab\": " << c.vocab << ", \"steps\": " << steps << "},\n  \"fused_ms\": {"
        << "\"median\": " << median(ms[0])
        << ", \"min\": " << *std::min_element(ms[0].begin(), ms[0].end())
        << "},\n  \"unfused_ms\": {\"median\": " << median(ms[1])
        << ", \"min\": " << *std::min_element(ms[1].begin(), ms[1].end()) << "}\n}\n";
  }
  mp::ops::set_batch_norm_activation_fusion(std::nullopt);
  return 0;
}
