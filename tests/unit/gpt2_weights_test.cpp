// Hugging Face GPT-2 files: the committed fixture tests/data/gpt2-tiny (written by
// tests/tools/make_hf_gpt2.py: a GPT-2 written in PyTorch, random weights, "transformer."-prefixed
// names, Conv1D (in, out) kernels, the attn.bias mask buffers) loads into applications::gpt() and
// gives PyTorch's logits; save_gpt2_huggingface writes it back (with and without the prefix) and
// the files load again to the same weights; malformed files are refused naming the file and the
// tensor or key. When python3 with torch is installed, a second model is made by the script at
// test time with other sizes and checked the same way (reported as skipped otherwise).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/applications.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

namespace app = applications;
namespace fs = std::filesystem;
using testing::expect_error;
using testing::PolicyGuard;
using testing::TempDir;

// tests/ of the source tree: MIXPREC_TEST_SOURCE_DIR (set by ctest, tests/CMakeLists.txt), else
// found from this file's path.
fs::path source_tests() {
  if (const char* dir = std::getenv("MIXPREC_TEST_SOURCE_DIR")) return dir;
  return fs::absolute(fs::path(__FILE__)).parent_path().parent_path();
}
const fs::path kSourceTests = source_tests();
const fs::path kFixture = kSourceTests / "data" / "gpt2-tiny";

std::vector<float> to_floats(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::float32).contiguous().to_vector<float>();
}

Tensor find(const io::SafetensorsContents& c, const std::string& name) {
  for (const auto& [n, t] : c.tensors) {
    if (n == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return Tensor();
}

// Our float32 logits for the fixture's input against PyTorch's (computed in float64, rounded
// once): within 1e-4 relative to the largest logit (the issue's float32 bound).
void expect_pytorch_logits(const fs::path& dir) {
  PolicyGuard guard(mixed_precision::Policy("float32"));
  Model m = app::load_gpt2_huggingface(dir);
  const io::SafetensorsContents ref = io::load_safetensors(dir / "reference.safetensors");
  const Tensor ids = find(ref, "input_ids").to(DType::int32);
  const std::vector<float> want = to_floats(find(ref, "logits"));
  const std::vector<float> got = to_floats(m(ids));
  ASSERT_EQ(got.size(), want.size());
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0.5f);  // the fixture's logits are not all near zero
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) / scale);
  }
  EXPECT_LT(worst, 1e-4) << dir;
}

TEST(Gpt2WeightsTest, FixtureGivesPyTorchsLogits) {
  expect_pytorch_logits(kFixture);
  // The model.safetensors path itself works as well as its directory.
  PolicyGuard guard(mixed_precision::Policy("float32"));
  const Model m = app::load_gpt2_huggingface(kFixture / "model.safetensors");
  const app::GptConfig c = app::gpt_config(m);
  EXPECT_EQ(c.layers, 2);
  EXPECT_EQ(c.width, 32);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.context, 16);
  EXPECT_EQ(c.vocab, 61);
}

TEST(Gpt2WeightsTest, SaveWritesTheLayoutBackWithAndWithoutPrefix) {
  PolicyGuard guard(mixed_precision::Policy("float32"));
  const Model m = app::load_gpt2_huggingface(kFixture);
  const io::SafetensorsContents original = io::load_safetensors(kFixture / "model.safetensors");
  for (const std::string prefix : {"transformer.", ""}) {
    TempDir dir;
    app::save_gpt2_huggingface(m, dir.path(), {.prefix = prefix});
    const io::SafetensorsContents saved = io::load_safetensors(dir.path() / "model.safetensors");
    // Every weight of the original file (not the mask buffers), same values under the prefix.
    std::size_t weights = 0;
    for (const auto& [name, t] : original.tensors) {
      if (name.ends_with(".attn.bias")) continue;
      ++weights;
      const std::string bare = name.substr(std::string("transformer.").size());
      EXPECT_EQ(to_floats(find(saved, prefix + bare)), to_floats(t)) << name;
      EXPECT_EQ(find(saved, prefix + bare).shape(), t.shape()) << name;
    }
    EXPECT_EQ(saved.tensors.size(), weights);
    // And it loads again (config.json written beside it) to the same logits.
    fs::copy_file(kFixture / "reference.safetensors", dir.path() / "reference.safetensors");
    expect_pytorch_logits(dir.path());
  }
}

