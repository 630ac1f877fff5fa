// The CUDA fused attention kernels (kernels/attention_kernels.cuh) run on the CPU by the block
// emulation (support/cuda_block_emulation.h: a block's threads as std::threads meeting at
// barriers, shared memory per block, wmma tiles held whole), with attention.cu's grids and choice
// of kernels, against the CPU backend's fused attention (cpu/attention.h) on the same inputs:
// the output, the log-sum-exp and the three gradients. Tensor-core kernels (float16, bfloat16 with
// head dims 16, 32, 64, 128) and scalar ones (float32, float64, float16 with a head dim of 24);
// lengths that are not multiples of the blocks, Tq != Tk both ways, causal (with queries that see
// no key), a (B, Tq, Tk) mask broadcast over the heads that hides every key of one query, a
// key-padding mask broadcast over heads and queries, dropout. No GPU needed.
//
// Bounds: both sides compute in float (double for float64) from the same stored inputs, in
// different orders (the CPU pre-scales q and blocks by 64 keys; the kernels scale the product or
// pre-scale as the CPU, block by 32 or 64 keys, and the tensor-core products split P and dS into
// two 16-bit parts, exact to u^2 relative). So, with u the storage type's unit roundoff and uc the
// compute type's: outputs within 2u relative (one rounding each, at most an ulp apart) plus
// max(32 uc, 4 u^2) times the largest |value| (float noise of sums of terms of order one);
// log-sum-exps within 64 uc (|lse| + 1); gradients within 4u + 64 uc relative plus
// (8u + 256 uc) max|gradient| (the backward reads the rounded stored output, which may differ by
// an ulp between the two sides, in D = rowsum(dO * O): an error normwise, not elementwise, see
// tests/ops/attention_test.cpp). A kernel bug (a wrong index, a missing rescale, a skipped block)
// is off by O(1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cuda/attention.h"
#include "backend/nn_kernels.h"
#include "core/counter_hash.h"
#include "core/tensor_impl.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_block_emulation.h"
// Its kernels, compiled for the host.
#include "backend/cuda/kernels/attention_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using namespace attention_kernels;

template <typename T>
constexpr bool kSixteenBit = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <typename T>
DType dtype_of() {
  if constexpr (std::is_same_v<T, float16>) return DType::float16;
  if constexpr (std::is_same_v<T, bfloat16>) return DType::bfloat16;
  if constexpr (std::is_same_v<T, double>) return DType::float64;
  return DType::float32;
}

template <typename T>
double unit_roundoff() {
  if constexpr (std::is_same_v<T, float16>) return 0x1p-11;
  if constexpr (std::is_same_v<T, bfloat16>) return 0x1p-8;
  if constexpr (std::is_same_v<T, double>) return 0x1p-53;
  return 0x1p-24;
}

struct Case {
  std::string name;
  std::int64_t b, tq, tk, h, d, dv;
  bool causal = false;
  // 0 none; 1 (B, Tq, Tk) broadcast over the heads: batch 1 hides its last third of keys, batch 0
  // query 1 sees no key; 2 key padding (B, 1, 1, Tk) broadcast over heads and queries: batch 0
  // hides its last 5 keys.
  int mask = 0;
  double dropout = 0.0;
  // The spreads of v and of the output gradient (a loss-scaled one, a tiny one).
  double v_scale = 1.0, dout_scale = 1.0;
};

template <typename T>
struct Results {
  std::vector<double> out, lse, dq, dk, dv;
};

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = static_cast<double>(to_compute(v[i]));
  return r;
}

template <typename T>
std::vector<T> random_values(std::size_t n, std::mt19937& gen, double stddev) {
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<T> v(n);
  for (T& x : v) x = from_compute<T>(static_cast<compute_t<T>>(dist(gen)));
  return v;
}

