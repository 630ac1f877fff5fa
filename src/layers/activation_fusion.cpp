#include "layers/activation_fusion.h"

#include <utility>

namespace mixprec::layers::detail {

namespace {
// The activation a FusedActivationScope asks the next BatchNormalization or Add call on this
// thread to apply.
thread_local std::optional<UnaryOp> t_fused_activation;
}  // namespace

FusedActivationScope::FusedActivationScope(UnaryOp act) { t_fused_activation = act; }
FusedActivationScope::~FusedActivationScope() { t_fused_activation = std::nullopt; }

std::optional<UnaryOp> take_fused_activation() {
  return std::exchange(t_fused_activation, std::nullopt);
}

}  // namespace mixprec::layers::detail
