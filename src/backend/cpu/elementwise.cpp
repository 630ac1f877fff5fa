#include "backend/cpu/elementwise.h"

namespace mixprec::cpu {

std::vector<std::int64_t> broadcast_strides(const Tensor& t, const Shape& out) {
  std::vector<std::int64_t> result(static_cast<std::size_t>(out.rank()), 0);
  const int shift = out.rank() - t.rank();
  for (int i = 0; i < t.rank(); ++i) {
    if (t.shape()[i] != 1) result[static_cast<std::size_t>(i + shift)] = t.strides()[static_cast<std::size_t>(i)];
  }
  return result;
}

}  // namespace mixprec::cpu
