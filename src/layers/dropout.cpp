// Dropout (inverted): in training, y = x * m with m = 1/(1 - rate) (rounded to x's dtype) for kept
// elements and 0 for dropped ones; identity otherwise.
//
// The mask is counter-based (core/counter_hash.h): one call draws one 64-bit key from the layer's
// generator (a host integer: no device work, no sync), and element i (row-major) is kept when
// counter_keeps(key, i, ceil(rate * 2^53)), which is "a uniform double >= rate" in integers. Any
// element is decided alone, so the backends fill in parallel (ops/dropout.h: the op; the CPU's
// OpenMP loop, the CUDA kernel), and the mask is the same for a seed on every device and thread
// count, bit for bit. It is never stored: the backward multiplies the output gradient by the same
// mask, regenerated from the key. Under a CUDA graph capture by fit() the key is recorded and read
// from device memory by the kernels, so every replay uses its own step's draw.
#include "mixprec/layers/dropout.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/counter_hash.h"
#include "core/replay_parameters.h"
#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "mixprec/random.h"
#include "ops/dropout.h"

namespace mixprec::layers {

namespace {

class DropoutImpl final : public LayerImpl {
 public:
  nlohmann::json get_config() const override {
    nlohmann::json c = base_config();
    c["rate"] = rate_;
    c["seed"] = seed_ ? nlohmann::json(*seed_) : nlohmann::json(nullptr);
    return c;
  }
  DropoutImpl(double rate, const DropoutOptions& o)
      : LayerImpl("Dropout", {o.dtype, o.name, o.trainable}), rate_(rate) {
    if (!(rate >= 0.0 && rate < 1.0)) {
      throw ValueError(name() + ": Dropout rate must be in [0, 1), got " + std::to_string(rate) +
                       " (it is the fraction of inputs dropped)");
    }
    seed_ = o.seed;
    if (o.seed) generator_.emplace(*o.seed);
  }

  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const override {
    return shapes;
  }

  std::vector<Tensor> call(const std::vector<Tensor>& inputs, const CallOptions& options) override {
    const Tensor& x = inputs[0];
    if (!options.training || rate_ == 0.0) return {x};
    if (!is_floating(x.dtype())) {
      throw DTypeError(name() + ": Dropout needs a floating input in training, got " +
                       std::string(dtype_name(x.dtype())));
    }
    // One draw of the layer's generator per call, as before the mask became counter-based.
    Generator& gen = generator_ ? *generator_ : default_generator();
    // A step captured for CUDA graph replays records the draw: the kernels (forward and backward)
    // read the key from the replay buffer, and each replay draws its own step's key from this
    // generator first (core::ReplayParameters).
    core::ReplayParameters* replay = core::ReplayParameters::active();
    if (replay != nullptr && !(replay->device() == x.device())) replay = nullptr;
    const ops::DropoutMask mask{.base = replay != nullptr ? replay->draw(gen) : gen.next_u64(),
                                .threshold = core::keep_threshold(rate_),
                                .keep_scale = 1.0 / (1.0 - rate_)};
    return {ops::dropout(x, mask)};
  }

  Generator* own_generator() override { return generator_ ? &*generator_ : nullptr; }

  double rate_;
  std::optional<std::uint64_t> seed_;  // as constructed, for get_config()
  std::optional<Generator> generator_;
};

}  // namespace

Dropout::Dropout(double rate, DropoutOptions options)
    : Layer(std::make_shared<DropoutImpl>(rate, options)) {}

double Dropout::rate() const { return static_cast<const DropoutImpl&>(impl()).rate_; }

}  // namespace mixprec::layers
