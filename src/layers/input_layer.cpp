// InputLayer and mp::Input: the source nodes of a functional graph.
#include "mixprec/layers/input_layer.h"

#include <nlohmann/json.hpp>
#include <string>

#include "layers/graph.h"
#include "layers/input_layer_impl.h"
#include "mixprec/error.h"

namespace mixprec {
namespace layers {

namespace {
LayerOptions input_layer_options(const InputOptions& o) {
  // A floating input's policy is its dtype (shown by summary()); other dtypes keep the default.
  LayerOptions lo;
  lo.name = o.name;
  return lo;
}
}  // namespace

InputLayerImpl::InputLayerImpl(std::vector<std::int64_t> shape, const InputOptions& o)
    : LayerImpl("InputLayer", input_layer_options(o)), dtype_(o.dtype) {
  if (o.batch_size != -1 && o.batch_size <= 0) {
    throw ValueError(name() + ": batch_size must be positive or -1 (any), got " +
                     std::to_string(o.batch_size));
  }
  for (std::int64_t d : shape) {
    if (d < -1) {
      throw ValueError(name() + ": Input shape " + partial_shape_to_string(shape) +
                       " has a negative extent; use -1 for an unknown extent");
    }
  }
  batch_shape_ = {o.batch_size};
  batch_shape_.insert(batch_shape_.end(), shape.begin(), shape.end());
  if (is_floating(dtype_)) set_policy(mixed_precision::Policy(dtype_name(dtype_)));
  set_built(true);
}

nlohmann::json InputLayerImpl::get_config() const {
  nlohmann::json c = nlohmann::json::object();
  c["name"] = name();
  c["dtype"] = std::string(dtype_name(dtype_));
  c["batch_shape"] = batch_shape_;  // -1 where unknown (the batch axis unless batch_size is set)
  return c;
}

std::vector<PartialShape> InputLayerImpl::compute_output_shape(
    const std::vector<PartialShape>& shapes) const {
  return shapes;
}

std::vector<Tensor> InputLayerImpl::call(const std::vector<Tensor>& inputs, const CallOptions&) {
  return inputs;
}

KerasTensor InputLayerImpl::output(const Layer& self) {
  if (auto alive = output_.lock()) return KerasTensor(alive);
  KerasTensor t = detail::record_call(self, {}, {TensorSpec{batch_shape_, dtype_}})[0];
  output_ = t.data();
  return t;
}

InputLayer::InputLayer(std::vector<std::int64_t> shape, InputOptions options)
    : Layer(std::make_shared<InputLayerImpl>(std::move(shape), options)) {}

KerasTensor InputLayer::output() const {
  return static_cast<InputLayerImpl&>(impl()).output(*this);
}

DType InputLayer::dtype() const { return static_cast<const InputLayerImpl&>(impl()).dtype_; }

const PartialShape& InputLayer::batch_shape() const {
  return static_cast<const InputLayerImpl&>(impl()).batch_shape_;
}

}  // namespace layers

KerasTensor Input(std::vector<std::int64_t> shape, InputOptions options) {
  return layers::InputLayer(std::move(shape), options).output();
}

}  // namespace mixprec
