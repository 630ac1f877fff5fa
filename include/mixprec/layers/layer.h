// The layer base: a Layer is a handle (copying it shares the same layer, like a Python reference),
// so `mp::layers::Dense(10)(x)` stays alive inside the model graph that x leads to. The state and
// behaviour live in a LayerImpl, which is also the extension point for new layers.
//
// What every layer does (DESIGN §2.2, §2.3):
//  - policy: the global policy at construction unless the `dtype` option names another;
//  - autocasting: every floating input is cast to the compute dtype before call(); integer inputs
//    never are; the output dtype is the compute dtype;
//  - variables are leaf tensors in the variable dtype (float32 under mixed_* policies) with
//    requires_grad, named "<layer>/<weight>", read in the compute dtype inside call() through a
//    differentiable cast, so their gradients arrive in the variable dtype;
//  - the first call (on real tensors or on KerasTensors) builds the layer: it creates the variables
//    from the known feature sizes; later calls are checked against them (ShapeError naming the
//    layer and both shapes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/initializers.h"
#include "mixprec/layers/keras_tensor.h"
#include "mixprec/mixed_precision/policy.h"
#include "mixprec/random.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// Options of a call on real tensors: `model(x, {.training = true})`.
struct CallOptions {
  bool training = false;  // Dropout drops (and BatchNormalization uses batch statistics) only then
};

// Forgets the automatic layer names handed out so far, so that the next Dense is "dense" again
// (like keras.backend.clear_session(); existing layers keep their names).
void clear_session();

namespace layers {

// Options every layer takes; layer-specific option structs end with these same three fields.
struct LayerOptions {
  std::optional<mixed_precision::Policy> dtype;  // default: the global policy at construction
  std::string name;                              // default: a unique snake_case class name
  bool trainable = true;
};

enum class Trainable { no, yes };

// A variable with its name. `value` is the variable itself (not a copy).
struct NamedVariable {
  std::string name;  // "<layer>/<weight>", e.g. "dense_1/kernel"
  Tensor value;
  bool trainable = true;  // counts toward trainable_variables() (false when the layer is frozen)
};

// Base of every layer's state and behaviour. To write a layer: derive, implement
// compute_output_shape() and call(), create variables in build() with add_weight(), read them with
// read(); wrap it in a handle with Layer(std::make_shared<MyImpl>(...)).
class LayerImpl {
 public:
  // `class_name` is the Keras-style type ("Dense"); the automatic name is its snake_case form.
  LayerImpl(std::string class_name, const LayerOptions& options);
  virtual ~LayerImpl();
  LayerImpl(const LayerImpl&) = delete;
  LayerImpl& operator=(const LayerImpl&) = delete;

  const std::string& name() const { return name_; }
  const std::string& class_name() const { return class_name_; }
  const mixed_precision::Policy& dtype_policy() const { return policy_; }
  DType compute_dtype() const { return policy_.compute_dtype(); }
  DType variable_dtype() const { return policy_.variable_dtype(); }
  // The dtype matmul/convolution partial sums are kept in (DESIGN §2.4): float64 for float64
  // compute; for a 16-bit compute dtype, float32 unless the layer does a matmul and
  // mixed_precision::fp16_matmul_use_fp32_compute() is off (then the compute dtype itself);
  // float32 otherwise. Read at call time, so the switch applies to existing layers.
  virtual DType accumulation_dtype() const;
  bool built() const { return built_; }
  bool trainable() const { return trainable_; }
  // Freezing a layer takes its variables out of trainable_variables() and stops gradients from
  // being computed for them (requires_grad follows the flag).
  virtual void set_trainable(bool trainable);

  // The layer's variables in creation order, each with its name and trainable flag.
  virtual std::vector<NamedVariable> named_variables() const;
  std::int64_t count_params() const;

  // ---- checked entry points (what the Layer handle's operator() calls) ----
  // Autocasts, validates the shapes, builds on first use, then call().
  std::vector<Tensor> call_eager(const std::vector<Tensor>& inputs, const CallOptions& options);
  // Autocasts the specs, validates, builds on first use, and returns the output specs.
  std::vector<TensorSpec> call_spec(const std::vector<TensorSpec>& inputs);

