// Hugging Face GPT-2 files <-> applications::gpt() (see
// include/mixprec/applications/gpt2_weights.h).
#include "mixprec/applications/gpt2_weights.h"

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "io/atomic_file.h"
#include "mixprec/applications/gpt.h"
#include "mixprec/error.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/ops.h"

namespace mixprec::applications {

namespace {

using nlohmann::json;

constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;  // a GPT-2 config.json is under 1 KB
constexpr int kMaxConfigDepth = 16;                  // it is two levels deep

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw IOError(file.string() + ": " + what);
}

// config.json, bounded in size and nesting before anything is built from it: the depth is
// checked while parsing (nlohmann's callback sees every value's depth), so a deeply nested value
// is refused before a recursive walk could overflow the stack.
json read_config(const std::filesystem::path& file) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) fail(file, "cannot read the GPT-2 config: " + ec.message());
  if (size > kMaxConfigBytes) {
    fail(file, "is " + std::to_string(size) + " bytes; a GPT-2 config.json is at most " +
                   std::to_string(kMaxConfigBytes));
  }
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) fail(file, "cannot read the GPT-2 config");
  json config;
  try {
    config = json::parse(text, [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxConfigDepth) {
        fail(file, "nesting deeper than " + std::to_string(kMaxConfigDepth) + " levels");
      }
      return true;
    });
  } catch (const json::exception& e) {
    fail(file, std::string("not valid JSON: ") + e.what());
  }
  if (!config.is_object()) fail(file, "expected a JSON object (a GPT-2 config)");
  return config;
}

std::int64_t integer(const json& config, const std::filesystem::path& file, const char* key,
                     std::int64_t lo, std::int64_t hi) {
  const auto it = config.find(key);
  if (it == config.end()) fail(file, std::string("missing \"") + key + "\"");
  if (!it->is_number_integer()) {
    fail(file, std::string("\"") + key + "\" must be an integer, got " + it->dump().substr(0, 40));
  }
  const auto v = it->get<std::int64_t>();
  if (v < lo || v > hi) {
    fail(file, std::string("\"") + key + "\" must be in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "], got " + std::to_string(v));
  }
  return v;
}

GptConfig config_from_json(const json& j, const std::filesystem::path& file) {
  GptConfig c;
  c.layers = static_cast<int>(integer(j, file, "n_layer", 1, 1024));
  c.width = integer(j, file, "n_embd", 1, 1 << 16);
  c.heads = static_cast<int>(integer(j, file, "n_head", 1, 1024));
  c.vocab = integer(j, file, "vocab_size", 2, 1 << 24);
  c.context = j.contains("n_positions") ? integer(j, file, "n_positions", 1, 1 << 20)
                                        : integer(j, file, "n_ctx", 1, 1 << 20);
  if (c.width % c.heads != 0) {
    fail(file, "n_embd (" + std::to_string(c.width) + ") is not a multiple of n_head (" +
                   std::to_string(c.heads) + ")");
  }
  if (const auto it = j.find("layer_norm_epsilon"); it != j.end()) {
    if (!it->is_number() || !(it->get<double>() > 0.0)) {
      fail(file,
           "\"layer_norm_epsilon\" must be a positive number, got " + it->dump().substr(0, 40));
    }
    c.layer_norm_epsilon = it->get<double>();
  }
  if (const auto it = j.find("activation_function"); it != j.end()) {
    const std::string act = it->is_string() ? it->get<std::string>() : it->dump().substr(0, 40);
    if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
      fail(file, "\"activation_function\" is \"" + act +
                     "\"; mixprec's GPT uses GPT-2's tanh GELU (\"gelu_new\") only");
    }
  }
  if (const auto it = j.find("n_inner"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() != 4 * c.width) {
      fail(file, "\"n_inner\" must be null or 4 * n_embd (" + std::to_string(4 * c.width) +
                     "), got " + it->dump().substr(0, 40));
    }
  }
  return c;
}

// One of the model's variables by its full name.
Tensor model_variable(const Model& model, const std::string& name) {
  for (const layers::NamedVariable& v : model.named_variables()) {
    if (v.name == name) return v.value;
  }
  throw ValueError("gpt2 weights: model '" + model.name() + "' has no variable '" + name +
                   "'; it was not built by applications::gpt()");
}