// The mask of a case as a bool view (B, H, Tq, Tk) of a contiguous tensor (undefined for none).
Tensor mask_of(const Case& c) {
  if (c.mask == 0) return Tensor();
  if (c.mask == 1) {
    std::vector<float> m(static_cast<std::size_t>(c.b * c.tq * c.tk), 1.0f);
    for (std::int64_t b = 0; b < c.b; ++b) {
      for (std::int64_t i = 0; i < c.tq; ++i) {
        for (std::int64_t j = 0; j < c.tk; ++j) {
          const bool hide = (b == 1 && j >= c.tk - c.tk / 3) || (b == 0 && i == 1);
          if (hide) m[static_cast<std::size_t>((b * c.tq + i) * c.tk + j)] = 0.0f;
        }
      }
    }
    const Tensor base = greater(from_vector(m, {c.b, c.tq, c.tk}), full({}, 0.5));
    return core::make_view(base, Shape({c.b, c.h, c.tq, c.tk}), {c.tq * c.tk, 0, c.tk, 1},
                           base.offset());
  }
  std::vector<float> m(static_cast<std::size_t>(c.b * c.tk), 1.0f);
  for (std::int64_t j = c.tk - 5; j < c.tk; ++j) m[static_cast<std::size_t>(j)] = 0.0f;
  const Tensor base = greater(from_vector(m, {c.b, c.tk}), full({}, 0.5));
  return core::make_view(base, Shape({c.b, c.h, c.tq, c.tk}), {c.tk, 0, 0, 1}, base.offset());
}

AttentionGeometry geometry_of(const Case& c, DType dtype) {
  AttentionGeometry g;
  g.batch = c.b, g.heads = c.h, g.q_len = c.tq, g.k_len = c.tk;
  g.head_dim = c.d, g.value_dim = c.dv;
  g.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  g.causal = c.causal;
  g.dropout = c.dropout > 0.0;
  if (g.dropout) {
    g.dropout_base = 0x5eedull;
    g.dropout_threshold = core::keep_threshold(c.dropout);
    const double keep = 1.0 / (1.0 - c.dropout);
    g.keep_scale = dtype == DType::float64 ? keep : static_cast<double>(static_cast<float>(keep));
  }
  return g;
}

AttentionProblem problem_of(const AttentionGeometry& g, const Tensor& mask) {
  AttentionProblem p;
  p.batch = g.batch, p.heads = g.heads, p.q_len = g.q_len, p.k_len = g.k_len;
  p.head_dim = g.head_dim, p.value_dim = g.value_dim;
  p.scale = g.scale, p.causal = g.causal, p.dropout = g.dropout;
  p.dropout_base = g.dropout_base, p.dropout_threshold = g.dropout_threshold;
  p.keep_scale = g.keep_scale;
  if (mask.defined()) {
    p.mask = static_cast<const bool*>(mask.data_ptr());
    for (int a = 0; a < 4; ++a) p.mask_strides[a] = mask.strides()[static_cast<std::size_t>(a)];
  }
  return p;
}