  // ---- hooks ----
  // Throws ValueError when the layer cannot take `count` inputs (default: exactly one).
  virtual void validate_input_count(std::size_t count) const;
  // Called on every call, before build(), with the input shapes after autocasting (-1 where
  // unknown). Throws ShapeError naming the layer and the shapes when they do not fit, including
  // against what build() fixed (a Dense kernel's input size).
  virtual void validate(const std::vector<PartialShape>& shapes) const;
  // Creates the variables; called once, on the first call, after validate(). The batch extent
  // is -1 (a layer is built for any batch size).
  virtual void build(const std::vector<PartialShape>& shapes);
  // What the call paths invoke to build: build() on the shapes by default; for layers that also
  // need the input dtypes (a Sequential built on its first call).
  virtual void build_from_specs(const std::vector<TensorSpec>& inputs);
  virtual std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& shapes) const = 0;
  // Output specs; by default compute_output_shape() with the first input's dtype (already
  // autocast, so the compute dtype for a floating input).
  virtual std::vector<TensorSpec> compute_output_spec(const std::vector<TensorSpec>& inputs) const;
  // The computation, on inputs already autocast and validated, with the layer built.
  virtual std::vector<Tensor> call(const std::vector<Tensor>& inputs,
                                   const CallOptions& options) = 0;
  // Whether floating inputs are cast to the compute dtype (every layer but InputLayer and Model,
  // whose inner layers cast for themselves).
  virtual bool autocasts() const { return true; }
  // Whether the main computation is a matmul or convolution (see accumulation_dtype()).
  virtual bool uses_matmul() const { return false; }
  // A generator the layer owns and draws from while training (a seeded Dropout), or null when it
  // draws from default_generator() or not at all; checkpoints save and restore its state.
  virtual Generator* own_generator() { return nullptr; }
  // Keras get_config(): every option the layer was constructed with, as a JSON object that starts
  // with base_config() ("name", "trainable", "dtype") and adds the class's own options under their
  // Keras names ("units", "activation", "kernel_initializer", ...); with class_name() it is enough
  // to build an equal layer (mixprec::model_from_json, include/mixprec/models/model_config.h).
  // The base throws ValueError: a custom layer class that does not override it cannot be saved.
  virtual nlohmann::json get_config() const;

 protected:
  // Creates a variable "<layer>/<name>" in the variable dtype (or `dtype` when given: Keras'
  // add_weight(dtype=...), e.g. BatchNormalization's float32 parameters under a float16 policy),
  // drawn from `initializer` (from mixprec::default_generator(), so set_seed() before building
  // makes weights repeatable).
  Tensor add_weight(const std::string& name, const Shape& shape,
                    const initializers::Initializer& initializer,
                    Trainable trainable = Trainable::yes,
                    std::optional<DType> dtype = std::nullopt);
  // A variable as the computation uses it: cast to the compute dtype (differentiable; the
  // gradient is cast back, so it reaches the variable in the variable dtype).
  Tensor read(const Tensor& variable) const { return variable.to(compute_dtype()); }
  // {"name": ..., "trainable": ..., "dtype": <the policy's name>}.
  nlohmann::json base_config() const;
  // For layers whose policy is not a user choice (InputLayer: its dtype).
  void set_policy(const mixed_precision::Policy& policy) { policy_ = policy; }
  // For layers built outside a call (a functional Model is built by its constructor).
  void set_built(bool built) { built_ = built; }
  // The dtype an input of `dtype` is autocast to: the compute dtype for a floating input of an
  // autocasting layer, else `dtype` itself.
  DType autocast_dtype(DType dtype) const;

 private:
  struct Weight {
    std::string name;
    Tensor value;
    bool trainable;
  };
  std::string class_name_;
  std::string name_;
  mixed_precision::Policy policy_;
  bool trainable_ = true;
  bool built_ = false;
  std::vector<Weight> weights_;
};

// The handle. Every layer class (Dense, Activation, ..., Model) is a Layer; copies share state.
class Layer {
 public:
  Layer() = default;  // undefined; defined() is false
  explicit Layer(std::shared_ptr<LayerImpl> impl);

  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const;
  const std::string& class_name() const;
  const mixed_precision::Policy& dtype_policy() const;
  DType compute_dtype() const;
  DType variable_dtype() const;
  DType accumulation_dtype() const;
  bool built() const;
  bool trainable() const;
  void set_trainable(bool trainable) const;

  // The variables themselves (shared, not copies), in creation order.
  std::vector<Tensor> variables() const;
  std::vector<Tensor> trainable_variables() const;
  std::vector<Tensor> non_trainable_variables() const;
  std::vector<NamedVariable> named_variables() const;
  std::int64_t count_params() const;
  // Deep copies of variables(), in the same order.
  std::vector<Tensor> get_weights() const;
  // Copies `weights` (in get_weights() order) into the variables, converting the dtype. Checks the
  // count and every shape first; on an error nothing is written.
  void set_weights(const std::vector<Tensor>& weights) const;

  // Eager call on real tensors: autocast, build on first use, compute. The single-tensor form
  // needs a layer with one input and one output.
  Tensor operator()(const Tensor& x, CallOptions options = {}) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& xs, CallOptions options = {}) const;
  // Symbolic call (functional API): builds the layer and records the call. The vector form is for
  // layers with several inputs (Add, Concatenate, a multi-input Model) and one output.
  KerasTensor operator()(const KerasTensor& x) const;
  KerasTensor operator()(const std::vector<KerasTensor>& xs) const;
  // Symbolic call returning every output (a Model with several outputs).
  std::vector<KerasTensor> call_symbolic(const std::vector<KerasTensor>& xs) const;

  bool same(const Layer& other) const { return impl_ == other.impl_; }
  LayerImpl& impl() const;
  const std::shared_ptr<LayerImpl>& impl_ptr() const { return impl_; }

 protected:
  std::shared_ptr<LayerImpl> impl_;
};

}  // namespace layers
}  // namespace mixprec

#pragma GCC visibility pop
