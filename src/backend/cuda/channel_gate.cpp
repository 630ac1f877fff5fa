// Host side of the squeeze-and-excitation gate's gradient on CUDA: checks, geometry, scratch and
// the launch (see channel_gate.h).
#include "backend/cuda/channel_gate.h"

#include <cstdint>
#include <string>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::cuda {

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
  const Device device = g.device();
  // Nothing broadcast: the products, each rounded once, as mul's.
  if (small_shape == full.shape()) return mul(g, full);
  // No elements: empty sums (zeros), or an empty result.
  if (full.numel() == 0) {
    Tensor out = core::make_tensor(small_shape, g.dtype(), device);
    if (out.numel() > 0) fill(out, 0.0);
    return out;
  }
  const auto geo = channel_geometry(full.shape(), small_shape);
  if (!geo) {
    throw Error("cuda::channel_gate_backward: " + small_shape.to_string() +
                " is no per-channel broadcast of " + full.shape().to_string());
  }
  Tensor out = core::make_tensor(small_shape, g.dtype(), device);
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
