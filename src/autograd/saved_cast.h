// Saved casts of variables: a node whose backward needs a weight as read in the compute dtype
// (LayerImpl::read: the recorded cast of a float32 master variable to bfloat16 or float16) keeps
// the variable and the dtype instead of the cast's output, and casts again in its backward. Under
// mixed precision the 16-bit copies of the weights are then freed right after the forward instead
// of living until the backward: they are part of the peak (EfficientNet-B0: 9 MiB of convolution
// filters, against 20 MiB of float32 variables).
//
// Casting again gives the same values only when the variable has not changed between the forward
// and the backward. A training step (models/train_step.cpp) guarantees it; a user's GradientTape
// may assign a variable in between, so the recipe is given out only inside a RecastScope, and
// elsewhere nodes keep the cast's output as before.
#pragma once

#include <optional>

#include "mixprec/tensor.h"

namespace mixprec::autograd {

// How to make a saved cast again: `variable` (a leaf, in its own dtype) cast to `dtype`.
struct SavedCast {
  Tensor variable;
  DType dtype = DType::float32;
  // cast(variable, dtype) without autograd: the values the forward's cast produced, as long as the
  // variable has not changed.
  Tensor recast() const;
};

// While one is alive on this thread, saved_cast_of() gives recipes out: the caller promises that
// no variable changes before the backward of what it records. Nests.
class RecastScope {
 public:
  RecastScope();
  ~RecastScope();
  RecastScope(const RecastScope&) = delete;
  RecastScope& operator=(const RecastScope&) = delete;
};

bool recast_enabled();

// The recipe of `t` when a RecastScope is alive on this thread and `t` is, whole, the output of a
// recorded cast of a leaf variable (contiguous, same shape); nullopt otherwise (keep `t` itself).
std::optional<SavedCast> saved_cast_of(const Tensor& t);

}  // namespace mixprec::autograd
