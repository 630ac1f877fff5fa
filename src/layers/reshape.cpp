// Reshape: (batch, ...) -> (batch, target...), one target extent may be -1 (inferred).
#include "mixprec/layers/reshape.h"

#include <string>

#include "layers/layer_config.h"
#include "mixprec/error.h"

namespace mixprec::layers {

namespace {

class ReshapeImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["target_shape"] = target_;
    return c;
  }
  ReshapeImpl(std::vector<std::int64_t> target, const LayerOptions& o)
      : LayerImpl("Reshape", o), target_(std::move(target)) {
    int unknown = 0;
    for (std::int64_t d : target_) {
      if (d == -1) {
        ++unknown;
      } else if (d < 0) {
        throw ValueError(name() + ": Reshape target " + partial_shape_to_string(target_) +
                         " has a negative extent; only -1 (infer this extent) is allowed");
      }
    }
    if (unknown > 1) {
      throw ValueError(name() + ": Reshape target " + partial_shape_to_string(target_) +
                       " has more than one -1; at most one extent can be inferred");
    }
  }

  // The target with its -1 resolved for `features` input elements per sample; -1 stays when
  // `features` is unknown. Throws when the counts cannot match.
  PartialShape resolve(const PartialShape& input) const {
    std::int64_t features = 1;
    for (std::size_t i = 1; i < input.size(); ++i) {
      if (input[i] < 0) return target_;  // unknown: nothing to check or infer yet
      features *= input[i];
    }
    std::int64_t known = 1;
    int infer = -1;
    for (std::size_t i = 0; i < target_.size(); ++i) {
      if (target_[i] == -1) {
        infer = static_cast<int>(i);
      } else {
        known *= target_[i];
      }
    }
    PartialShape out = target_;
    if (infer >= 0 && known > 0 && features % known == 0) {
      out[static_cast<std::size_t>(infer)] = features / known;
    } else if (infer >= 0 || known != features) {
      // The batch extent prints as None when unknown; a -1 in the target stays -1 ("infer").
      std::string wanted(1, '(');
      wanted += input.empty() || input[0] < 0 ? std::string("None") : std::to_string(input[0]);
      for (std::int64_t d : target_) wanted += ", " + std::to_string(d);
      throw ShapeError(name() + ": cannot reshape an input of shape " +
                       partial_shape_to_string(input) + " (" + std::to_string(features) +
                       " elements per sample) to " + wanted +
                       "); the target must hold the same number of elements");
    }
    return out;
  }

  void validate(const std::vector<PartialShape>& shapes) const override {
    if (shapes[0].empty()) {
      throw ShapeError(name() +
                       ": Reshape expects an input with a batch axis (rank >= 1), got a "
                       "scalar of shape ()");
    }
    resolve(shapes[0]);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    PartialShape out = {shapes[0][0]};
    const PartialShape t = resolve(shapes[0]);
    out.insert(out.end(), t.begin(), t.end());
    return {out};
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions&) override {
    const Tensor& x = inputs[0];
    PartialShape out = {x.dim(0)};
    const PartialShape t = resolve(to_partial_shape(x.shape()));
    out.insert(out.end(), t.begin(), t.end());
    return {x.reshape(Shape(out))};
  }

  std::vector<std::int64_t> target_;
};

}  // namespace

Reshape::Reshape(std::vector<std::int64_t> target_shape, LayerOptions options)
    : Layer(std::make_shared<ReshapeImpl>(std::move(target_shape), options)) {}

const std::vector<std::int64_t>& Reshape::target_shape() const {
  return static_cast<const ReshapeImpl&>(impl()).target_;
}

}  // namespace mixprec::layers
