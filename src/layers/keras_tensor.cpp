// KerasTensor accessors and the recording of symbolic layer calls.
#include "mixprec/layers/keras_tensor.h"

#include <string>

#include "layers/graph.h"
#include "mixprec/error.h"
#include "mixprec/layers/layer.h"

namespace mixprec {

std::string partial_shape_to_string(const PartialShape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += shape[i] < 0 ? std::string("None") : std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";  // a one-tuple prints as "(784,)", like Python
  return s + ")";
}

PartialShape to_partial_shape(const Shape& shape) { return shape.dims(); }

namespace {
const KerasTensor::Data& checked(const std::shared_ptr<const KerasTensor::Data>& data) {
  if (!data) {
    throw ValueError(
        "KerasTensor: this symbolic tensor is undefined; create one with mp::Input(...) or by "
        "calling a layer on one");
  }
  return *data;
}
}  // namespace

const PartialShape& KerasTensor::shape() const { return checked(data_).spec.shape; }
DType KerasTensor::dtype() const { return checked(data_).spec.dtype; }
const TensorSpec& KerasTensor::spec() const { return checked(data_).spec; }

layers::Layer KerasTensor::layer() const {
  const Data& d = checked(data_);
  return d.node ? d.node->layer : layers::Layer();
}

std::string KerasTensor::name() const {
  const Data& d = checked(data_);
  if (!d.node) return "";
  const std::string& layer_name = d.node->layer.name();
  return d.node->outputs.size() == 1 ? layer_name : layer_name + ":" + std::to_string(d.index);
}

std::string KerasTensor::to_string() const {
  if (!data_) return "KerasTensor(undefined)";
  return "KerasTensor(shape=" + partial_shape_to_string(shape()) +
         ", dtype=" + std::string(dtype_name(dtype())) + ", name=" + name() + ")";
}

namespace layers::detail {

std::vector<KerasTensor> record_call(const Layer& layer, std::vector<KerasTensor> inputs,
                                     const std::vector<TensorSpec>& outputs) {
  auto node = std::make_shared<GraphNode>();
  node->layer = layer;
  node->inputs = std::move(inputs);
  node->outputs = outputs;
  std::vector<KerasTensor> result;
  result.reserve(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    auto data = std::make_shared<KerasTensor::Data>();
    data->spec = outputs[i];
    data->node = node;
    data->index = static_cast<int>(i);
    result.emplace_back(std::move(data));
  }
  return result;
}

}  // namespace layers::detail
}  // namespace mixprec
