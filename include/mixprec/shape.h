// Tensor shapes: a list of non-negative extents, printed as "(32, 28, 28)". An extent of -1 is
// accepted only as reshape's "infer this extent" placeholder; creating a tensor with it throws.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::vector<std::int64_t> dims);

  int rank() const { return static_cast<int>(dims_.size()); }
  std::int64_t operator[](int axis) const { return dims_[static_cast<std::size_t>(axis)]; }
  std::int64_t& operator[](int axis) { return dims_[static_cast<std::size_t>(axis)]; }
  // Number of elements (1 for a scalar of rank 0).
  std::int64_t numel() const;
  const std::vector<std::int64_t>& dims() const { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }

  std::string to_string() const;
  bool operator==(const Shape& other) const = default;

 private:
  std::vector<std::int64_t> dims_;
};

// Writes to_string(): "(32, 784)".
std::ostream& operator<<(std::ostream& os, const Shape& shape);

// Maps a possibly negative axis into [0, rank); throws ShapeError naming `op` when out of range.
int normalize_axis(int axis, int rank, const char* op);
// Row-major strides (in elements) of a contiguous tensor of this shape.
std::vector<std::int64_t> contiguous_strides(const Shape& shape);
// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace mixprec

#pragma GCC visibility pop