// How one Hugging Face tensor maps onto the model: the variable, and which columns of the file's
// (rows, cols) matrix it takes (c_attn holds three variables side by side).
struct Target {
  std::string variable;
  std::int64_t column_begin = 0, column_end = -1;  // -1: every column
};

std::map<std::string, std::vector<Target>> layout(const GptConfig& c) {
  std::map<std::string, std::vector<Target>> m;
  m["wte.weight"] = {{"token_embedding/embeddings"}};
  m["wpe.weight"] = {{"position_embedding/embeddings"}};
  m["ln_f.weight"] = {{"ln_f/gamma"}};
  m["ln_f.bias"] = {{"ln_f/beta"}};
  const std::int64_t w = c.width;
  for (int i = 0; i < c.layers; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    const std::string b = "block_" + std::to_string(i) + "_";
    const std::string a = b + "attention/";
    m[h + "ln_1.weight"] = {{b + "ln_1/gamma"}};
    m[h + "ln_1.bias"] = {{b + "ln_1/beta"}};
    m[h + "attn.c_attn.weight"] = {{a + "query/kernel", 0, w},
                                   {a + "key/kernel", w, 2 * w},
                                   {a + "value/kernel", 2 * w, 3 * w}};
    m[h + "attn.c_attn.bias"] = {
        {a + "query/bias", 0, w}, {a + "key/bias", w, 2 * w}, {a + "value/bias", 2 * w, 3 * w}};
    m[h + "attn.c_proj.weight"] = {{a + "attention_output/kernel"}};
    m[h + "attn.c_proj.bias"] = {{a + "attention_output/bias"}};
    m[h + "ln_2.weight"] = {{b + "ln_2/gamma"}};
    m[h + "ln_2.bias"] = {{b + "ln_2/beta"}};
    m[h + "mlp.c_fc.weight"] = {{b + "fc/kernel"}};
    m[h + "mlp.c_fc.bias"] = {{b + "fc/bias"}};
    m[h + "mlp.c_proj.weight"] = {{b + "proj/kernel"}};
    m[h + "mlp.c_proj.bias"] = {{b + "proj/bias"}};
  }
  return m;
}

// The shape a GPT-2 file holds `name` in, for the model of config c.
Shape file_shape(const std::string& name, const GptConfig& c) {
  const std::int64_t w = c.width;
  if (name == "wte.weight") return Shape{c.vocab, w};
  if (name == "wpe.weight") return Shape{c.context, w};
  if (name.ends_with("attn.c_attn.weight")) return Shape{w, 3 * w};
  if (name.ends_with("attn.c_attn.bias")) return Shape{3 * w};
  if (name.ends_with("attn.c_proj.weight")) return Shape{w, w};
  if (name.ends_with("mlp.c_fc.weight")) return Shape{w, 4 * w};
  if (name.ends_with("mlp.c_fc.bias")) return Shape{4 * w};
  if (name.ends_with("mlp.c_proj.weight")) return Shape{4 * w, w};
  return Shape{w};  // LayerNorm parameters and the (C) biases
}

// The causal-mask buffers older GPT-2 files carry: "h.<i>.attn.bias" / "h.<i>.attn.masked_bias".
bool is_mask_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

}  // namespace

