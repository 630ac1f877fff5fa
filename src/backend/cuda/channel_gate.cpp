// Host side of the squeeze-and-excitation gate's gradient on CUDA: checks, geometry, scratch and
// the launch (see channel_gate.h).
#include "backend/cuda/channel_gate.h"

#include <cstdint>
#include <string>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace detail {

std::optional<ChannelGeometry> gate_geometry(const Shape& full, const Shape& small) {
  const int rank = full.rank();
  if (rank < 2 || small.rank() < 1 || small.rank() > rank) return std::nullopt;
  const int shift = rank - small.rank();
  const auto small_dim = [&](int i) { return i < shift ? std::int64_t{1} : small[i - shift]; };
  if (small_dim(rank - 1) != full[rank - 1]) return std::nullopt;
  for (int i = 1; i + 1 < rank; ++i) {
    if (small_dim(i) != 1) return std::nullopt;
  }
  const std::int64_t first = small_dim(0);
  if (first != 1 && first != full[0]) return std::nullopt;
  // As channel_geometry: one group of full[0] * ... rows when the first axis is broadcast (always
  // for rank 2: (N, C) against (1, C) or (C)), else full[0] groups.
  const bool grouped = rank > 2 && first == full[0];
  ChannelGeometry g;
  g.channels = full[rank - 1];
  g.groups = grouped ? full[0] : 1;
  g.rows = 1;
  for (int i = grouped ? 1 : 0; i + 1 < rank; ++i) g.rows *= full[i];
  if (rank == 2 && first != 1) g.groups = full[0], g.rows = 1;  // (N, C) against (N, C)
  return g;
}

}  // namespace detail

namespace {

bool aligned4(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 3u) == 0; }

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " " + t.shape().to_string() + " on " +
         t.device().to_string();
}

}  // namespace

Tensor channel_gate_backward(const Tensor& g, const Tensor& full, const Shape& small_shape) {
  if (!g.defined() || !full.defined()) {
    throw Error("cuda::channel_gate_backward: g and x must be defined tensors");
  }
  if (g.shape() != full.shape() || g.dtype() != full.dtype() || !(g.device() == full.device()) ||
      !g.device().is_cuda() || !is_floating(g.dtype())) {
    throw Error(
        "cuda::channel_gate_backward: expected g and x of one shape and floating dtype on one CUDA "
        "device, got " +
        describe(g) + " and " + describe(full));
  }
  const auto geo = detail::gate_geometry(full.shape(), small_shape);
  if (!geo) {
    throw Error("cuda::channel_gate_backward: " + small_shape.to_string() +
                " is no per-channel broadcast of " + full.shape().to_string());
  }
  const Device device = g.device();
  Tensor out = core::make_tensor(small_shape, g.dtype(), device);
  if (out.numel() == 0) return out;
  if (geo->rows == 0) {  // empty sums
    fill(out, 0.0);
    return out;
  }
  StreamScope scope(device);
  const Tensor gc = contiguous(g.detach()), xc = contiguous(full.detach());
  const kernels::GatePlan plan = kernels::channel_gate_plan(
      g.dtype(), *geo, aligned4(gc.data_ptr()) && aligned4(xc.data_ptr()));
  Tensor partials;
  if (plan.partials > 0) {
    const DType stat = g.dtype() == DType::float64 ? DType::float64 : DType::float32;
    partials = core::make_tensor(Shape{plan.partials}, stat, device);
  }
  kernels::channel_gate_backward(g.dtype(), plan, *geo, gc.data_ptr(), xc.data_ptr(),
                                 plan.partials > 0 ? partials.data_ptr() : nullptr, out.data_ptr(),
                                 scope.stream());
  return out;
}

}  // namespace mixprec::cuda
