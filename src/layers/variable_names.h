// The names of layer variables ("<layer>/<weight>", given by LayerImpl::add_weight), looked up by
// the tensor, for code that receives bare variables: the optimizers' exclude_from_weight_decay.
// Weak references: a name is forgotten with its variable.
#pragma once

#include <string>

#include "mixprec/tensor.h"

namespace mixprec::layers::detail {

// Records `name` for `variable` (a layer's variable, created by add_weight).
void register_variable_name(const Tensor& variable, const std::string& name);
// The recorded name of `variable`, or "" for a tensor that is no layer variable.
std::string variable_name(const Tensor& variable);

}  // namespace mixprec::layers::detail