// The kernels of attention.cu's launchers, in their order and with their grids.
template <typename T>
Results<T> run_kernels(const AttentionProblem& p, bool tensor_cores, const std::vector<T>& q,
                       const std::vector<T>& k, const std::vector<T>& v,
                       const std::vector<T>& dout) {
  using C = compute_t<T>;
  const std::int64_t B = p.batch, H = p.heads, Tq = p.q_len, Tk = p.k_len, D = p.head_dim,
                     Dv = p.value_dim;
  const std::size_t n_out = static_cast<std::size_t>(B * Tq * H * Dv);
  const std::size_t n_rows = static_cast<std::size_t>(B * H * Tq);
  std::vector<T> out(n_out, from_compute<T>(C(-7)));
  std::vector<C> lse(n_rows, C(-7));
  std::vector<T> dq(q.size(), from_compute<T>(C(-7))), dk(k.size(), from_compute<T>(C(-7))),
      dv(v.size(), from_compute<T>(C(-7)));
  std::vector<C> dr(n_rows, C(-7));
  bool ran = false;
  if constexpr (kSixteenBit<T>) {
    if (tensor_cores) {
      ran = true;
      run_blocks(query_blocks(p, kTcRows), kTcThreads, ForwardLayout(D, Dv).bytes, [&] {
        forward_tc_kernel<T>(p, q.data(), k.data(), v.data(), out.data(), lse.data());
      });
      run_blocks(ceil_div(B * H * Tq, kRowThreads), kRowThreads, 0,
                 [&] { row_dots_kernel<T>(p, dout.data(), out.data(), dr.data()); });
      run_blocks(key_blocks(p, kTcRows), kTcThreads, DkvLayout(D, Dv).bytes, [&] {
        dkdv_tc_kernel<T>(p, dout.data(), q.data(), k.data(), v.data(), lse.data(), dr.data(),
                          dk.data(), dv.data());
      });
      run_blocks(query_blocks(p, kTcRows), kTcThreads, DqLayout(D, Dv).bytes, [&] {
        dq_tc_kernel<T>(p, dout.data(), q.data(), k.data(), v.data(), lse.data(), dr.data(),
                        dq.data());
      });
    }
  }
  if (!ran) {
    // Scratch filled with garbage: the kernels must initialise what they accumulate into.
    std::vector<C> acc(n_out, C(1e30)), dq_acc(q.size(), C(1e30)), dk_acc(k.size(), C(1e30)),
        dv_acc(v.size(), C(1e30));
    run_blocks(query_blocks(p, kScalarQ), kScalarThreads, scalar_shared_bytes<C>(), [&] {
      forward_scalar_kernel<T>(p, q.data(), k.data(), v.data(), out.data(), lse.data(), acc.data());
    });
    run_blocks(ceil_div(B * H * Tq, kRowThreads), kRowThreads, 0,
               [&] { row_dots_kernel<T>(p, dout.data(), out.data(), dr.data()); });
    run_blocks(key_blocks(p, kScalarK), kScalarThreads, scalar_shared_bytes<C>(), [&] {
      dkdv_scalar_kernel<T>(p, dout.data(), q.data(), k.data(), v.data(), lse.data(), dr.data(),
                            dk_acc.data(), dv_acc.data(), dk.data(), dv.data());
    });
    run_blocks(query_blocks(p, kScalarQ), kScalarThreads, scalar_shared_bytes<C>(), [&] {
      dq_scalar_kernel<T>(p, dout.data(), q.data(), k.data(), v.data(), lse.data(), dr.data(),
                          dq_acc.data(), dq.data());
    });
  }
  Results<T> r;
  r.out = widen(out), r.dq = widen(dq), r.dk = widen(dk), r.dv = widen(dv);
  r.lse.assign(lse.begin(), lse.end());
  return r;
}

