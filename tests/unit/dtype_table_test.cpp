// DESIGN §2.4 (seed 004) as a test, over Dense: for each layer policy (float32, float16,
// mixed_float16), input dtype (float32, float16) and accumulation switch (1, 0), the stored weight
// dtype, the dtype it is used in, the computation (accumulation) dtype and the output dtype. Then
// the numbers: with the switch at 0 a float16 Dense accumulates in float16 (it equals the 16-bit
// accumulation reference and differs from float32 accumulation on a long dot product).
// The same table over Conv2D and DepthwiseConv2D, whose accumulation follows the conv switch
// (mixed_precision::fp16_conv_use_fp32_compute()) and not the matmul one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/layers/conv2d.h"
#include "mixprec/layers/dense.h"
#include "mixprec/layers/depthwise_conv2d.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;

// Sets the matmul accumulation switch and restores it.
struct SwitchGuard {
  bool saved = mixed_precision::fp16_matmul_use_fp32_compute();
  explicit SwitchGuard(bool on) { mixed_precision::set_fp16_matmul_use_fp32_compute(on); }
  ~SwitchGuard() { mixed_precision::set_fp16_matmul_use_fp32_compute(saved); }
};

struct Row {
  const char* policy;
  DType input;
  bool use_fp32_compute;
  DType weight_stored, weight_used, computation, output;
};

// The table, written out row by row as in seed 004.
const std::vector<Row> kTable = {
    {"float32", kFloat32, true, kFloat32, kFloat32, kFloat32, kFloat32},
    {"float32", kFloat32, false, kFloat32, kFloat32, kFloat32, kFloat32},
    {"float32", kFloat16, true, kFloat32, kFloat32, kFloat32, kFloat32},
    {"float32", kFloat16, false, kFloat32, kFloat32, kFloat32, kFloat32},
    {"float16", kFloat32, true, kFloat16, kFloat16, kFloat32, kFloat16},
    {"float16", kFloat32, false, kFloat16, kFloat16, kFloat16, kFloat16},
    {"float16", kFloat16, true, kFloat16, kFloat16, kFloat32, kFloat16},
    {"float16", kFloat16, false, kFloat16, kFloat16, kFloat16, kFloat16},
    {"mixed_float16", kFloat32, true, kFloat32, kFloat16, kFloat32, kFloat16},
    {"mixed_float16", kFloat32, false, kFloat32, kFloat16, kFloat16, kFloat16},
    {"mixed_float16", kFloat16, true, kFloat32, kFloat16, kFloat32, kFloat16},
    {"mixed_float16", kFloat16, false, kFloat32, kFloat16, kFloat16, kFloat16},
};

std::string describe(const Row& r) {
  return std::string(r.policy) + " / input " + std::string(dtype_name(r.input)) + " / switch " +
         (r.use_fp32_compute ? "1" : "0");
}

TEST(DtypeTableTest, EveryRowOfDesignSection2_4) {
  for (const Row& r : kTable) {
    SCOPED_TRACE(describe(r));
    SwitchGuard sw(r.use_fp32_compute);
    layers::Dense dense(8, {.dtype = r.policy});
    const Tensor y = dense(random_normal({4, 16}, 0, 1, {.dtype = r.input}));
    EXPECT_EQ(dense.kernel().dtype(), r.weight_stored);
    EXPECT_EQ(dense.bias().dtype(), r.weight_stored);
    EXPECT_EQ(dense.variable_dtype(), r.weight_stored);
    EXPECT_EQ(dense.compute_dtype(), r.weight_used);
    EXPECT_EQ(dense.accumulation_dtype(), r.computation);
    EXPECT_EQ(y.dtype(), r.output);
    // The symbolic path agrees.
    EXPECT_EQ(dense(Input({16}, {.dtype = r.input})).dtype(), r.output);
  }
}

// A long dot product of positive terms: float16 partial sums lose the small addends once the sum
// is large (the spacing of float16 at 2048 is 2), so the two accumulations differ clearly.
struct LongDot {
  Tensor x, kernel16;
  layers::Dense dense;
  explicit LongDot(const char* policy) : dense(16, {.use_bias = false, .dtype = policy}) {
    Generator gen(17);
    x = random_uniform({4, 4096}, 0.5, 1.0, {.dtype = kFloat16}, gen);
    dense(x);  // build
    dense.set_weights({random_uniform({4096, 16}, 0.5, 1.0, {}, gen)});
    kernel16 = dense.kernel().detach().to(kFloat16);
  }
};

TEST(DtypeTableTest, SwitchOffAccumulatesInFloat16) {
  for (const char* policy : {"float16", "mixed_float16"}) {
    SCOPED_TRACE(policy);
    LongDot d(policy);
    const Tensor acc16 =
        matmul(d.x, d.kernel16, Transpose::no, Transpose::no, Accumulation::compute_dtype);
    const Tensor acc32 =
        matmul(d.x, d.kernel16, Transpose::no, Transpose::no, Accumulation::float32);
    SwitchGuard sw(false);
    const Tensor y = d.dense(d.x);
    ASSERT_EQ(y.dtype(), kFloat16);
    EXPECT_EQ(y.to_vector<double>(), acc16.to_vector<double>());
    EXPECT_NE(y.to_vector<double>(), acc32.to_vector<double>());
    // The float32-accumulated result is close to the exact sum; the float16 one is visibly off.
    const auto exact = matmul(d.x.to(kFloat64), d.kernel16.to(kFloat64)).to_vector<double>();
    const auto y16 = y.to_vector<double>(), y32 = acc32.to_vector<double>();
    double err16 = 0, err32 = 0;
    for (std::size_t i = 0; i < exact.size(); ++i) {
      err16 = std::max(err16, std::abs(y16[i] - exact[i]) / exact[i]);
      err32 = std::max(err32, std::abs(y32[i] - exact[i]) / exact[i]);
    }
    EXPECT_LE(err32, 1e-3);  // one float16 rounding of the result
    EXPECT_GT(err16, 4 * err32);
  }
}

