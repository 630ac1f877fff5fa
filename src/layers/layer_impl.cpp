// LayerImpl: policy, names, variables, and the checked call paths shared by every layer.
#include <string>
#include <unordered_set>

#include "layers/naming.h"
#include "layers/variable_names.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/layers/layer.h"
#include "mixprec/mixed_precision/device_compatibility.h"

namespace mixprec::layers {

LayerImpl::LayerImpl(std::string class_name, const LayerOptions& options)
    : class_name_(std::move(class_name)),
      policy_(options.dtype ? *options.dtype : mixed_precision::global_policy()),
      trainable_(options.trainable) {
  if (options.dtype) mixed_precision::check_policy_compatibility(*options.dtype);
  if (options.name.empty()) {
    name_ = detail::unique_name(detail::snake_case(class_name_));
  } else {
    if (options.name.find('/') != std::string::npos) {
      throw ValueError(class_name_ + ": layer name '" + options.name +
                       "' contains '/', which separates layer and variable names; pick another");
    }
    name_ = options.name;
    detail::reserve_name(name_);
  }
}

LayerImpl::~LayerImpl() = default;

DType LayerImpl::accumulation_dtype() const {
  const DType compute = compute_dtype();
  if (compute == DType::float64) return DType::float64;
  if (is_16bit_float(compute) && uses_matmul() &&
      !mixed_precision::fp16_matmul_use_fp32_compute()) {
    return compute;
  }
  return DType::float32;
}

void LayerImpl::set_trainable(bool trainable) {
  trainable_ = trainable;
  for (Weight& w : weights_) {
    if (w.trainable) w.value.set_requires_grad(trainable);
  }
}

std::vector<NamedVariable> LayerImpl::named_variables() const {
  std::vector<NamedVariable> out;
  out.reserve(weights_.size());
  for (const Weight& w : weights_) out.push_back({w.name, w.value, w.trainable && trainable_});
  return out;
}

std::int64_t LayerImpl::count_params() const {
  std::int64_t n = 0;
  for (const NamedVariable& v : named_variables()) n += v.value.numel();
  return n;
}

void LayerImpl::validate_input_count(std::size_t count) const {
  if (count != 1) {
    throw ValueError(name_ + ": " + class_name_ + " takes exactly one input, got " +
                     std::to_string(count));
  }
}

void LayerImpl::validate(const std::vector<PartialShape>&) const {}
void LayerImpl::build(const std::vector<PartialShape>&) {}

void LayerImpl::build_from_specs(const std::vector<TensorSpec>& inputs) {
  std::vector<PartialShape> shapes;
  shapes.reserve(inputs.size());
  for (const TensorSpec& s : inputs) shapes.push_back(s.shape);
  build(shapes);
}

std::vector<TensorSpec> LayerImpl::compute_output_spec(
    const std::vector<TensorSpec>& inputs) const {
  std::vector<PartialShape> shapes;
  shapes.reserve(inputs.size());
  for (const TensorSpec& s : inputs) shapes.push_back(s.shape);
  std::vector<TensorSpec> out;
  for (PartialShape& s : compute_output_shape(shapes)) {
    out.push_back({std::move(s), inputs.empty() ? compute_dtype() : inputs[0].dtype});
  }
  return out;
}

DType LayerImpl::autocast_dtype(DType dtype) const {
  return autocasts() && is_floating(dtype) ? compute_dtype() : dtype;
}

std::vector<Tensor> LayerImpl::call_eager(const std::vector<Tensor>& inputs,
                                          const CallOptions& options) {
  validate_input_count(inputs.size());
  std::vector<Tensor> cast;
  std::vector<TensorSpec> specs;
  cast.reserve(inputs.size());
  specs.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      throw ValueError(name_ + ": input " + std::to_string(i) + " is an undefined tensor");
    }
    // DESIGN §2.3: every floating input, not only the first, goes to the compute dtype (a
    // differentiable cast: the gradient returns in the caller's dtype).
    cast.push_back(inputs[i].to(autocast_dtype(inputs[i].dtype())));
    specs.push_back({to_partial_shape(inputs[i].shape()), cast.back().dtype()});
  }
  std::vector<PartialShape> shapes;
  for (const TensorSpec& s : specs) shapes.push_back(s.shape);
  validate(shapes);
  if (!built_) {
    // The batch extent is not part of what a layer is built for.
    for (TensorSpec& s : specs) {
      if (!s.shape.empty()) s.shape[0] = -1;
    }
    build_from_specs(specs);
    built_ = true;
  }
  return call(cast, options);
}

std::vector<TensorSpec> LayerImpl::call_spec(const std::vector<TensorSpec>& inputs) {
  validate_input_count(inputs.size());
  std::vector<TensorSpec> specs = inputs;
  std::vector<PartialShape> shapes;
  for (TensorSpec& s : specs) {
    s.dtype = autocast_dtype(s.dtype);
    shapes.push_back(s.shape);
  }
  validate(shapes);
  if (!built_) {
    build_from_specs(specs);
    built_ = true;
  }
  return compute_output_spec(specs);
}

Tensor LayerImpl::add_weight(const std::string& name, const Shape& shape,
                             const initializers::Initializer& initializer, Trainable trainable,
                             std::optional<DType> dtype) {
  const std::string full = name_ + "/" + name;
  for (const Weight& w : weights_) {
    if (w.name == full)
      throw ValueError(name_ + ": a variable named '" + full + "' exists already");
  }
  if (dtype && !is_floating(*dtype)) {
    throw DTypeError(name_ + ": variable '" + full + "' must have a floating dtype, got " +
                     std::string(dtype_name(*dtype)));
  }
  const DType want = dtype.value_or(variable_dtype());
  Tensor value;
  {
    NoGradScope no_grad;
    value = initializer(shape, want);
  }
  if (value.shape() != shape || value.dtype() != want) {
    throw ValueError(name_ + ": initializer '" + initializer.name() + "' returned " +
                     std::string(dtype_name(value.dtype())) + " " + value.shape().to_string() +
                     " for variable '" + full + "', expected " + std::string(dtype_name(want)) +
                     " " + shape.to_string());
  }
  const bool is_trainable = trainable == Trainable::yes;
  if (is_floating(value.dtype())) value.set_requires_grad(is_trainable && trainable_);
  detail::register_variable_name(value, full);  // for the optimizers' exclude_from_weight_decay
  weights_.push_back({full, value, is_trainable});
  return value;
}

}  // namespace mixprec::layers