// A copy of the fixture with one change, for the error cases.
struct Tampered {
  TempDir dir;
  explicit Tampered(const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit,
                    const std::string& config_json = "") {
    io::SafetensorsContents c = io::load_safetensors(kFixture / "model.safetensors");
    edit(c.tensors);
    io::save_safetensors(dir.path() / "model.safetensors", c.tensors);
    if (config_json.empty()) {
      fs::copy_file(kFixture / "config.json", dir.path() / "config.json");
    } else {
      std::ofstream(dir.path() / "config.json") << config_json;
    }
  }
};

TEST(Gpt2WeightsTest, MalformedFilesAreRefusedNamingWhatIsWrong) {
  PolicyGuard guard(mixed_precision::Policy("float32"));
  {
    Tampered t([](auto& ts) {
      std::erase_if(ts, [](auto& p) { return p.first.ends_with("h.1.mlp.c_fc.bias"); });
    });
    expect_error<IOError>([&] { app::load_gpt2_huggingface(t.dir.path()); },
                          {"model.safetensors", "missing", "h.1.mlp.c_fc.bias"});
  }
  {
    Tampered t([](auto& ts) {
      for (auto& [n, v] : ts) {
        if (n.ends_with("h.0.attn.c_proj.weight")) v = zeros({32, 31});
      }
    });
    expect_error<IOError>([&] { app::load_gpt2_huggingface(t.dir.path()); },
                          {"h.0.attn.c_proj.weight", "(32, 31)", "(32, 32)"});
  }
  {
    Tampered t([](auto& ts) { ts.emplace_back("transformer.h.0.extra.weight", zeros({2})); });
    expect_error<IOError>([&] { app::load_gpt2_huggingface(t.dir.path()); },
                          {"unexpected tensor", "h.0.extra.weight"});
  }
  {
    Tampered t([](auto& ts) { ts.emplace_back("lm_head.weight", zeros({61, 32})); });
    expect_error<IOError>([&] { app::load_gpt2_huggingface(t.dir.path()); },
                          {"lm_head.weight", "wte"});
  }
  {
    Tampered t([](auto&) {},
               R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "n_positions": 16,
                   "vocab_size": 61, "activation_function": "relu"})");
    expect_error<IOError>([&] { app::load_gpt2_huggingface(t.dir.path()); },
                          {"config.json", "activation_function", "relu"});
  }
  {
    Tampered t([](auto&) {}, R"({"n_layer": 2, "n_embd": 32, "n_head": 5, "n_positions": 16,
                                 "vocab_size": 61})");
    expect_error<IOError>([&] { app::load_gpt2_huggingface(t.dir.path()); },
                          {"config.json", "n_head"});
  }
  {
    // A deep value under a key the reader ignores: refused while parsing, no stack overflow.
    std::string deep = R"({"n_layer": 2, "n_embd": 32, "n_head": 4, "n_positions": 16,
                           "vocab_size": 61, "task_specific_params": )";
    deep += std::string(100000, '[') + std::string(100000, ']') + "}";
    Tampered t([](auto&) {}, deep);
    expect_error<IOError>([&] { app::load_gpt2_huggingface(t.dir.path()); },
                          {"config.json", "nesting"});
  }
  expect_error<IOError>([] { app::load_gpt2_huggingface("/nonexistent/gpt2"); },
                        {"/nonexistent/gpt2", "model.safetensors"});
}

// Another model made now by PyTorch (bare names, other sizes), when torch can be imported.
TEST(Gpt2WeightsTest, FreshPyTorchModelGivesItsLogits) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 cannot import torch (Debian python3-torch); the committed fixture "
                    "is checked by FixtureGivesPyTorchsLogits";
  }
  TempDir dir;
  const std::string cmd = "/usr/bin/python3 " +
                          (kSourceTests / "tools" / "make_hf_gpt2.py").string() + " " + dir.str() +
                          " --seed 3 --layers 3 --width 48 --heads 6 --context 20"
                          " --vocab 97 --tokens 17 --prefix '' >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  expect_pytorch_logits(dir.path());
}

}  // namespace
}  // namespace mixprec
