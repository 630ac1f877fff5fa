// Printing: "Tensor(shape=(2, 3), dtype=float16, values=[[1, 2, 3], [4, 5, 6]])"; long axes show
// their first and last three entries around "...".
#include <iomanip>
#include <ostream>
#include <sstream>

#include "mixprec/tensor.h"

namespace mixprec {

namespace {

constexpr std::int64_t kEdge = 3;

void print_axis(std::ostream& os, const std::vector<double>& values, const Shape& shape, int axis,
                std::int64_t offset, DType dtype) {
  if (axis == shape.rank()) {
    const double v = values[static_cast<std::size_t>(offset)];
    if (dtype == DType::bool_) os << (v != 0 ? "true" : "false");
    else os << std::setprecision(dtype == DType::float64 ? 10 : 5) << v;
    return;
  }
  std::int64_t stride = 1;
  for (int i = axis + 1; i < shape.rank(); ++i) stride *= shape[i];
  const std::int64_t n = shape[axis];
  os << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (n > 2 * kEdge && i == kEdge) {
      os << "..., ";
      i = n - kEdge;
    }
    print_axis(os, values, shape, axis + 1, offset + i * stride, dtype);
    if (i + 1 < n) os << ", ";
  }
  os << ']';
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape().to_string() << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) os << ", device=" << device().to_string();
  os << ", values=";
  print_axis(os, to_vector<double>(), shape(), 0, 0, dtype());
  if (requires_grad()) os << ", requires_grad=true";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) { return os << tensor.to_string(); }

}  // namespace mixprec
