#include "backend/cuda/concat.h"

#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

namespace {

// The view of `t` covering positions [start, start + extent) of `axis` (no autograd).
Tensor band(const Tensor& t, int axis, std::int64_t start, std::int64_t extent) {
  Shape shape = t.shape();
  shape[axis] = extent;
  return core::make_view(t, shape, t.strides(),
                         t.offset() + start * t.strides()[static_cast<std::size_t>(axis)]);
}

}  // namespace

void concat(const std::vector<Tensor>& inputs, int axis, const Tensor& out) {
  std::int64_t position = 0;
  for (const Tensor& input : inputs) {
    const std::int64_t extent = input.shape()[axis];
    if (input.numel() > 0) copy_strided(input.detach(), band(out, axis, position, extent));
    position += extent;
  }
}

std::vector<Tensor> split(const Tensor& g, int axis, const std::vector<std::int64_t>& extents,
                          const std::vector<bool>& wanted) {
  std::vector<Tensor> pieces(extents.size());
  std::int64_t position = 0;
  for (std::size_t k = 0; k < extents.size(); ++k) {
    if (wanted[k]) {
      const Tensor view = band(g.detach(), axis, position, extents[k]);
      pieces[k] = core::make_tensor(view.shape(), g.dtype(), g.device());
      copy_strided(view, pieces[k]);
    }
    position += extents[k];
  }
  return pieces;
}

}  // namespace mixprec::cuda
