// The state of an InputLayer (internal: Model and Sequential recognise input nodes by it).
#pragma once

#include <memory>
#include <vector>

#include "layers/layer_config.h"
#include "mixprec/layers/input_layer.h"

namespace mixprec::layers {

class InputLayerImpl final : public LayerImpl {
 public:
  // {"name", "dtype" (the input's dtype name), "batch_shape" (-1 where unknown)}.
  nlohmann::json get_config() const override;
  InputLayerImpl(std::vector<std::int64_t> shape, const InputOptions& options);

  bool autocasts() const override { return false; }
  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override;
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions& options) override;

  // The KerasTensor this layer produces; the same one while it is alive. Held weakly: the tensor's
  // graph node holds this layer, so a strong reference would be a cycle.
  KerasTensor output(const Layer& self);

  DType dtype_;
  PartialShape batch_shape_;  // (batch_size or -1, shape...)
  std::weak_ptr<const KerasTensor::Data> output_;
};

}  // namespace mixprec::layers
