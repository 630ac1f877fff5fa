// Symbolic tensors for the functional API. `mp::Input({784})` returns a KerasTensor: a shape whose
// batch extent is unknown (-1, printed "None"), a dtype, and the layer call that produced it.
// Calling a layer on KerasTensors builds the layer (creates its variables from the known feature
// sizes) and returns KerasTensors with the inferred output shape and the layer's compute dtype;
// nothing is computed. `mp::Model(inputs, outputs)` turns the recorded graph into a callable model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/dtype.h"
#include "mixprec/shape.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// A shape in which an extent may be unknown (-1): the batch axis of a symbolic tensor, or an
// extent that depends on it. mixprec::Shape rejects negative extents, hence a plain vector.
using PartialShape = std::vector<std::int64_t>;

// "(None, 784)": -1 prints as None, like Keras.
std::string partial_shape_to_string(const PartialShape& shape);
// A concrete shape as a PartialShape.
PartialShape to_partial_shape(const Shape& shape);

// What a symbolic tensor is: its (partial) shape and dtype.
struct TensorSpec {
  PartialShape shape;
  DType dtype = DType::float32;
};

namespace layers {
class Layer;
namespace detail {
struct GraphNode;  // one layer call on symbolic inputs (src/layers/graph.h)
}
}  // namespace layers

class KerasTensor {
 public:
  KerasTensor() = default;  // undefined; defined() is false

  bool defined() const { return data_ != nullptr; }
  const PartialShape& shape() const;  // -1 where unknown (the batch axis)
  int rank() const { return static_cast<int>(shape().size()); }
  DType dtype() const;
  const TensorSpec& spec() const;
  // The layer whose call produced this tensor (an InputLayer for mp::Input).
  layers::Layer layer() const;
  // "<layer name>" for a layer's only output, "<layer name>:<i>" for one of several.
  std::string name() const;
  // "KerasTensor(shape=(None, 784), dtype=float32, name=digits)"
  std::string to_string() const;
  bool same(const KerasTensor& other) const { return data_ == other.data_; }

  // ---- graph internals (used by Model; not needed by users) ----
  struct Data {
    TensorSpec spec;
    std::shared_ptr<layers::detail::GraphNode> node;  // the call that produced it
    int index = 0;                                    // which output of that call
  };
  explicit KerasTensor(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  const std::shared_ptr<const Data>& data() const { return data_; }

 private:
  std::shared_ptr<const Data> data_;
};

}  // namespace mixprec

#pragma GCC visibility pop
