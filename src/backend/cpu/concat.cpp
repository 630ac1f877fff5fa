#include "backend/cpu/concat.h"

#include <cstring>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

// Seen around `axis`, a contiguous tensor is (outer, extent * inner): for each outer index a
// piece of the concatenation is one contiguous run of extent * inner elements.
std::int64_t outer_of(const Shape& shape, int axis) {
  std::int64_t n = 1;
  for (int i = 0; i < axis; ++i) n *= shape[i];
  return n;
}

std::int64_t inner_of(const Shape& shape, int axis) {
  std::int64_t n = 1;
  for (int i = axis + 1; i < shape.rank(); ++i) n *= shape[i];
  return n;
}

// Copies `outer` runs of `run` bytes from src (runs `src_pitch` bytes apart) to dst (runs
// `dst_pitch` bytes apart).
void copy_runs(const char* src, std::int64_t src_pitch, char* dst, std::int64_t dst_pitch,
               std::int64_t outer, std::int64_t run) {
  if (run == 0) return;
  parallel_for(outer, outer * run >= 4 * kParallelThreshold, [&](std::int64_t o) {
    std::memcpy(dst + o * dst_pitch, src + o * src_pitch, static_cast<std::size_t>(run));
  });
}

}  // namespace

void concat(const std::vector<Tensor>& inputs, int axis, const Tensor& out) {
  const auto element = static_cast<std::int64_t>(dtype_size(out.dtype()));
  const std::int64_t outer = outer_of(out.shape(), axis);
  const std::int64_t inner = inner_of(out.shape(), axis);
  const std::int64_t out_pitch = out.shape()[axis] * inner * element;
  Tensor handle = out;  // a handle: writing through it writes out's storage
  char* dst = static_cast<char*>(handle.data_ptr());
  std::int64_t position = 0;  // bytes into an output run where this input's piece starts
  for (const Tensor& input : inputs) {
    const std::int64_t run = input.shape()[axis] * inner * element;
    if (input.numel() > 0) {
      // A view is made contiguous first; a contiguous input is copied straight from its storage.
      const Tensor src = input.detach().contiguous();
      copy_runs(static_cast<const char*>(src.data_ptr()), run, dst + position, out_pitch, outer,
                run);
    }
    position += run;
  }
}

std::vector<Tensor> split(const Tensor& g, int axis, const std::vector<std::int64_t>& extents,
                          const std::vector<bool>& wanted) {
  const Tensor src = g.detach().contiguous();
  const auto element = static_cast<std::int64_t>(dtype_size(g.dtype()));
  const std::int64_t outer = outer_of(g.shape(), axis);
  const std::int64_t inner = inner_of(g.shape(), axis);
  const std::int64_t src_pitch = g.shape()[axis] * inner * element;
  const char* base = static_cast<const char*>(src.data_ptr());
  std::vector<Tensor> pieces(extents.size());
  std::int64_t position = 0;
  for (std::size_t k = 0; k < extents.size(); ++k) {
    const std::int64_t run = extents[k] * inner * element;
    if (wanted[k]) {
      std::vector<std::int64_t> dims(g.shape().begin(), g.shape().end());
      dims[static_cast<std::size_t>(axis)] = extents[k];
      pieces[k] = core::make_tensor(Shape(dims), g.dtype(), g.device());
      if (pieces[k].numel() > 0) {
        copy_runs(base + position, src_pitch, static_cast<char*>(pieces[k].data_ptr()), run, outer,
                  run);
      }
    }
    position += run;
  }
  return pieces;
}

}  // namespace mixprec::cpu