template <typename T>
Tensor tensor_of(const std::vector<T>& v, const Shape& shape) {
  return from_vector(widen(v), shape, {.dtype = DType::float64}).to(dtype_of<T>());
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

::testing::AssertionResult close(const char* what, const std::vector<double>& got,
                                 const std::vector<double>& want, double rtol, double atol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << what << ": " << got.size() << " values, expected " << want.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool both_neg_inf =
        std::isinf(got[i]) && std::isinf(want[i]) && got[i] < 0 && want[i] < 0;
    if (both_neg_inf) continue;
    if (!(std::abs(got[i] - want[i]) <= rtol * std::abs(want[i]) + atol)) {
      return ::testing::AssertionFailure()
             << what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " (rtol "
             << rtol << ", atol " << atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
void check_case(const Case& c, bool expect_tensor_cores) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype_of<T>())));
  using C = compute_t<T>;
  const DType dtype = dtype_of<T>();
  std::mt19937 gen(static_cast<std::uint32_t>(c.tq * 131 + c.tk * 7 + c.d));
  const Shape qs{c.b, c.tq, c.h, c.d}, ks{c.b, c.tk, c.h, c.d}, vs{c.b, c.tk, c.h, c.dv},
      os{c.b, c.tq, c.h, c.dv};
  const auto q = random_values<T>(static_cast<std::size_t>(qs.numel()), gen, 1.5);
  const auto k = random_values<T>(static_cast<std::size_t>(ks.numel()), gen, 1.5);
  const auto v = random_values<T>(static_cast<std::size_t>(vs.numel()), gen, c.v_scale);
  const auto dout = random_values<T>(static_cast<std::size_t>(os.numel()), gen, c.dout_scale);

  const Tensor mask = mask_of(c);
  const AttentionGeometry g = geometry_of(c, dtype);
  const bool tc = kSixteenBit<T> && tensor_core_dims(c.d, c.dv);
  ASSERT_EQ(tc, expect_tensor_cores);
  const Results<T> got = run_kernels<T>(problem_of(g, mask), tc, q, k, v, dout);

  const Tensor tq = tensor_of(q, qs), tk = tensor_of(k, ks), tv = tensor_of(v, vs);
  const AttentionForward f = cpu::attention_forward(tq, tk, tv, mask, g);
  const AttentionGradients gr =
      cpu::attention_backward(tensor_of(dout, os), tq, tk, tv, f.out, f.lse, mask, g);
  const auto want_out = f.out.to_vector<double>(), want_lse = f.lse.to_vector<double>();

  const double u = unit_roundoff<T>(), uc = unit_roundoff<C>();
  const double noise = std::max(32 * uc, 4 * u * u);
  const double value_scale = std::max(max_abs(want_out), max_abs(widen(v)));
  EXPECT_TRUE(close("out", got.out, want_out, 2 * u, noise * value_scale));
  for (std::size_t i = 0; i < want_lse.size(); ++i) {
    // -inf exactly where the CPU has it (a query that sees no key), finite elsewhere.
    ASSERT_EQ(std::isinf(got.lse[i]), std::isinf(want_lse[i])) << "lse[" << i << "]";
  }
  EXPECT_TRUE(close("lse", got.lse, want_lse, 64 * uc, 64 * uc));
  const char* names[] = {"dq", "dk", "dv"};
  const std::vector<double>* gots[] = {&got.dq, &got.dk, &got.dv};
  const Tensor* wants[] = {&gr.dq, &gr.dk, &gr.dv};
  for (int t = 0; t < 3; ++t) {
    const std::vector<double> want = wants[t]->to_vector<double>();
    EXPECT_TRUE(
        close(names[t], *gots[t], want, 4 * u + 64 * uc, (8 * u + 256 * uc) * max_abs(want)));
  }
  // Queries that see no key: zeros, exactly (and no NaN anywhere).
  for (double x : got.out) ASSERT_TRUE(std::isfinite(x));
  for (const auto* r : {&got.dq, &got.dk, &got.dv}) {
    for (double x : *r) ASSERT_TRUE(std::isfinite(x));
  }
  for (std::size_t i = 0; i < want_lse.size(); ++i) {
    if (!std::isinf(want_lse[i])) continue;
    const std::int64_t bh = static_cast<std::int64_t>(i) / c.tq,
                       row = static_cast<std::int64_t>(i) % c.tq;
    const std::int64_t b = bh / c.h, h = bh % c.h;
    for (std::int64_t col = 0; col < c.dv; ++col) {
      ASSERT_EQ(got.out[static_cast<std::size_t>(((b * c.tq + row) * c.h + h) * c.dv + col)], 0.0);
    }
  }
}

TEST(CudaAttentionEmulation, TensorCoreKernelsMatchTheCpu) {
  // float16 at D = 16: two query and key blocks of 64 (70 = 64 + 6), causal, a broadcast mask
  // with a fully masked row.
  check_case<float16>({"f16_d16_causal_mask", 2, 70, 70, 2, 16, 16, true, 1}, true);
  // bfloat16 at D = 64 (GPT-2's), Tq < Tk, key padding, dropout.
  check_case<bfloat16>({"bf16_d64_padding_dropout", 1, 33, 80, 2, 64, 64, false, 2, 0.25}, true);
  // Dv != D, causal with dropout.
  check_case<bfloat16>({"bf16_d32_dv16_causal_dropout", 1, 20, 20, 1, 32, 16, true, 0, 0.5}, true);
  // Tq > Tk under the causal rule: the first 45 queries see no key.
  check_case<float16>({"f16_tq_gt_tk_causal", 1, 65, 20, 1, 16, 16, true}, true);
  // The largest head dims (the most shared memory), a key cache longer than a block.
  check_case<bfloat16>({"bf16_d128_kv_cache", 1, 17, 70, 1, 128, 128, true, 0, 0.1}, true);
  // No keys at all: zeros and -inf for every query.
  check_case<float16>({"f16_no_keys", 1, 5, 0, 2, 16, 16}, true);
}

