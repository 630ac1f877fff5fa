// zero_pad2d and resize_bilinear on CUDA (cuda/image.h) against the CPU, forward and backward, in
// every floating dtype (zero_pad2d also for int32, forward only): asymmetric padding; upsampling
// and downsampling by integer and non-integer factors, to and from 1 pixel; errors.
#include <string>
#include <vector>

#include "gpu/op_harness.h"

namespace mixprec::testing {
namespace {

TEST(GpuImageTest, ZeroPad2dMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<Padding2d> paddings = {{1, 2, 3, 0}, {0, 0, 0, 0}, {2, 1, 1, 2}};
  for (const Padding2d& p : paddings) {
    const OpCase c{"zero_pad2d",
                   [p](const std::vector<Tensor>& x) { return zero_pad2d(x[0], p); },
                   {{{2, 5, 4, 3}}}};
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
  // A copy: any dtype works.
  const Tensor x = sample({2, 3, 4, 2}, -5, 5, DType::float32, 1).to(DType::int32);
  const Tensor y = zero_pad2d(on_gpu(x), {1, 0, 2, 1});
  EXPECT_TRUE(matches(y, zero_pad2d(x, {1, 0, 2, 1}), {0, 0}));
}

TEST(GpuImageTest, ResizeBilinearMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  struct Size {
    Shape x;
    std::int64_t height, width;
  };
  const std::vector<Size> sizes = {
      {{2, 4, 5, 3}, 8, 10},  // x2 up
      {{2, 9, 7, 3}, 4, 3},   // down, non-integer
      {{1, 5, 6, 4}, 7, 11},  // up, non-integer
      {{1, 1, 3, 2}, 4, 1},   // from one row, to one column
      {{2, 6, 6, 5}, 6, 6},   // identity
  };
  for (const Size& s : sizes) {
    const OpCase c{
        "resize_bilinear to " + std::to_string(s.height) + "x" + std::to_string(s.width),
        [s](const std::vector<Tensor>& x) { return resize_bilinear(x[0], s.height, s.width); },
        {{s.x}},
        2.0};  // the backward adds up to 4 weighted gradients per output
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuImageTest, ErrorsNameTheProblem) {
  MIXPREC_REQUIRE_GPU();
  const Tensor x = on_gpu(sample({1, 3, 3, 2}, -1, 1, DType::float32, 1));
  EXPECT_THROW(zero_pad2d(x, {-1, 0, 0, 0}), ValueError);
  EXPECT_THROW(resize_bilinear(x, 0, 3), ValueError);
  EXPECT_THROW(resize_bilinear(on_gpu(sample({3, 3, 2}, -1, 1, DType::float32, 2)), 2, 2),
               ShapeError);
  EXPECT_THROW(resize_bilinear(x.to(DType::int32), 2, 2), DTypeError);
}

}  // namespace
}  // namespace mixprec::testing
