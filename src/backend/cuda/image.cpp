// Host side of the CUDA image ops: the resize taps (computed here as the CPU computes them, then
// copied to the device; O(height + width) values) and the kernel sequence (see image.h).
#include "backend/cuda/image.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace detail {

std::vector<ResizeTap> resize_taps(std::int64_t in, std::int64_t out, DType dtype) {
  std::vector<ResizeTap> result(static_cast<std::size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    const double s = std::max((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0);
    ResizeTap& t = result[static_cast<std::size_t>(o)];
    t.i0 = std::min(static_cast<std::int64_t>(s), in - 1);
    t.i1 = std::min(t.i0 + 1, in - 1);
    const double w = t.i1 == t.i0 ? 0.0 : s - static_cast<double>(t.i0);
    t.w = dtype == DType::float64 ? w : static_cast<double>(static_cast<float>(w));
  }
  return result;
}

ResizeSources resize_sources(const std::vector<ResizeTap>& taps, std::int64_t in, DType dtype) {
  // 1 - w in the compute type, as the CPU computes P(1) - w.
  const auto complement = [dtype](double w) {
    return dtype == DType::float64 ? 1.0 - w : static_cast<double>(1.0f - static_cast<float>(w));
  };
  std::vector<std::vector<std::pair<std::int64_t, double>>> per_input(static_cast<std::size_t>(in));
  for (std::size_t o = 0; o < taps.size(); ++o) {
    const ResizeTap& tap = taps[o];
    per_input[static_cast<std::size_t>(tap.i0)].emplace_back(static_cast<std::int64_t>(o),
                                                             complement(tap.w));
    if (tap.w != 0.0) {
      per_input[static_cast<std::size_t>(tap.i1)].emplace_back(static_cast<std::int64_t>(o), tap.w);
    }
  }
  ResizeSources r;
  r.first.push_back(0);
  for (const auto& entries : per_input) {
    for (const auto& [o, w] : entries) {
      r.source.push_back(o);
      r.weight.push_back(w);
    }
    r.first.push_back(static_cast<std::int64_t>(r.source.size()));
  }
  return r;
}

}  // namespace detail

namespace {

using detail::ResizeTap;

Tensor host_int64(const std::vector<std::int64_t>& v) {
  Tensor t = core::make_tensor(Shape{static_cast<std::int64_t>(std::max<std::size_t>(v.size(), 1))},
                               DType::int64, Device::cpu());
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

Tensor host_double(const std::vector<double>& v) {
  Tensor t = core::make_tensor(Shape{static_cast<std::int64_t>(std::max<std::size_t>(v.size(), 1))},
                               DType::float64, Device::cpu());
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}

// The taps of an axis on the device: indices (i0, i1) pairs and weights.
struct DeviceTaps {
  Tensor index, weight;
};

DeviceTaps upload_taps(const std::vector<ResizeTap>& t, Device device) {
  std::vector<std::int64_t> index;
  std::vector<double> weight;
  for (const ResizeTap& tap : t) {
    index.push_back(tap.i0);
    index.push_back(tap.i1);
    weight.push_back(tap.w);
  }
  return {host_int64(index).to(device), host_double(weight).to(device)};
}

// The adjoint tables of one axis on the device.
struct Sources {
  Tensor first, source, weight;
};

Sources upload_sources(std::int64_t in, std::int64_t out, DType dtype, Device device) {
  const detail::ResizeSources r =
      detail::resize_sources(detail::resize_taps(in, out, dtype), in, dtype);
  return {host_int64(r.first).to(device), host_int64(r.source).to(device),
          host_double(r.weight).to(device)};
}

// The tables depend only on (in, out, dtype, device): each is uploaded once and kept (a few KiB),
// so a resize inside a training loop queues no host-to-device copy (each such copy may make the
// host wait for the compute stream, transfer.cpp).
using TableKey = std::tuple<std::int64_t, std::int64_t, int, int>;  // in, out, dtype, device index

template <typename Tables, typename Make>
const Tables& cached_tables(std::map<TableKey, Tables>& cache, const TableKey& key, Make make) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make()).first;
  return it->second;
}

const DeviceTaps& device_taps(std::int64_t in, std::int64_t out, DType dtype, Device device) {
  static auto* cache = new std::map<TableKey, DeviceTaps>();  // never destroyed (device memory)
  return cached_tables(*cache, TableKey{in, out, static_cast<int>(dtype), device.index},
                       [&] { return upload_taps(detail::resize_taps(in, out, dtype), device); });
}

