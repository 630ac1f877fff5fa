// Dropout (inverted): in training, y = x * m with m = 1/(1 - rate) (rounded to x's dtype) for kept
// elements and 0 for dropped ones; identity otherwise.
//
// The mask is counter-based (core/counter_hash.h): one call draws one 64-bit key from the layer's
// generator (a host integer: no device work, no sync), and element i (row-major) is kept when
// counter_keeps(key, i, ceil(rate * 2^53)), which is "a uniform double >= rate" in integers. Any
// element is decided alone, so the CPU fills in parallel (OpenMP), CUDA in a kernel
// (cuda/kernels/dropout.cu), and the mask is the same for a seed on every device and thread count,
// bit for bit. It is never stored: the backward multiplies the output gradient by the same mask,
// regenerated from the key.
#include "mixprec/layers/dropout.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "autograd/node.h"
#include "backend/cuda/dropout.h"
#include "core/counter_hash.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "layers/layer_config.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "mixprec/random.h"

namespace mixprec::layers {

namespace {

// What one call's mask depends on: the key drawn from the generator, the threshold of the rate and
// the keep scale 1 / (1 - rate) (in double; rounded to the dtype of what it multiplies).
struct MaskKey {
  std::uint64_t base = 0;
  std::uint64_t threshold = 0;
  double keep_scale = 1.0;
};

// Elements below which the CPU loop stays on one thread (thread start-up costs more than the
// ~10 integer operations per element of the hash).
constexpr std::int64_t kParallelElements = 1 << 15;

Tensor masked_multiply(const Tensor& x, const MaskKey& key);

// dx = dy * m: the same mask, regenerated from the key (nothing saved but 24 bytes).
struct DropoutBackward final : autograd::Node {
  MaskKey key;
  std::vector<Tensor> backward(const Tensor& g) override { return {masked_multiply(g, key)}; }
  std::string name() const override { return "DropoutBackward"; }
};

// x * m in x's dtype, element by element as the binary x * mask would compute it: float(x) *
// float(m) (double for float64), rounded once. A dropped element is x * 0, not 0, so NaN and Inf
// stay visible (an overflowed gradient must still reach loss scaling's check).
Tensor masked_multiply(const Tensor& x, const MaskKey& key) {
  Tensor out;
  if (x.device().is_cuda()) {
    double keep = 0.0;
    core::dispatch_floating(x.dtype(), "dropout", [&]<typename T>() {
      keep = core::to_double(core::from_double<T>(key.keep_scale));
    });
    out = cuda::dropout_apply(x, key.base, key.threshold, keep);
  } else {
    const Tensor src = x.detach().contiguous();
    out = core::make_tensor(x.shape(), x.dtype(), x.device());
    core::dispatch_floating(x.dtype(), "dropout", [&]<typename T>() {
      using C = core::compute_t<T>;
      const C keep = core::load_as<C>(core::from_double<T>(key.keep_scale));
      const T* in = static_cast<const T*>(src.data_ptr());
      T* o = static_cast<T*>(out.data_ptr());
      const std::int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (std::int64_t i = 0; i < n; ++i) {
        const C m = core::counter_keeps(key.base, static_cast<std::uint64_t>(i), key.threshold)
                        ? keep
                        : C(0);
        o[i] = core::store_as<T>(core::load_as<C>(in[i]) * m);
      }
    });
  }
  if (!autograd::needs_record({&x})) return out;
  auto node = std::make_shared<DropoutBackward>();
  node->key = key;
  return autograd::record(out, node, {x});
}

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
    const MaskKey key{.base = gen.next_u64(),
                      .threshold = core::keep_threshold(rate_),
                      .keep_scale = 1.0 / (1.0 - rate_)};
    return {masked_multiply(x, key)};
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
