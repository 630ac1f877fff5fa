#include "layers/add_norm_fusion.h"

#include <utility>

namespace mixprec::layers::detail {

namespace {
// The scope whose request the next Add call on this thread takes.
thread_local AddNormScope* t_request = nullptr;
}  // namespace

AddNormScope::AddNormScope(const Layer& norm) : norm_(norm) { t_request = this; }
AddNormScope::~AddNormScope() {
  if (t_request == this) t_request = nullptr;
}

AddNormScope* take_add_norm_request() { return std::exchange(t_request, nullptr); }

bool fusable_norm_layer(const Layer& layer, DType input_dtype) {
  if (!is_layer_normalization(layer) && !is_rms_normalization(layer)) return false;
  const LayerImpl& impl = layer.impl();
  const DType computes =
      impl.autocasts() && is_floating(input_dtype) ? impl.compute_dtype() : input_dtype;
  return impl.built() && is_floating(input_dtype) && computes == input_dtype;
}

std::optional<FusedNormParameters> fused_norm_parameters(const Layer& layer, const Tensor& x) {
  if (auto p = layer_norm_parameters(layer, x)) return p;
  return rms_norm_parameters(layer, x);
}

}  // namespace mixprec::layers::detail
