// Weight initializers (Keras names and defaults). Every sample is drawn in float64 in row-major
// order and rounded once to the target dtype.
#include "mixprec/initializers.h"

#include <cmath>
#include <string>

#include "core/tensor_impl.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"

namespace mixprec::initializers {

namespace {

// The standard deviation of a unit normal truncated to [-2, 2]; dividing by it gives the truncated
// samples the variance the formula intends (as Keras' VarianceScaling does).
constexpr double kTruncatedStddev = 0.87962566103423978;

Tensor truncated_normal(const Shape& shape, double stddev, DType dtype, Generator& gen) {
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  const double scale = stddev / kTruncatedStddev;
  for (double& v : values) {
    double z = gen.normal();
    while (std::abs(z) > 2.0) z = gen.normal();  // redraw outside two standard deviations
    v = z * scale;
  }
  return from_vector(values, shape, {.dtype = dtype});
}

Initializer uniform_with_limit(std::string name, double numerator, bool use_fan_out) {
  return Initializer(std::move(name),
                     [numerator, use_fan_out](const Shape& shape, DType dtype, Generator& gen) {
                       const Fans f = compute_fans(shape);
                       const double limit =
                           std::sqrt(numerator / (use_fan_out ? f.fan_in + f.fan_out : f.fan_in));
                       return random_uniform(shape, -limit, limit, {.dtype = dtype}, gen);
                     })
      .with_config({});
}

Initializer truncated_with_variance(std::string name, double numerator, bool use_fan_out) {
  return Initializer(std::move(name),
                     [numerator, use_fan_out](const Shape& shape, DType dtype, Generator& gen) {
                       const Fans f = compute_fans(shape);
                       const double stddev =
                           std::sqrt(numerator / (use_fan_out ? f.fan_in + f.fan_out : f.fan_in));
                       return truncated_normal(shape, stddev, dtype, gen);
                     })
      .with_config({});
}

constexpr bool kFanInOut = true;
constexpr bool kFanIn = false;

Initializer by_name(std::string_view name) {
  if (name == "glorot_uniform") return glorot_uniform();
  if (name == "glorot_normal") return glorot_normal();
  if (name == "he_normal") return he_normal();
  if (name == "he_uniform") return he_uniform();
  if (name == "lecun_normal") return lecun_normal();
  if (name == "lecun_uniform") return lecun_uniform();
  if (name == "zeros") return zeros();
  if (name == "ones") return ones();
  if (name == "random_normal") return random_normal();
  if (name == "random_uniform") return random_uniform();
  std::string names;
  for (const std::string& n : Initializer::valid_names()) names += (names.empty() ? "" : ", ") + n;
  throw ValueError("unknown initializer '" + std::string(name) + "'; valid names are: " + names);
}

}  // namespace

Initializer::Initializer(std::string_view name) : Initializer(by_name(name)) {}

Initializer::Initializer(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {
  if (!fn_) throw ValueError("Initializer '" + name_ + "': the function is empty");
}

Initializer Initializer::with_config(std::map<std::string, double> config) && {
  config_ = std::move(config);
  return std::move(*this);
}

std::vector<std::string> Initializer::valid_names() {
  return {"glorot_uniform", "glorot_normal", "he_normal", "he_uniform",    "lecun_normal",
          "lecun_uniform",  "zeros",         "ones",      "random_normal", "random_uniform"};
}

Tensor Initializer::operator()(const Shape& shape, DType dtype) const {
  return (*this)(shape, dtype, default_generator());
}

Tensor Initializer::operator()(const Shape& shape, DType dtype, Generator& gen) const {
  if (!is_floating(dtype)) {
    throw DTypeError("initializer '" + name_ + "': variables must be floating, got " +
                     std::string(dtype_name(dtype)));
  }
  for (auto d : shape) {
    if (d < 0)
      throw ShapeError("initializer '" + name_ + "': negative extent in " + shape.to_string());
  }
  if (shape.numel() == 0) return mixprec::zeros(shape, {.dtype = dtype});  // fans may be 0
  Tensor t = fn_(shape, dtype, gen);
  if (!t.defined() || t.shape() != shape) {
    throw ShapeError("initializer '" + name_ + "' returned shape " +
                     (t.defined() ? t.shape().to_string() : std::string("(undefined)")) +
                     ", expected " + shape.to_string());
  }
  // The result becomes a variable, so it must be a fresh leaf of its own storage. The built-in
  // initializers return one; a custom function may return a view, a graph output or a tensor it
  // keeps, which are copied.
  const bool fresh = t.dtype() == dtype && t.is_leaf() && !t.requires_grad() && t.offset() == 0 &&
                     t.is_contiguous() && t.impl_ptr().use_count() == 1 &&
                     t.impl()->storage.use_count() == 1;
  if (fresh) return t;
  const Tensor src = t.detach().to(dtype).contiguous();
  return from_data(src.data_ptr(), dtype, shape);
}

Fans compute_fans(const Shape& shape) {
  const int r = shape.rank();
  if (r == 0) return {1, 1};
  if (r == 1) return {static_cast<double>(shape[0]), static_cast<double>(shape[0])};
  double receptive = 1;
  for (int i = 0; i < r - 2; ++i) receptive *= static_cast<double>(shape[i]);
  return {static_cast<double>(shape[r - 2]) * receptive,
          static_cast<double>(shape[r - 1]) * receptive};
}

Initializer glorot_uniform() { return uniform_with_limit("glorot_uniform", 6.0, kFanInOut); }
Initializer glorot_normal() { return truncated_with_variance("glorot_normal", 2.0, kFanInOut); }
Initializer he_normal() { return truncated_with_variance("he_normal", 2.0, kFanIn); }
Initializer he_uniform() { return uniform_with_limit("he_uniform", 6.0, kFanIn); }
Initializer lecun_normal() { return truncated_with_variance("lecun_normal", 1.0, kFanIn); }
Initializer lecun_uniform() { return uniform_with_limit("lecun_uniform", 3.0, kFanIn); }

Initializer zeros() {
  return Initializer("zeros", [](const Shape& s, DType d,
                                 Generator&) { return mixprec::zeros(s, {.dtype = d}); })
      .with_config({});
}

Initializer ones() {
  return Initializer("ones", [](const Shape& s, DType d,
                                Generator&) { return mixprec::ones(s, {.dtype = d}); })
      .with_config({});
}

Initializer constant(double value) {
  return Initializer("constant", [value](const Shape& s, DType d,
                                         Generator&) { return full(s, value, {.dtype = d}); })
      .with_config({{"value", value}});
}

Initializer random_normal(double mean, double stddev) {
  if (!(stddev >= 0))
    throw ValueError("random_normal: stddev must be >= 0, got " + std::to_string(stddev));
  return Initializer("random_normal",
                     [mean, stddev](const Shape& s, DType d, Generator& gen) {
                       return mixprec::random_normal(s, mean, stddev, {.dtype = d}, gen);
                     })
      .with_config({{"mean", mean}, {"stddev", stddev}});
}

Initializer random_uniform(double minval, double maxval) {
  if (!(minval <= maxval)) {
    throw ValueError("random_uniform: minval must be <= maxval, got " + std::to_string(minval) +
                     " and " + std::to_string(maxval));
  }
  return Initializer("random_uniform",
                     [minval, maxval](const Shape& s, DType d, Generator& gen) {
                       return mixprec::random_uniform(s, minval, maxval, {.dtype = d}, gen);
                     })
      .with_config({{"minval", minval}, {"maxval", maxval}});
}

}  // namespace mixprec::initializers