TEST(DtypeTableTest, SwitchOnAccumulatesInFloat32) {
  LongDot d("mixed_float16");
  SwitchGuard sw(true);
  const Tensor y = d.dense(d.x);
  EXPECT_EQ(y.to_vector<double>(), matmul(d.x, d.kernel16).to_vector<double>());
  EXPECT_EQ(y.to_vector<double>(),
            matmul(d.x, d.kernel16, Transpose::no, Transpose::no, Accumulation::float32)
                .to_vector<double>());
}

// ---- Conv2D: the same table under the conv switch ----

// Sets the conv accumulation switch and restores it.
struct ConvSwitchGuard {
  bool saved = mixed_precision::fp16_conv_use_fp32_compute();
  explicit ConvSwitchGuard(bool on) { mixed_precision::set_fp16_conv_use_fp32_compute(on); }
  ~ConvSwitchGuard() { mixed_precision::set_fp16_conv_use_fp32_compute(saved); }
};

TEST(DtypeTableTest, EveryRowOfDesignSection2_4ForConv2D) {
  for (const Row& r : kTable) {
    SCOPED_TRACE(describe(r));
    ConvSwitchGuard sw(r.use_fp32_compute);
    // The matmul switch set the other way: it must not matter for a convolution.
    SwitchGuard matmul_switch(!r.use_fp32_compute);
    layers::Conv2D conv(4, 3, {.padding = "same", .dtype = r.policy});
    const Tensor y = conv(random_normal({2, 5, 5, 3}, 0, 1, {.dtype = r.input}));
    EXPECT_EQ(conv.kernel().dtype(), r.weight_stored);
    EXPECT_EQ(conv.bias().dtype(), r.weight_stored);
    EXPECT_EQ(conv.variable_dtype(), r.weight_stored);
    EXPECT_EQ(conv.compute_dtype(), r.weight_used);
    EXPECT_EQ(conv.accumulation_dtype(), r.computation);
    EXPECT_EQ(y.dtype(), r.output);
    EXPECT_EQ(conv(Input({5, 5, 3}, {.dtype = r.input})).dtype(), r.output);
    layers::DepthwiseConv2D dw(3, {.dtype = r.policy});
    EXPECT_EQ(dw(random_normal({1, 4, 4, 2}, 0, 1, {.dtype = r.input})).dtype(), r.output);
    EXPECT_EQ(dw.accumulation_dtype(), r.computation);
    EXPECT_EQ(dw.depthwise_kernel().dtype(), r.weight_stored);
  }
}

// A 1x1 convolution over 4096 channels is the long dot product again: with the conv switch off
// the float16 partial sums lose the small addends; with it on the result is float32-accurate.
TEST(DtypeTableTest, ConvSwitchSelectsTheConvolutionAccumulation) {
  for (const char* policy : {"float16", "mixed_float16"}) {
    SCOPED_TRACE(policy);
    Generator gen(19);
    const Tensor x = random_uniform({1, 2, 2, 4096}, 0.5, 1.0, {.dtype = kFloat16}, gen);
    layers::Conv2D conv(8, 1, {.use_bias = false, .dtype = policy});
    conv(x);  // build
    conv.set_weights({random_uniform({1, 1, 4096, 8}, 0.5, 1.0, {}, gen)});
    const Tensor k16 = conv.kernel().detach().to(kFloat16);
    // The exact sums, in float64.
    const auto exact =
        matmul(x.to(kFloat64).reshape({4, 4096}), k16.to(kFloat64).reshape({4096, 8}))
            .to_vector<double>();
    auto max_rel_err = [&](const Tensor& y) {
      const auto v = y.to_vector<double>();
      double e = 0;
      for (std::size_t i = 0; i < v.size(); ++i)
        e = std::max(e, std::abs(v[i] - exact[i]) / exact[i]);
      return e;
    };
    double err_on = 0, err_off = 0;
    {
      ConvSwitchGuard sw(true);
      SwitchGuard matmul_switch(false);
      const Tensor y = conv(x);
      ASSERT_EQ(y.dtype(), kFloat16);
      EXPECT_EQ(
          y.to_vector<double>(),
          conv2d(x, k16, Tensor(), {.accumulation = Accumulation::float32}).to_vector<double>());
      err_on = max_rel_err(y);
    }
    {
      ConvSwitchGuard sw(false);
      SwitchGuard matmul_switch(true);
      const Tensor y = conv(x);
      EXPECT_EQ(y.to_vector<double>(),
                conv2d(x, k16, Tensor(), {.accumulation = Accumulation::compute_dtype})
                    .to_vector<double>());
      err_off = max_rel_err(y);
    }
    EXPECT_LE(err_on, 1e-3);  // one float16 rounding of the result
    EXPECT_GT(err_off, 4 * err_on);
  }
}

}  // namespace
}  // namespace mixprec
