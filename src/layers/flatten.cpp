// Flatten: (batch, d1, ..., dn) -> (batch, d1 * ... * dn); (batch,) -> (batch, 1).
#include "mixprec/layers/flatten.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"

namespace mixprec::layers {

namespace {

class FlattenImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override { return base_config(); }
  explicit FlattenImpl(const LayerOptions& o) : LayerImpl("Flatten", o) {}

  void validate(const std::vector<PartialShape>& shapes) const override {
    if (shapes[0].empty()) {
      throw ShapeError(name() +
                       ": Flatten expects an input with a batch axis (rank >= 1), got a "
                       "scalar of shape ()");
    }
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    const PartialShape& s = shapes[0];
    std::int64_t features = 1;
    for (std::size_t i = 1; i < s.size(); ++i) {
      if (s[i] < 0) {
        features = -1;  // unknown when any feature extent is
        break;
      }
      features *= s[i];
    }
    return {{s[0], features}};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];
    std::int64_t features = 1;
    for (int i = 1; i < x.rank(); ++i) features *= x.dim(i);
    return {x.reshape(Shape{x.dim(0), features})};
  }
};

}  // namespace

Flatten::Flatten(LayerOptions options) : Layer(std::make_shared<FlattenImpl>(options)) {}

}  // namespace mixprec::layers
