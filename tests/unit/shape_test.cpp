// Shape: extents, element counts, printing, broadcasting and axis normalisation.
#include "mixprec/shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/error.h"

namespace mixprec {
namespace {

TEST(ShapeTest, NumelMultipliesExtents) {
  EXPECT_EQ(Shape({32, 28, 28}).numel(), 32 * 28 * 28);
  EXPECT_EQ(Shape({5}).numel(), 5);
  EXPECT_EQ(Shape({4, 0, 3}).numel(), 0);
  EXPECT_EQ(Shape{}.numel(), 1);  // a scalar has one element
  EXPECT_EQ(Shape{}.rank(), 0);
  EXPECT_EQ(Shape({2, 3, 4}).rank(), 3);
  EXPECT_EQ(Shape({2, 3, 4})[1], 3);
}

TEST(ShapeTest, ContiguousStridesRefuseExtentsWhoseProductOverflows) {
  EXPECT_EQ(contiguous_strides(Shape({2, 3, 4})), (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(contiguous_strides(Shape({4, 0, 3})), (std::vector<std::int64_t>{0, 3, 1}));
  // No elements, yet the extents after the zero multiply past int64 (a fuzzed IDX header did
  // this): refused instead of overflowing.
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_THROW(contiguous_strides(Shape({0, big, big})), ShapeError);
  EXPECT_THROW(contiguous_strides(Shape({big, big})), ShapeError);
}

TEST(ShapeTest, ToStringLooksLikePython) {
  EXPECT_EQ(Shape({32, 28, 28}).to_string(), "(32, 28, 28)");
  EXPECT_EQ(Shape({5}).to_string(), "(5,)");
  EXPECT_EQ(Shape{}.to_string(), "()");
  EXPECT_EQ(Shape({0, 7}).to_string(), "(0, 7)");
}

TEST(ShapeTest, EqualityComparesExtents) {
  EXPECT_EQ(Shape({2, 3}), Shape(std::vector<std::int64_t>{2, 3}));
  EXPECT_NE(Shape({2, 3}), Shape({3, 2}));
  EXPECT_NE(Shape({2, 3}), Shape({2, 3, 1}));
}

TEST(ShapeTest, NegativeExtentThrows) {
  EXPECT_THROW(Shape({2, -2}), ShapeError);
  EXPECT_THROW(Shape(std::vector<std::int64_t>{-3}), ShapeError);
  // -1 is reshape's placeholder: a Shape may hold it, a tensor or a broadcast may not.
  EXPECT_NO_THROW(Shape({2, -1}));
  EXPECT_THROW(broadcast_shapes(Shape({2, -1}), Shape({2, 1}), "op"), ShapeError);
}

TEST(ShapeTest, ContiguousStridesAreRowMajor) {
  EXPECT_EQ(contiguous_strides(Shape({2, 3, 4})), (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(contiguous_strides(Shape({7})), (std::vector<std::int64_t>{1}));
  EXPECT_TRUE(contiguous_strides(Shape{}).empty());
}

TEST(ShapeTest, BroadcastShapesFollowsNumpy) {
  EXPECT_EQ(broadcast_shapes(Shape({3, 1, 4}), Shape({2, 1}), "test"), Shape({3, 2, 4}));
  EXPECT_EQ(broadcast_shapes(Shape({2, 1}), Shape({3, 1, 4}), "test"), Shape({3, 2, 4}));
  EXPECT_EQ(broadcast_shapes(Shape({8, 5}), Shape({5}), "test"), Shape({8, 5}));
  EXPECT_EQ(broadcast_shapes(Shape{}, Shape({2, 3}), "test"), Shape({2, 3}));
  EXPECT_EQ(broadcast_shapes(Shape({2, 3}), Shape{}, "test"), Shape({2, 3}));
  EXPECT_EQ(broadcast_shapes(Shape({1}), Shape({0}), "test"), Shape({0}));
  EXPECT_EQ(broadcast_shapes(Shape({4, 1}), Shape({1, 6}), "test"), Shape({4, 6}));
}

TEST(ShapeTest, BroadcastErrorNamesOpAndBothShapes) {
  try {
    broadcast_shapes(Shape({2, 3}), Shape({4}), "my_op");
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("my_op"), std::string::npos) << message;
    EXPECT_NE(message.find("(2, 3)"), std::string::npos) << message;
    EXPECT_NE(message.find("(4,)"), std::string::npos) << message;
  }
  EXPECT_THROW(broadcast_shapes(Shape({2, 0}), Shape({3}), "op"), ShapeError);
}

TEST(ShapeTest, NormalizeAxisMapsNegativeAxes) {
  EXPECT_EQ(normalize_axis(0, 3, "op"), 0);
  EXPECT_EQ(normalize_axis(2, 3, "op"), 2);
  EXPECT_EQ(normalize_axis(-1, 3, "op"), 2);
  EXPECT_EQ(normalize_axis(-3, 3, "op"), 0);
}

TEST(ShapeTest, NormalizeAxisOutOfRangeThrowsNamingTheOp) {
  EXPECT_THROW(normalize_axis(3, 3, "op"), ShapeError);
  EXPECT_THROW(normalize_axis(-4, 3, "op"), ShapeError);
  EXPECT_THROW(normalize_axis(0, 0, "op"), ShapeError);
  try {
    normalize_axis(5, 2, "reduce_thing");
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("reduce_thing"), std::string::npos) << message;
    EXPECT_NE(message.find("5"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 2"), std::string::npos) << message;
  }
  // Every library error is a mixprec::Error.
  EXPECT_THROW(normalize_axis(9, 1, "op"), Error);
}

}  // namespace
}  // namespace mixprec