Model load_gpt2_huggingface(const std::filesystem::path& path, const Gpt2LoadOptions& options) {
  const bool is_dir = std::filesystem::is_directory(path);
  const std::filesystem::path weights_file = is_dir ? path / "model.safetensors" : path;
  const std::filesystem::path config_file = weights_file.parent_path() / "config.json";
  if (!std::filesystem::exists(weights_file)) {
    fail(weights_file,
         "no such file (a Hugging Face GPT-2 directory holds model.safetensors "
         "and config.json)");
  }
  GptConfig config = config_from_json(read_config(config_file), config_file);
  config.dtype = options.dtype;
  config.name = options.name;
  const io::SafetensorsContents contents = io::load_safetensors(weights_file);

  // Names without the optional "transformer." prefix; one file uses it everywhere or nowhere.
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : contents.tensors) {
    std::string bare = name.starts_with("transformer.") ? name.substr(12) : name;
    if (is_mask_buffer(bare)) continue;
    if (!tensors.emplace(bare, t).second) {
      fail(weights_file, "tensor '" + bare +
                             "' appears with and without the 'transformer.' "
                             "prefix");
    }
  }
  Model model = gpt(config);
  const auto targets = layout(config);
  for (const auto& [name, places] : targets) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      fail(weights_file, "missing GPT-2 tensor '" + name + "' (a " + std::to_string(config.layers) +
                             "-layer GPT-2 by config.json)");
    }
    const Tensor& file_tensor = it->second;
    if (!is_floating(file_tensor.dtype())) {
      fail(weights_file, "tensor '" + name + "' is " +
                             std::string(dtype_name(file_tensor.dtype())) +
                             ", expected a floating dtype");
    }
    const Shape expected = file_shape(name, config);
    if (file_tensor.shape() != expected) {
      fail(weights_file, "tensor '" + name + "' has shape " + file_tensor.shape().to_string() +
                             ", expected " + expected.to_string() + " for the model of " +
                             config_file.filename().string());
    }
    for (const Target& t : places) {
      const Tensor var = model_variable(model, t.variable);
      Tensor part = file_tensor;
      if (t.column_end >= 0) part = slice(file_tensor, -1, t.column_begin, t.column_end);
      // The attention's matrices take MultiHeadAttention's per-head shapes (same elements).
      var.assign(reshape(part.contiguous(), var.shape()).to(var.dtype()).to(var.device()));
    }
    tensors.erase(it);
  }
  if (const auto head = tensors.find("lm_head.weight"); head != tensors.end()) {
    // GPT-2 ties its head to the token embedding; a file whose head differs is another model.
    const Tensor table = model_variable(model, "token_embedding/embeddings");
    if (head->second.shape() != table.shape() || !all_finite(head->second) ||
        max(abs(sub(head->second.to(DType::float32), table.to(Device::cpu()).to(DType::float32))))
                .item() != 0.0) {
      fail(weights_file,
           "lm_head.weight differs from wte.weight; mixprec's GPT ties the output "
           "head to the token embedding");
    }
    tensors.erase(head);
  }
  if (!tensors.empty()) {
    fail(weights_file, "unexpected tensor '" + tensors.begin()->first +
                           "' (not part of GPT-2's layout; is this a GPT-2 checkpoint?)");
  }
  return model;
}

void save_gpt2_huggingface(const Model& gpt_model, const std::filesystem::path& dir,
                           const Gpt2SaveOptions& options) {
  const GptConfig c = gpt_config(gpt_model);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IOError(dir.string() + ": cannot create the directory: " + ec.message());
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, places] : layout(c)) {
    std::vector<Tensor> parts;
    for (const Target& t : places) {
      const Tensor var = model_variable(gpt_model, t.variable).to(Device::cpu()).to(DType::float32);
      // Back to the file's matrices: (C, H, D) -> (C, H * D), (H, D) -> (H * D), (H, D, C) ->
      // (H * D, C); every other variable already has its Hugging Face shape.
      if (name.find(".attn.") != std::string::npos && var.rank() >= 2) {
        const bool output = t.variable.ends_with("attention_output/kernel");
        parts.push_back(output            ? reshape(var, {var.dim(0) * var.dim(1), var.dim(2)})
                        : var.rank() == 3 ? reshape(var, {var.dim(0), var.dim(1) * var.dim(2)})
                                          : reshape(var, {var.numel()}));
      } else {
        parts.push_back(var);
      }
    }
    out.emplace_back(options.prefix + name,
                     parts.size() == 1 ? parts.front().contiguous() : concat(parts, -1));
  }
  io::save_safetensors(dir / "model.safetensors", out, {{"format", "pt"}});
  const json config = {{"architectures", {"GPT2LMHeadModel"}},
                       {"model_type", "gpt2"},
                       {"activation_function", "gelu_new"},
                       {"n_layer", c.layers},
                       {"n_embd", c.width},
                       {"n_head", c.heads},
                       {"n_positions", c.context},
                       {"n_ctx", c.context},
                       {"vocab_size", c.vocab},
                       {"layer_norm_epsilon", c.layer_norm_epsilon}};
  const std::string text = config.dump(2) + "\n";
  io::AtomicFile file(dir / "config.json");
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace mixprec::applications
