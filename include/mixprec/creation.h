// Tensor creation.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "mixprec/random.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

struct TensorOptions {
  DType dtype = DType::float32;
  Device device = default_device();  // Device::cpu() unless a DeviceScope says otherwise
  bool requires_grad = false;
};

// Uninitialised storage; every other creator fills it.
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// A scalar (rank-0) tensor.
Tensor scalar(double value, TensorOptions options = {});
// Copies host values (converted to options.dtype); values.size() must equal shape.numel().
Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                   TensorOptions options = {});
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   TensorOptions options = {});
Tensor from_vector(const std::vector<std::int32_t>& values, const Shape& shape,
                   TensorOptions options = {.dtype = DType::int32});
Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape,
                   TensorOptions options = {.dtype = DType::int64});
// Copies numel values of `dtype` from raw host memory.
Tensor from_data(const void* data, DType dtype, const Shape& shape, TensorOptions options = {});
// Views memory the caller owns, without copying (PyTorch's from_blob): `data` holds `shape`'s
// elements of `dtype` at `strides` (in elements, each >= 0; empty: row-major contiguous) on
// `device`. `release` runs once, when the last tensor viewing the memory is gone (the Python module
// keeps a NumPy array or a DLPack capsule alive until then); the memory must stay valid until it
// runs. The library writes into it only when asked to (Tensor::assign, an optimizer updating it as
// a variable). ValueError for a null `data` with elements, strides of the wrong rank or negative,
// or a span that overflows; then nothing is wrapped and `release` never runs.
Tensor from_blob(void* data, DType dtype, const Shape& shape, std::vector<std::int64_t> strides,
                 std::function<void()> release, Device device = Device::cpu());
// [start, stop) with `step`, as a rank-1 tensor.
Tensor arange(double start, double stop, double step = 1.0, TensorOptions options = {});
Tensor arange(std::int64_t stop, TensorOptions options = {.dtype = DType::int64});
// Samples are drawn in float64 from `gen` in row-major order, then converted to the dtype.
Tensor random_normal(const Shape& shape, double mean = 0.0, double stddev = 1.0,
                     TensorOptions options = {}, Generator& gen = default_generator());
Tensor random_uniform(const Shape& shape, double low = 0.0, double high = 1.0,
                      TensorOptions options = {}, Generator& gen = default_generator());

}  // namespace mixprec

#pragma GCC visibility pop
