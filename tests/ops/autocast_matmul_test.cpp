// autocast_matmul against its definition, matmul(x, cast(kernel, x.dtype())): the output and both
// gradients must be bit-identical to the composition, for float16, native bfloat16 and the
// converted bfloat16 path, rank-2 and rank-3 inputs, and with either operand not needing a
// gradient. Also the dtype rules and errors.
#include <cstring>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

Tensor normal(const Shape& shape, std::uint64_t seed, double stddev) {
  Generator gen(seed);
  return random_normal(shape, 0.0, stddev, {}, gen);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

struct Result {
  Tensor y, dx, dw;
};

enum class Form { fused, composed };

// y = f(x, w); loss = sum(y * upstream) so that every output element gets its own gradient.
Result run(Form form, const Tensor& x0, const Tensor& w0, DType dtype, bool x_grad, bool w_grad) {
  Tensor x = x0.to(dtype).detach();
  Tensor w = w0.detach().contiguous();
  w = w.to(DType::float64).to(DType::float32);  // a fresh variable
  x.set_requires_grad(x_grad);
  w.set_requires_grad(w_grad);
  const Tensor y = form == Form::fused ? autocast_matmul(x, w) : matmul(x, w.to(dtype));
  std::vector<std::int64_t> dims(y.shape().begin(), y.shape().end());
  const Tensor upstream = normal(Shape(dims), 99, 1.0).to(dtype);
  sum(mul(y, upstream).to(DType::float32)).backward();
  return {y.detach(), x_grad ? x.grad() : Tensor(), w_grad ? w.grad() : Tensor()};
}

void expect_identical(const Shape& x_shape, DType dtype, bool x_grad = true, bool w_grad = true) {
  const std::int64_t k = x_shape[x_shape.rank() - 1];
  const Tensor x = normal(x_shape, 1, 1.0);
  const Tensor w = normal(Shape{k, 48}, 2, 0.2);
  const Result fused = run(Form::fused, x, w, dtype, x_grad, w_grad);
  const Result composed = run(Form::composed, x, w, dtype, x_grad, w_grad);
  EXPECT_EQ(fused.y.dtype(), dtype);
  EXPECT_TRUE(same_bits(fused.y, composed.y)) << dtype_name(dtype) << " forward";
  if (x_grad) {
    EXPECT_EQ(fused.dx.dtype(), dtype);
    EXPECT_TRUE(same_bits(fused.dx, composed.dx)) << dtype_name(dtype) << " dx";
  }
  if (w_grad) {
    EXPECT_EQ(fused.dw.dtype(), DType::float32);
    EXPECT_TRUE(same_bits(fused.dw, composed.dw)) << dtype_name(dtype) << " dw";
  }
}

TEST(AutocastMatmul, Float16IsBitIdenticalToTheComposition) {
  expect_identical(Shape{33, 70}, DType::float16);
}

TEST(AutocastMatmul, NativeBfloat16IsBitIdenticalToTheComposition) {
  expect_identical(Shape{33, 70}, DType::bfloat16);
}

TEST(AutocastMatmul, ConvertedBfloat16IsBitIdenticalToTheComposition) {
  const cpu::Bf16Path previous = cpu::set_bf16_path(cpu::Bf16Path::convert_to_float32);
  expect_identical(Shape{33, 70}, DType::bfloat16);
  cpu::set_bf16_path(previous);
}

TEST(AutocastMatmul, BatchedInputFoldsItsRows) {
  expect_identical(Shape{3, 5, 40}, DType::float16);
  expect_identical(Shape{2, 7, 40}, DType::bfloat16);
}

TEST(AutocastMatmul, OnlyTheNeededGradients) {
  expect_identical(Shape{16, 24}, DType::float16, /*x_grad=*/false, /*w_grad=*/true);
  expect_identical(Shape{16, 24}, DType::float16, /*x_grad=*/true, /*w_grad=*/false);
  expect_identical(Shape{16, 24}, DType::bfloat16, /*x_grad=*/false, /*w_grad=*/true);
}

TEST(AutocastMatmul, KernelGradientIsRoundedToTheComputeDtype) {
  // Every element of dW must be a float16 value (it is the float16 gradient, widened).
  const Result r = run(Form::fused, normal(Shape{64, 32}, 3, 1.0), normal(Shape{32, 16}, 4, 0.3),
                       DType::float16, false, true);
  const std::vector<float> dw = r.dw.to_vector<float>();
  for (float v : dw) ASSERT_EQ(v, static_cast<float>(float16(v)));
}

TEST(AutocastMatmul, SameDtypeIsAPlainMatmul) {
  const Tensor x = normal(Shape{4, 6}, 5, 1.0), w = normal(Shape{6, 3}, 6, 1.0);
  EXPECT_TRUE(same_bits(autocast_matmul(x, w), matmul(x, w)));
  const Tensor x64 = x.to(DType::float64);
  const Tensor y = autocast_matmul(x64, w);  // a float64 layer over a float32 kernel
  EXPECT_EQ(y.dtype(), DType::float64);
  EXPECT_TRUE(same_bits(y, matmul(x64, w.to(DType::float64))));
}

TEST(AutocastMatmul, Errors) {
  const Tensor x = normal(Shape{4, 6}, 5, 1.0).to(DType::float16);
  testing::expect_error<ShapeError>(
      [&] {
        autocast_matmul(x, normal(Shape{5, 3}, 1, 1.0));
      },
      {"kernel (K, N)"});
  testing::expect_error<ShapeError>([&] { autocast_matmul(x, normal(Shape{6}, 1, 1.0)); },
                                    {"autocast_matmul"});
  testing::expect_error<DTypeError>(
      [&] {
        autocast_matmul(x, zeros(Shape{6, 3}, {.dtype = DType::int32}));
      },
      {"int32"});
}

}  // namespace
}  // namespace mixprec
