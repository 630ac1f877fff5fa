// Weight initializers, Keras names and defaults. An Initializer converts implicitly from its name,
// so layer options read `{.kernel_initializer = "he_normal"}`; an unknown name throws ValueError
// listing the valid ones. Samples are drawn in float64 (from mixprec::default_generator() unless a
// generator is passed) in row-major order and rounded once to the requested dtype, so
// mixprec::set_seed(s) before building a model makes its initial weights repeatable.
//
// Fans follow Keras: rank 2 (in, out): fan_in = in, fan_out = out; rank > 2 (convolution kernels
// (..., in, out)): both multiplied by the receptive field size (product of the leading extents);
// rank 1: fan_in = fan_out = extent; rank 0: 1.
//
// The *_normal variance-scaling initializers (glorot_normal, he_normal, lecun_normal) draw from a
// normal truncated at two standard deviations (values outside are redrawn), with the standard
// deviation divided by 0.87962566103423978 (the stddev of a unit normal truncated at +-2) so that
// the samples have the intended variance — as Keras does.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/random.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::initializers {

class Initializer {
 public:
  using Fn = std::function<Tensor(const Shape& shape, DType dtype, Generator& gen)>;

  // By name: "glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal",
  // "lecun_uniform", "zeros", "ones", "random_normal", "random_uniform" (Keras defaults).
  Initializer(std::string_view name);                                     // NOLINT: implicit
  Initializer(const char* name) : Initializer(std::string_view(name)) {}  // NOLINT: implicit
  // A custom initializer. `fn` must return a tensor of exactly `shape` (any dtype; it is cast).
  Initializer(std::string name, Fn fn);

  const std::string& name() const { return name_; }
  Tensor operator()(const Shape& shape, DType dtype = DType::float32) const;
  Tensor operator()(const Shape& shape, DType dtype, Generator& gen) const;

  static std::vector<std::string> valid_names();

  // Keras get_config(): the parameters of a built-in initializer ({} for the parameterless ones,
  // {"value": v} for constant(), {"mean", "stddev"} for random_normal(), {"minval", "maxval"} for
  // random_uniform()); nullopt for a custom function, which a model config cannot describe.
  const std::optional<std::map<std::string, double>>& get_config() const { return config_; }
  // Internal: marks an initializer made by this library's factories as describable by `config`.
  Initializer with_config(std::map<std::string, double> config) &&;

 private:
  std::string name_;
  Fn fn_;
  std::optional<std::map<std::string, double>> config_;
};

struct Fans {
  double fan_in = 1;
  double fan_out = 1;
};
Fans compute_fans(const Shape& shape);

// U(-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)): the Dense/Conv kernel default.
Initializer glorot_uniform();
// Truncated normal, stddev sqrt(2 / (fan_in + fan_out)).
Initializer glorot_normal();
// Truncated normal, stddev sqrt(2 / fan_in).
Initializer he_normal();
// U(-limit, limit), limit = sqrt(6 / fan_in).
Initializer he_uniform();
// Truncated normal, stddev sqrt(1 / fan_in).
Initializer lecun_normal();
// U(-limit, limit), limit = sqrt(3 / fan_in).
Initializer lecun_uniform();
Initializer zeros();
Initializer ones();
Initializer constant(double value);
// Plain (not truncated) normal; Keras RandomNormal defaults.
Initializer random_normal(double mean = 0.0, double stddev = 0.05);
Initializer random_uniform(double minval = -0.05, double maxval = 0.05);

}  // namespace mixprec::initializers

#pragma GCC visibility pop
