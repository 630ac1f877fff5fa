// The model-fusion switch (MIXPREC_FUSION, ops::set_batch_norm_activation_fusion) for a test
// scope, restored to the environment's setting when done; and the name of the autograd node that
// made a model's output, which says whether a fused op ran.
#pragma once

#include <string>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "ops/batch_norm_activation.h"

namespace mixprec::testing {

struct FusionGuard {
  explicit FusionGuard(bool on) { ops::set_batch_norm_activation_fusion(on); }
  ~FusionGuard() { ops::set_batch_norm_activation_fusion(std::nullopt); }
  FusionGuard(const FusionGuard&) = delete;
  FusionGuard& operator=(const FusionGuard&) = delete;
};

// The grad_fn of m(x) in training mode with the fusion on or off ("leaf" without one).
inline std::string output_node(const Model& m, const Tensor& x, bool fusion) {
  FusionGuard guard(fusion);
  const Tensor y = m(x, {.training = true});
  return y.grad_fn() ? y.grad_fn()->name() : "leaf";
}

}  // namespace mixprec::testing
