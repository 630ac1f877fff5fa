// DESIGN §2.4 (seed 004) as a test, over Dense: for each layer policy (float32, float16,
// mixed_float16), input dtype (float32, float16) and accumulation switch (1, 0), the stored weight
// dtype, the dtype it is used in, the computation (accumulation) dtype and the output dtype. Then
// the numbers: with the switch at 0 a float16 Dense accumulates in float16 (it equals the 16-bit
// accumulation reference and differs from float32 accumulation on a long dot product).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/layers/dense.h"
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

}  // namespace
}  // namespace mixprec
