// The Layer handle: forwards to LayerImpl, and the symbolic call that records a graph node.
#include "mixprec/layers/layer.h"

#include <cstring>
#include <string>

#include "layers/graph.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"

namespace mixprec::layers {

Layer::Layer(std::shared_ptr<LayerImpl> impl) : impl_(std::move(impl)) {}

LayerImpl& Layer::impl() const {
  if (!impl_) {
    throw ValueError(
        "Layer: this layer handle is undefined (default-constructed); assign a layer to it first");
  }
  return *impl_;
}

const std::string& Layer::name() const { return impl().name(); }
const std::string& Layer::class_name() const { return impl().class_name(); }
const mixed_precision::Policy& Layer::dtype_policy() const { return impl().dtype_policy(); }
DType Layer::compute_dtype() const { return impl().compute_dtype(); }
DType Layer::variable_dtype() const { return impl().variable_dtype(); }
DType Layer::accumulation_dtype() const { return impl().accumulation_dtype(); }
bool Layer::built() const { return impl().built(); }
bool Layer::trainable() const { return impl().trainable(); }
void Layer::set_trainable(bool trainable) const { impl().set_trainable(trainable); }
std::vector<NamedVariable> Layer::named_variables() const { return impl().named_variables(); }
std::int64_t Layer::count_params() const { return impl().count_params(); }

std::vector<Tensor> Layer::variables() const {
  std::vector<Tensor> out;
  for (const NamedVariable& v : named_variables()) out.push_back(v.value);
  return out;
}

std::vector<Tensor> Layer::trainable_variables() const {
  std::vector<Tensor> out;
  for (const NamedVariable& v : named_variables()) {
    if (v.trainable) out.push_back(v.value);
  }
  return out;
}

std::vector<Tensor> Layer::non_trainable_variables() const {
  std::vector<Tensor> out;
  for (const NamedVariable& v : named_variables()) {
    if (!v.trainable) out.push_back(v.value);
  }
  return out;
}

namespace {
// A fresh contiguous copy with no autograd history.
Tensor deep_copy(const Tensor& t) {
  const Tensor src = t.detach().contiguous();
  return from_data(src.data_ptr(), src.dtype(), src.shape());
}
}  // namespace

std::vector<Tensor> Layer::get_weights() const {
  std::vector<Tensor> out;
  for (const NamedVariable& v : named_variables()) out.push_back(deep_copy(v.value));
  return out;
}

void Layer::set_weights(const std::vector<Tensor>& weights) const {
  const std::vector<NamedVariable> vars = named_variables();
  if (weights.size() != vars.size()) {
    std::string names;
    for (const NamedVariable& v : vars) names += (names.empty() ? "" : ", ") + v.name;
    throw ValueError(name() + ": set_weights expected " + std::to_string(vars.size()) +
                     " weights (" + (names.empty() ? "none" : names) + "), got " +
                     std::to_string(weights.size()) + "; pass the list get_weights() returns");
  }
  // Check everything before writing anything.
  for (std::size_t i = 0; i < vars.size(); ++i) {
    if (!weights[i].defined()) {
      throw ValueError(name() + ": set_weights: weight " + std::to_string(i) + " (for '" +
                       vars[i].name + "') is undefined");
    }
    if (weights[i].shape() != vars[i].value.shape()) {
      throw ShapeError(name() + ": set_weights: variable '" + vars[i].name + "' has shape " +
                       partial_shape_to_string(vars[i].value.shape().dims()) + ", got weight " +
                       std::to_string(i) + " of shape " +
                       partial_shape_to_string(weights[i].shape().dims()));
    }
  }
  NoGradScope no_grad;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    // Written in place, so that optimizers and other handles keep seeing the same variable.
    vars[i].value.assign(weights[i]);
  }
}

Tensor Layer::operator()(const Tensor& x, CallOptions options) const {
  std::vector<Tensor> out = impl().call_eager({x}, options);
  if (out.size() != 1) {
    throw ValueError(name() + ": this " + class_name() + " has " + std::to_string(out.size()) +
                     " outputs; call it with a vector of tensors to get them all");
  }
  return out[0];
}

std::vector<Tensor> Layer::operator()(const std::vector<Tensor>& xs, CallOptions options) const {
  return impl().call_eager(xs, options);
}

std::vector<KerasTensor> Layer::call_symbolic(const std::vector<KerasTensor>& xs) const {
  std::vector<TensorSpec> specs;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].defined()) {
      throw ValueError(name() + ": symbolic input " + std::to_string(i) +
                       " is an undefined KerasTensor; create inputs with mp::Input(...)");
    }
    specs.push_back(xs[i].spec());
  }
  const std::vector<TensorSpec> outputs = impl().call_spec(specs);
  return detail::record_call(*this, xs, outputs);
}

KerasTensor Layer::operator()(const KerasTensor& x) const { return (*this)(std::vector{x}); }

KerasTensor Layer::operator()(const std::vector<KerasTensor>& xs) const {
  std::vector<KerasTensor> out = call_symbolic(xs);
  if (out.size() != 1) {
    throw ValueError(name() + ": this " + class_name() + " has " + std::to_string(out.size()) +
                     " outputs; use call_symbolic() to get them all");
  }
  return out[0];
}

}  // namespace mixprec::layers
