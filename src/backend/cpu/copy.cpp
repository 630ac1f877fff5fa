#include "backend/cpu/copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/parallel.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// Merges adjacent axes that are contiguous with each other and drops extent-1 axes, so that a
// transposed (B, M, N) view becomes as few loops as its layout allows.
void coalesce(const Shape& shape, const std::vector<std::int64_t>& strides,
              std::vector<std::int64_t>& dims, std::vector<std::int64_t>& st) {
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    if (!dims.empty() && st.back() == strides[static_cast<std::size_t>(i)] * shape[i]) {
      dims.back() *= shape[i];
      st.back() = strides[static_cast<std::size_t>(i)];
    } else {
      dims.push_back(shape[i]);
      st.push_back(strides[static_cast<std::size_t>(i)]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    st.push_back(1);
  }
}

template <typename T>
void copy_typed(const T* src, const std::vector<std::int64_t>& dims,
                const std::vector<std::int64_t>& st, T* dst) {
  const int rank = static_cast<int>(dims.size());
  const std::int64_t inner = dims.back(), inner_stride = st.back();
  std::int64_t outer = 1;
  for (int i = 0; i < rank - 1; ++i) outer *= dims[static_cast<std::size_t>(i)];
  // Rows are cut into pieces of at most kPiece elements, so that a few long rows (a broadcast
  // scalar gradient: one row of stride 0) still spread over the threads.
  constexpr std::int64_t kPiece = std::int64_t{1} << 15;
  const std::int64_t pieces = (inner + kPiece - 1) / kPiece;
  parallel_for(outer * pieces, outer * inner > (1 << 16), [&](std::int64_t unit) {
    const std::int64_t o = unit / pieces;
    const std::int64_t j0 = (unit % pieces) * kPiece, j1 = std::min(inner, j0 + kPiece);
    // Offset of row `o` from its multi-index over the outer axes.
    std::int64_t rem = o, src_offset = 0;
    for (int i = rank - 2; i >= 0; --i) {
      const auto d = dims[static_cast<std::size_t>(i)];
      src_offset += (rem % d) * st[static_cast<std::size_t>(i)];
      rem /= d;
    }
    const T* s = src + src_offset;
    T* d = dst + o * inner;
    if (inner_stride == 1) {
      std::memcpy(d + j0, s + j0, static_cast<std::size_t>(j1 - j0) * sizeof(T));
    } else if (inner_stride == 0) {
      std::fill(d + j0, d + j1, s[0]);
    } else {
      for (std::int64_t j = j0; j < j1; ++j) d[j] = s[j * inner_stride];
    }
  });
}

// Writes the row-major elements of `src` into the strided view `dst` (strides in elements).
void contiguous_to_strided(const char* src, const Shape& shape,
                           const std::vector<std::int64_t>& strides, std::size_t element_size,
                           char* dst) {
  const auto elem = static_cast<std::int64_t>(element_size);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(shape.rank()), 0);
  for (std::int64_t n = 0; n < shape.numel(); ++n) {
    std::int64_t off = 0;
    for (int i = 0; i < shape.rank(); ++i) {
      off += idx[static_cast<std::size_t>(i)] * strides[static_cast<std::size_t>(i)];
    }
    std::memcpy(dst + off * elem, src + n * elem, element_size);
    for (int i = shape.rank() - 1; i >= 0; --i) {
      if (++idx[static_cast<std::size_t>(i)] < shape[i]) break;
      idx[static_cast<std::size_t>(i)] = 0;
    }
  }
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0 || src.data_ptr() == dst.data_ptr()) return;
  const std::size_t elem = dtype_size(dst.dtype());
  Tensor handle = dst;  // a handle: writing through it writes dst's storage
  if (dst.is_contiguous()) {
    strided_to_contiguous(src.data_ptr(), src.shape(), src.strides(), elem, handle.data_ptr());
    return;
  }
  const Tensor values = src.is_contiguous() ? src : src.detach().contiguous();
  contiguous_to_strided(static_cast<const char*>(values.data_ptr()), dst.shape(), dst.strides(),
                        elem, static_cast<char*>(handle.data_ptr()));
}

void strided_to_contiguous(const void* src, const Shape& shape,
                           const std::vector<std::int64_t>& strides, std::size_t element_size,
                           void* dst) {
  if (shape.numel() == 0) return;
  std::vector<std::int64_t> dims, st;
  coalesce(shape, strides, dims, st);
  switch (element_size) {
    case 1:
      return copy_typed(static_cast<const std::uint8_t*>(src), dims, st,
                        static_cast<std::uint8_t*>(dst));
    case 2:
      return copy_typed(static_cast<const std::uint16_t*>(src), dims, st,
                        static_cast<std::uint16_t*>(dst));
    case 4:
      return copy_typed(static_cast<const std::uint32_t*>(src), dims, st,
                        static_cast<std::uint32_t*>(dst));
    case 8:
      return copy_typed(static_cast<const std::uint64_t*>(src), dims, st,
                        static_cast<std::uint64_t*>(dst));
    default:
      throw Error("strided_to_contiguous: unsupported element size " +
                  std::to_string(element_size));
  }
}

}  // namespace mixprec::cpu
