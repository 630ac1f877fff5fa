// Host side of the fused attention on CUDA: results, scratch and the kernel sequence (see
// attention.h).
#include "backend/cuda/attention.h"

#include "backend/cuda/context.h"
#include "backend/nn_kernels.h"
#include "core/replay_parameters.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

namespace {

DType compute_dtype(DType dtype) {
  return dtype == DType::float64 ? DType::float64 : DType::float32;
}

kernels::AttentionProblem problem_of(const Tensor& mask, const AttentionGeometry& g,
                                     Device device) {
  kernels::AttentionProblem p;
  p.batch = g.batch, p.heads = g.heads, p.q_len = g.q_len, p.k_len = g.k_len;
  p.head_dim = g.head_dim, p.value_dim = g.value_dim;
  p.scale = g.scale;
  p.causal = g.causal;
  p.dropout = g.dropout;
  p.dropout_base = g.dropout_base;
  p.dropout_threshold = g.dropout_threshold;
  // Captured for replays: the key of a draw the step recorded comes from the replay buffer.
  if (const core::ReplayParameters* replay = core::ReplayParameters::active();
      g.dropout && replay != nullptr && replay->device() == device) {
    p.dropout_base_in_memory = replay->draw_address(g.dropout_base);
  }
  p.keep_scale = g.keep_scale;
  if (mask.defined()) {
    p.mask = static_cast<const bool*>(mask.data_ptr());
    for (int a = 0; a < 4; ++a) p.mask_strides[a] = mask.strides()[static_cast<std::size_t>(a)];
  }
  return p;
}

// Scratch of n values of the compute dtype (undefined when not needed).
Tensor scratch(bool needed, std::int64_t n, DType dtype, Device device) {
  return needed ? core::make_tensor(Shape{n}, compute_dtype(dtype), device) : Tensor();
}

void* pointer_or_null(Tensor t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& mask, const AttentionGeometry& g) {
  const Device device = q.device();
  AttentionForward r;
  r.out = core::make_tensor(Shape({g.batch, g.q_len, g.heads, g.value_dim}), q.dtype(), device);
  r.lse = core::make_tensor(Shape({g.batch, g.heads, g.q_len}), compute_dtype(q.dtype()), device);
  if (r.lse.numel() == 0) return r;  // no query: nothing to compute
  StreamScope scope(device);
  const bool scalar =
      !kernels::flash_attention_uses_tensor_cores(q.dtype(), g.head_dim, g.value_dim);
  Tensor acc = scratch(scalar, r.out.numel(), q.dtype(), device);
  kernels::flash_attention_forward(q.dtype(), problem_of(mask, g, device), q.data_ptr(),
                                   k.data_ptr(), v.data_ptr(), r.out.data_ptr(), r.lse.data_ptr(),
                                   pointer_or_null(acc), scope.stream());
  return r;
}

AttentionGradients attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                      const Tensor& v, const Tensor& out, const Tensor& lse,
                                      const Tensor& mask, const AttentionGeometry& g) {
  const Device device = q.device();
  AttentionGradients r;
  r.dq = core::make_tensor(q.shape(), q.dtype(), device);
  r.dk = core::make_tensor(k.shape(), k.dtype(), device);
  r.dv = core::make_tensor(v.shape(), v.dtype(), device);
  if (g.batch * g.heads == 0) return r;  // every gradient is empty
  StreamScope scope(device);
  const bool scalar =
      !kernels::flash_attention_uses_tensor_cores(q.dtype(), g.head_dim, g.value_dim);
  const Tensor row_dots = scratch(true, lse.numel(), q.dtype(), device);
  const Tensor dq_acc = scratch(scalar, q.numel(), q.dtype(), device);
  const Tensor dk_acc = scratch(scalar, k.numel(), q.dtype(), device);
  const Tensor dv_acc = scratch(scalar, v.numel(), q.dtype(), device);
  kernels::flash_attention_backward(
      q.dtype(), problem_of(mask, g, device), dout.data_ptr(), q.data_ptr(), k.data_ptr(),
      v.data_ptr(), out.data_ptr(), lse.data_ptr(), pointer_or_null(row_dots),
      pointer_or_null(dq_acc), pointer_or_null(dk_acc), pointer_or_null(dv_acc), r.dq.data_ptr(),
      r.dk.data_ptr(), r.dv.data_ptr(), scope.stream());
  return r;
}

}  // namespace mixprec::cuda
