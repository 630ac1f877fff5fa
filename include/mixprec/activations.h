// Activation functions by name (the `activation` option of Dense and the Activation layer).
// Every one keeps the input dtype; softmax normalises over the last axis and, like every
// reduction, accumulates in float32 inside.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// "linear" (identity; also the empty name), "relu", "relu6", "sigmoid", "tanh", "softmax",
// "log_softmax", "gelu" (exact erf form, the Keras default), "gelu_tanh" (the tanh approximation:
// Keras' gelu(x, approximate=True), GPT-2's "gelu_new"), "swish", "silu" (the same function).
// An unknown name throws ValueError listing the valid names.
Tensor apply_activation(std::string_view name, const Tensor& x);

// The valid names, in the order above.
std::vector<std::string> activation_names();
// Throws the ValueError apply_activation would throw for `name`; `context` starts the message
// ("Dense 'dense_1'"). Lets layers reject a bad name at construction rather than at the first call.
void check_activation_name(std::string_view name, std::string_view context = "activation");

}  // namespace mixprec

#pragma GCC visibility pop
