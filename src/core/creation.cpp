#include "mixprec/creation.h"

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "core/transfer.h"
#include "mixprec/error.h"

namespace mixprec {

namespace {

// Host-built values (from_vector, arange, random) are made on the CPU and copied to a CUDA
// device in one transfer.
Tensor finish(Tensor t, const TensorOptions& options) {
  t = core::transfer(t, options.device);
  if (options.requires_grad) t.set_requires_grad(true);
  return t;
}

template <typename Src>
Tensor from_host(const std::vector<Src>& values, const Shape& shape, const TensorOptions& options) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel()) {
    throw ShapeError("from_vector: " + std::to_string(values.size()) +
                     " values do not fill shape " + shape.to_string() + " (" +
                     std::to_string(shape.numel()) + " elements)");
  }
  Tensor t = core::make_tensor(shape, options.dtype, Device::cpu());
  core::dispatch_dtype(options.dtype, [&]<typename T>() {
    T* out = static_cast<T*>(t.data_ptr());
    for (std::size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_integral_v<Src> && std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        out[i] = static_cast<T>(values[i]);  // exact: no detour through double (int64 > 2^53)
      } else {
        out[i] = core::from_double<T>(static_cast<double>(values[i]));
      }
    }
  });
  return finish(t, options);
}

template <typename Sample>
Tensor sampled(const Shape& shape, const TensorOptions& options, Sample sample) {
  Tensor t = core::make_tensor(shape, options.dtype, Device::cpu());
  core::dispatch_floating(options.dtype, "random", [&]<typename T>() {
    T* out = static_cast<T*>(t.data_ptr());
    for (std::int64_t i = 0; i < shape.numel(); ++i) out[i] = core::from_double<T>(sample());
  });
  return finish(t, options);
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) {
  return finish(core::make_tensor(shape, options.dtype, options.device), options);
}

// Filled where the tensor lives (on a GPU: a fill kernel or cudaMemsetAsync).
Tensor full(const Shape& shape, double value, TensorOptions options) {
  Tensor t = core::make_tensor(shape, options.dtype, options.device);
  backend_for(options.device).tensor->fill(t, value);
  return finish(t, options);
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }

Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }
Tensor zeros_like(const Tensor& t) {
  return zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor ones_like(const Tensor& t) {
  return ones(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
Tensor full_like(const Tensor& t, double value) {
  return full(t.shape(), value, {.dtype = t.dtype(), .device = t.device()});
}
Tensor scalar(double value, TensorOptions options) { return full(Shape{}, value, options); }

Tensor from_vector(const std::vector<float>& v, const Shape& s, TensorOptions o) {
  return from_host(v, s, o);
}
Tensor from_vector(const std::vector<double>& v, const Shape& s, TensorOptions o) {
  return from_host(v, s, o);
}
Tensor from_vector(const std::vector<std::int32_t>& v, const Shape& s, TensorOptions o) {
  return from_host(v, s, o);
}
Tensor from_vector(const std::vector<std::int64_t>& v, const Shape& s, TensorOptions o) {
  return from_host(v, s, o);
}

Tensor from_data(const void* data, DType dtype, const Shape& shape, TensorOptions options) {
  if (data == nullptr && shape.numel() > 0) throw ValueError("from_data: null data pointer");
  Tensor raw = core::make_tensor(shape, dtype, Device::cpu());
  if (shape.numel() > 0) std::memcpy(raw.data_ptr(), data, raw.nbytes());
  Tensor t = options.dtype == dtype ? raw : raw.to(options.dtype);
  return finish(t, options);  // also moves to options.device (ignored until now)
}

Tensor arange(double start, double stop, double step, TensorOptions options) {
  if (step == 0.0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step)) {
    throw ValueError("arange: start, stop and step must be finite and step non-zero");
  }
  const double count = std::ceil((stop - start) / step);
  const auto n = static_cast<std::int64_t>(count > 0 ? count : 0);
  Tensor t = core::make_tensor(Shape{n}, options.dtype, Device::cpu());
  core::dispatch_dtype(options.dtype, [&]<typename T>() {
    T* out = static_cast<T*>(t.data_ptr());
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = core::from_double<T>(start + static_cast<double>(i) * step);
  });
  return finish(t, options);
}

Tensor arange(std::int64_t stop, TensorOptions options) {
  return arange(0.0, static_cast<double>(stop), 1.0, options);
}

Tensor random_normal(const Shape& shape, double mean, double stddev, TensorOptions options,
                     Generator& gen) {
  if (!(stddev >= 0.0))
    throw ValueError("random_normal: stddev must be >= 0, got " + std::to_string(stddev));
  return sampled(shape, options, [&] { return mean + stddev * gen.normal(); });
}

Tensor random_uniform(const Shape& shape, double low, double high, TensorOptions options,
                      Generator& gen) {
  if (!(low <= high)) throw ValueError("random_uniform: low must be <= high");
  return sampled(shape, options, [&] { return low + (high - low) * gen.uniform(); });
}

}  // namespace mixprec
