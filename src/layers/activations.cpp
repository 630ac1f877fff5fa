// Activation functions by name.
#include "mixprec/activations.h"

#include <array>
#include <string>

#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec {

namespace {

// "gelu_tanh" is GELU's tanh approximation (Keras: gelu(x, approximate=True); GPT-2's "gelu_new").
constexpr std::array<std::string_view, 11> kNames = {
    "linear",      "relu", "relu6",     "sigmoid", "tanh", "softmax",
    "log_softmax", "gelu", "gelu_tanh", "swish",   "silu"};

std::string joined_names() {
  std::string s;
  for (std::string_view n : kNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

bool is_valid(std::string_view name) {
  if (name.empty()) return true;
  for (std::string_view n : kNames) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> activation_names() { return {kNames.begin(), kNames.end()}; }

void check_activation_name(std::string_view name, std::string_view context) {
  if (!is_valid(name)) {
    throw ValueError(std::string(context) + ": unknown activation '" + std::string(name) +
                     "'; valid names are: " + joined_names());
  }
}

Tensor apply_activation(std::string_view name, const Tensor& x) {
  if (name.empty() || name == "linear") return x;
  if (name == "relu") return relu(x);
  if (name == "relu6") return relu6(x);
  if (name == "sigmoid") return sigmoid(x);
  if (name == "tanh") return tanh(x);
  if (name == "softmax") return softmax(x, -1);
  if (name == "log_softmax") return log_softmax(x, -1);
  if (name == "gelu") return gelu(x, GeluApproximation::none);
  if (name == "gelu_tanh") return gelu(x, GeluApproximation::tanh);
  if (name == "swish" || name == "silu") return silu(x);
  check_activation_name(name);
  return x;  // unreachable: check_activation_name threw
}

}  // namespace mixprec