const Sources& device_sources(std::int64_t in, std::int64_t out, DType dtype, Device device) {
  static auto* cache = new std::map<TableKey, Sources>();
  return cached_tables(*cache, TableKey{in, out, static_cast<int>(dtype), device.index},
                       [&] { return upload_sources(in, out, dtype, device); });
}

void check_image(const char* op, const Tensor& t) {
  if (t.rank() != 4 || !is_floating(t.dtype()) || !t.device().is_cuda()) {
    throw Error(std::string(op) + ": expected a floating CUDA tensor (N, H, W, C), got " +
                std::string(dtype_name(t.dtype())) + " " + t.shape().to_string() + " on " +
                t.device().to_string());
  }
}

DType compute_dtype(DType dtype) {
  return dtype == DType::float64 ? DType::float64 : DType::float32;
}

}  // namespace

Tensor zero_pad2d(const Tensor& x, std::int64_t top, std::int64_t bottom, std::int64_t left,
                  std::int64_t right) {
  const std::int64_t h = x.dim(1), w = x.dim(2);
  Tensor out = full(Shape{x.dim(0), top + h + bottom, left + w + right, x.dim(3)}, 0.0, x.dtype(),
                    x.device());
  if (x.numel() > 0) copy_strided(x.detach(), out.slice(1, top, top + h).slice(2, left, left + w));
  return out;
}

Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width) {
  check_image("cuda::resize_bilinear", x);
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  if (height < 1 || width < 1 || h < 1 || w < 1) {
    throw ValueError("cuda::resize_bilinear: sizes must be >= 1 (input " + x.shape().to_string() +
                     ", output " + std::to_string(height) + "x" + std::to_string(width) + ")");
  }
  Tensor y = core::make_tensor(Shape{n, height, width, c}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  const DeviceTaps& rows = device_taps(h, height, x.dtype(), x.device());
  const DeviceTaps& cols = device_taps(w, width, x.dtype(), x.device());
  StreamScope scope(x.device());
  const Tensor xc = contiguous(x.detach());
  kernels::resize_bilinear_forward(x.dtype(), n, h, w, c, height, width,
                                   static_cast<const std::int64_t*>(rows.index.data_ptr()),
                                   static_cast<const double*>(rows.weight.data_ptr()),
                                   static_cast<const std::int64_t*>(cols.index.data_ptr()),
                                   static_cast<const double*>(cols.weight.data_ptr()),
                                   xc.data_ptr(), y.data_ptr(), scope.stream());
  return y;
}

Tensor resize_bilinear_backward(const Tensor& dy, std::int64_t in_height, std::int64_t in_width) {
  check_image("cuda::resize_bilinear_backward", dy);
  const std::int64_t n = dy.dim(0), oh = dy.dim(1), ow = dy.dim(2), c = dy.dim(3);
  if (oh < 1 || ow < 1 || in_height < 1 || in_width < 1) {
    throw ValueError("cuda::resize_bilinear_backward: sizes must be >= 1 (gradient " +
                     dy.shape().to_string() + ", input " + std::to_string(in_height) + "x" +
                     std::to_string(in_width) + ")");
  }
  const DType dtype = dy.dtype();
  Tensor dx = core::make_tensor(Shape{n, in_height, in_width, c}, dtype, dy.device());
  if (dx.numel() == 0) return dx;
  const Sources& rows = device_sources(in_height, oh, dtype, dy.device());
  const Sources& cols = device_sources(in_width, ow, dtype, dy.device());
  StreamScope scope(dy.device());
  const Tensor gc = contiguous(dy.detach());
  // Vertical: (N, OH, OW * C) -> column (N, H, OW * C) in the compute type.
  Tensor column = core::make_tensor(Shape{n, in_height, ow, c}, compute_dtype(dtype), dy.device());
  const auto ptr = [](const Tensor& t) { return static_cast<const std::int64_t*>(t.data_ptr()); };
  kernels::resize_gather(dtype, kernels::GatherTypes::from_storage, n, oh, in_height, ow * c,
                         ptr(rows.first), ptr(rows.source),
                         static_cast<const double*>(rows.weight.data_ptr()), gc.data_ptr(),
                         column.data_ptr(), scope.stream());
  // Horizontal: (N * H, OW, C) -> dx (N * H, W, C), rounded once.
  kernels::resize_gather(dtype, kernels::GatherTypes::to_storage, n * in_height, ow, in_width, c,
                         ptr(cols.first), ptr(cols.source),
                         static_cast<const double*>(cols.weight.data_ptr()), column.data_ptr(),
                         dx.data_ptr(), scope.stream());
  return dx;
}

}  // namespace mixprec::cuda