// float16's range on tensor cores: dS = P (dP - D) of a loss-scaled gradient exceeds 65504 and
// of a tiny one falls below float16's normal numbers; the per-tile power-of-two scaling keeps
// both (unscaled, the first gives inf and NaN gradients, the second loses its digits).
TEST(CudaAttentionEmulation, TensorCoreGradientsKeepFloat32Range) {
  Case big{"f16_loss_scaled_dout", 1, 40, 40, 1, 64, 64, true};
  big.v_scale = 4.0, big.dout_scale = 0x1p12;
  check_case<float16>(big, true);
  Case tiny{"f16_tiny_dout", 1, 40, 40, 1, 64, 64, true};
  tiny.dout_scale = 0x1p-20;
  check_case<float16>(tiny, true);
}

TEST(CudaAttentionEmulation, ScalarKernelsMatchTheCpu) {
  // A 16-bit dtype with a head dim that is not a multiple of 16.
  check_case<float16>({"f16_d24_causal_mask_dropout", 2, 19, 37, 2, 24, 24, true, 1, 0.3}, false);
  check_case<float>({"f32_d16_mask", 2, 40, 40, 1, 16, 16, false, 1}, false);
  check_case<float>({"f32_d40_dv8_tq_gt_tk_causal", 1, 50, 17, 1, 40, 8, true}, false);
  check_case<float>({"f32_d64_dropout", 1, 70, 70, 1, 64, 64, false, 0, 0.25}, false);
  check_case<double>({"f64_d5_dv3_padding_dropout", 1, 7, 9, 2, 5, 3, false, 2, 0.2}, false);
}

// A step captured for CUDA graph replays (core::ReplayParameters): the kernels read the dropout
// key from memory where the problem points there, and then give exactly the bits of a launch
// with that key (and not those of the launch's own).
template <typename T>
void check_key_in_memory(const Case& c, bool tensor_cores) {
  SCOPED_TRACE(c.name);
  std::mt19937 gen(7);
  const auto q = random_values<T>(static_cast<std::size_t>(c.b * c.tq * c.h * c.d), gen, 1.5);
  const auto k = random_values<T>(static_cast<std::size_t>(c.b * c.tk * c.h * c.d), gen, 1.5);
  const auto v = random_values<T>(static_cast<std::size_t>(c.b * c.tk * c.h * c.dv), gen, 1.0);
  const auto dout = random_values<T>(static_cast<std::size_t>(c.b * c.tq * c.h * c.dv), gen, 1.0);
  const AttentionGeometry g = geometry_of(c, dtype_of<T>());
  const std::uint64_t replayed_key = 0xabcdef12345ull;
  AttentionProblem launched = problem_of(g, Tensor());
  AttentionProblem in_memory = launched;
  in_memory.dropout_base_in_memory = &replayed_key;
  AttentionProblem with_key = launched;
  with_key.dropout_base = replayed_key;
  const Results<T> a = run_kernels<T>(in_memory, tensor_cores, q, k, v, dout);
  const Results<T> b = run_kernels<T>(with_key, tensor_cores, q, k, v, dout);
  const Results<T> own = run_kernels<T>(launched, tensor_cores, q, k, v, dout);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
  EXPECT_NE(a.out, own.out) << "the key decides the mask";
}

TEST(CudaAttentionEmulation, AReplayedStepsDropoutKeyIsReadFromMemory) {
  check_key_in_memory<bfloat16>({"bf16_d32_dropout", 1, 20, 24, 2, 32, 32, false, 0, 0.3}, true);
  check_key_in_memory<float>({"f32_d8_causal_dropout", 1, 9, 9, 2, 8, 8, true, 0, 0.5}, false);
}

}  // namespace
}  // namespace mixprec::cuda::kernels
