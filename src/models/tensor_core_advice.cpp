#include "mixprec/models/tensor_core_advice.h"

#include <string_view>

#include "models/model_impl.h"

namespace mixprec {

namespace {

std::int64_t round_up_8(std::int64_t n) { return (n + 7) / 8 * 8; }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void check(std::vector<TensorCoreAdvice>& out, const std::string& layer, const char* what,
           std::int64_t size) {
  if (size % 8 != 0) out.push_back({layer, what, size, round_up_8(size)});
}

// Returns whether the model has a 16-bit layer with a kernel (so the batch size matters too).
bool visit(const Model& model, std::vector<TensorCoreAdvice>& out) {
  bool any = false;
  for (const layers::Layer& layer : model.layers()) {
    if (dynamic_cast<const models::ModelImpl*>(&layer.impl()) != nullptr) {
      any = visit(Model(layer), out) || any;
      continue;
    }
    if (!is_16bit_float(layer.compute_dtype())) continue;
    for (const layers::NamedVariable& v : layer.named_variables()) {
      // The main kernel only: "dense_1/kernel", "conv2d/kernel" (not "depthwise_kernel", whose
      // per-channel products do not map onto tensor-core tiles).
      if (!ends_with(v.name, "/kernel")) continue;
      const Shape& s = v.value.shape();
      any = any || s.rank() == 2 || s.rank() == 4;
      if (s.rank() == 2) {
        check(out, layer.name(), "input features", s[0]);
        check(out, layer.name(), "units", s[1]);
      } else if (s.rank() == 4) {
        check(out, layer.name(), "input channels", s[2]);
        check(out, layer.name(), "filters", s[3]);
      }
    }
  }
  return any;
}

}  // namespace

std::string TensorCoreAdvice::to_string() const {
  return layer + ": " + what + " " + std::to_string(size) +
         " is not a multiple of 8, so tensor cores cannot run at full speed; use " +
         std::to_string(padded);
}

std::vector<TensorCoreAdvice> tensor_core_advice(const Model& model,
                                                 std::optional<std::int64_t> batch_size) {
  std::vector<TensorCoreAdvice> out;
  const bool has_16bit_kernels = visit(model, out);
  if (has_16bit_kernels && batch_size && *batch_size % 8 != 0) {
    out.push_back({"batch", "batch size", *batch_size, round_up_8(*batch_size)});
  }
  return out;
}

}  // namespace mixprec
