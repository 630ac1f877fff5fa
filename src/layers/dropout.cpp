// Dropout (inverted): in training, y = x * m with m = 1/(1 - rate) where a uniform draw u >= rate
// and 0 elsewhere; identity otherwise. The mask is made directly in the compute dtype, one draw per
// element, so a seeded layer repeats its masks exactly.
#include "mixprec/layers/dropout.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "mixprec/random.h"

namespace mixprec::layers {

namespace {

class DropoutImpl final : public LayerImpl {
 public:
  DropoutImpl(double rate, const DropoutOptions& o)
      : LayerImpl("Dropout", {o.dtype, o.name, o.trainable}), rate_(rate) {
    if (!(rate >= 0.0 && rate < 1.0)) {
      throw ValueError(name() + ": Dropout rate must be in [0, 1), got " + std::to_string(rate) +
                       " (it is the fraction of inputs dropped)");
    }
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
    // Drawn on the CPU (the same mask on every device for a seed), then moved to x's device.
    return {x * mask(x.shape(), x.dtype()).to(x.device())};
  }

  // The mask is drawn in fixed chunks of kChunk elements, chunk c from its own generator seeded
  // with (one draw from the layer's generator) + c: the chunks fill in parallel and the mask does
  // not depend on the number of threads. One call consumes one draw of the layer's generator.
  Tensor mask(const Shape& shape, DType dtype) {
    constexpr std::int64_t kChunk = 1 << 16;
    Generator& gen = generator_ ? *generator_ : default_generator();
    const std::uint64_t base = gen.next_u64();
    const double keep_scale = 1.0 / (1.0 - rate_);
    const double rate = rate_;
    Tensor m = core::make_tensor(shape, dtype, Device::cpu());
    core::dispatch_floating(dtype, "dropout", [&]<typename T>() {
      const T keep = core::from_double<T>(keep_scale);
      const T drop = core::from_double<T>(0.0);
      T* out = static_cast<T*>(m.data_ptr());
      const std::int64_t n = shape.numel();
      const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
      for (std::int64_t c = 0; c < chunks; ++c) {
        Generator chunk_gen(base + static_cast<std::uint64_t>(c));  // splitmix64-seeded
        const std::int64_t end = std::min(n, (c + 1) * kChunk);
        for (std::int64_t i = c * kChunk; i < end; ++i) {
          out[i] = chunk_gen.uniform() >= rate ? keep : drop;
        }
      }
    });
    return m;
  }

  double rate_;
  std::optional<Generator> generator_;
};

}  // namespace

Dropout::Dropout(double rate, DropoutOptions options)
    : Layer(std::make_shared<DropoutImpl>(rate, options)) {}

double Dropout::rate() const { return static_cast<const DropoutImpl&>(impl()).rate_; }

}  // namespace mixprec::layers
