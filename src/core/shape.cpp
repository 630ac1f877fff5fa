#include "mixprec/shape.h"

#include <algorithm>
#include <ostream>
#include <string>

#include "mixprec/error.h"

namespace mixprec {

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {
  // -1 is allowed as the "infer this extent" placeholder of reshape; tensors never have it
  // (make_tensor, make_view and broadcast_shapes reject it).
  for (auto d : dims_) {
    if (d < -1) throw ShapeError("negative extent in shape " + to_string());
  }
}

namespace {
void check_extents(const Shape& shape, const char* op) {
  for (auto d : shape) {
    if (d < 0) {
      throw ShapeError(std::string(op) + ": shape " + shape.to_string() +
                       " has a negative extent; -1 is only meaningful to reshape");
    }
  }
}
}  // namespace

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (auto d : dims_) n *= d;
  return n;
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.to_string(); }

std::string Shape::to_string() const {
  std::string s = "(";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  if (dims_.size() == 1) s += ",";
  return s + ")";
}

int normalize_axis(int axis, int rank, const char* op) {
  const int normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank) {
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) +
                     " is out of range for a tensor of rank " + std::to_string(rank) +
                     " (valid: " + std::to_string(-rank) + " to " + std::to_string(rank - 1) + ")");
  }
  return normalized;
}

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
  std::vector<std::int64_t> strides(static_cast<std::size_t>(shape.rank()));
  std::int64_t stride = 1;
  // The product of the extents with a zero counted as one: a tensor with no elements can still
  // have extents whose product overflows (a hostile file's (0, 2^40, 2^40)), and its strides are
  // computed all the same. Bounding it keeps every stride, and numel(), inside int64.
  std::int64_t span = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[static_cast<std::size_t>(i)] = stride;
    if (__builtin_mul_overflow(span, std::max<std::int64_t>(shape[i], 1), &span)) {
      throw ShapeError("shape " + shape.to_string() +
                       ": the product of its extents does not fit a 64-bit integer");
    }
    stride *= shape[i];
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  check_extents(a, op);
  check_extents(b, op);
  const int rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> out(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(std::string(op) + ": shapes " + a.to_string() + " and " + b.to_string() +
                       " cannot be broadcast together (axis " + std::to_string(i) + ": " +
                       std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
    out[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

}  // namespace mixprec
