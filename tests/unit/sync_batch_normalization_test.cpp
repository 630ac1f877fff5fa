// SyncBatchNormalization / BatchNormalization(synchronized) in one process: the layer is exactly
// the ordinary one in a group of one (outputs, gradients, moving statistics); the global-batch path
// (layers/sync_batch_norm.h) agrees with the fused batch_norm_training kernel and passes a float64
// gradient check; the differentiable all-reduce is a private copy in a group of one; the option
// round-trips through the layer config (absent = false, a non-boolean is refused). The multi-rank
// behaviour is checked under mpirun (tests/distributed/sync_batch_norm_mpi_test.cpp).
#include "mixprec/layers/sync_batch_normalization.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "layers/sync_batch_norm.h"
#include "mixprec/mixprec.h"
#include "ops/collective_ops.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::PolicyGuard;

void expect_identical(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << what;
}

TEST(SyncBatchNormalizationTest, GroupOfOneIsTheOrdinaryLayer) {
  ASSERT_EQ(distributed::world_size(), 1);
  for (const char* policy : {"float32", "mixed_float16", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    PolicyGuard guard(policy);
    layers::BatchNormalization plain({.momentum = 0.8});
    layers::SyncBatchNormalization sync({.momentum = 0.8});
    EXPECT_FALSE(plain.synchronized());
    EXPECT_TRUE(sync.synchronized());
    EXPECT_EQ(sync.class_name(), "BatchNormalization");  // Keras 3: an option, not a class
    set_seed(11);
    const Tensor x = random_normal({4, 3, 3, 5}, 1.5, 2.0);
    const Tensor w = random_normal({4, 3, 3, 5});  // a loss that weights every output
    for (int step = 0; step < 2; ++step) {         // the second step starts from updated statistics
      const Tensor xa = x.detach().set_requires_grad(true);
      const Tensor xb = x.detach().set_requires_grad(true);
      const Tensor ya = plain(xa, {.training = true});
      const Tensor yb = sync(xb, {.training = true});
      expect_identical(ya, yb, "y");
      const auto ga = grad(sum(mul(ya.to(kFloat32), w)), {xa, plain.gamma(), plain.beta()});
      const auto gb = grad(sum(mul(yb.to(kFloat32), w)), {xb, sync.gamma(), sync.beta()});
      for (std::size_t i = 0; i < ga.size(); ++i) expect_identical(ga[i], gb[i], "gradient");
      expect_identical(plain.moving_mean(), sync.moving_mean(), "moving_mean");
      expect_identical(plain.moving_variance(), sync.moving_variance(), "moving_variance");
    }
    expect_identical(plain(x), sync(x), "inference");
  }
}

// The composed global-batch path against the fused kernel, in a group of one.
TEST(SyncBatchNormalizationTest, GlobalBatchPathMatchesTheFusedKernel) {
  set_seed(12);
  const Tensor x = random_normal({6, 2, 3, 4}, 3.0, 2.0);  // a mean large against the spread
  const Tensor gamma = random_normal({4}, 1.0, 0.3);
  const Tensor beta = random_normal({4});
  const Tensor w = random_normal({6, 2, 3, 4});
  auto run = [&](bool composed) {
    std::vector<Tensor> in = {x.detach().set_requires_grad(true),
                              gamma.detach().set_requires_grad(true),
                              beta.detach().set_requires_grad(true)};
    BatchNormOutput out;
    if (composed) {
      const auto s = layers::detail::sync_batch_norm_training(in[0], in[1], in[2], 1e-3);
      EXPECT_EQ(s.count, 36);
      out = s.out;
    } else {
      out = batch_norm_training(in[0], in[1], in[2], 1e-3);
    }
    std::vector<Tensor> r = grad(sum(mul(out.y, w)), in);
    r.push_back(out.y);
    r.push_back(out.mean.detach());
    r.push_back(out.variance.detach());
    return r;
  };
  const auto fused = run(false), composed = run(true);
  const char* names[] = {"dx", "dgamma", "dbeta", "y", "mean", "variance"};
  for (std::size_t i = 0; i < fused.size(); ++i) {
    EXPECT_TRUE(all_close(composed[i], fused[i], {1e-4, 1e-5})) << names[i];
  }
}

TEST(SyncBatchNormalizationTest, GlobalBatchPathGradcheckInFloat64) {
  set_seed(13);
  const Tensor x = random_normal({5, 3}, 0.5, 2.0, {.dtype = kFloat64});
  const Tensor gamma = random_normal({3}, 1.0, 0.3, {.dtype = kFloat64});
  const Tensor beta = random_normal({3}, 0.0, 1.0, {.dtype = kFloat64});
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        return layers::detail::sync_batch_norm_training(in[0], in[1], in[2], 1e-3).out.y;
      },
      {x, gamma, beta}));
}

TEST(SyncBatchNormalizationTest, SixteenBitInputIsNormalisedInFloat32) {
  set_seed(14);
  const Tensor x = random_normal({8, 4}, 2.0, 3.0).to(kBFloat16);
  const Tensor gamma = ones({4}), beta = zeros({4});
  const auto s = layers::detail::sync_batch_norm_training(x, gamma, beta, 1e-3);
  EXPECT_EQ(s.out.y.dtype(), kBFloat16);
  EXPECT_EQ(s.out.mean.dtype(), kFloat32);
  const BatchNormOutput fused = batch_norm_training(x, gamma, beta, 1e-3);
  EXPECT_TRUE(all_close(s.out.mean, fused.mean, {1e-5, 1e-6}));
  EXPECT_TRUE(all_close(s.out.y, fused.y, testing::tolerance_for(kBFloat16)));
}

TEST(SyncBatchNormalizationTest, AllReduceSumIsADifferentiablePrivateCopyInAGroupOfOne) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3}).set_requires_grad(true);
  Tensor y = ops::all_reduce_sum(x);
  EXPECT_FALSE(y.same(x));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  const auto g = grad(sum(mul(y, from_vector(std::vector<float>{4, 5, 6}, {3}))), {x});
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{4, 5, 6}));
  NoGradScope no_grad;
  y.assign(zeros({3}));  // the result is its own storage
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

Model bn_model(layers::BatchNormalizationOptions o) {
  auto in = Input({3});
  return Model(in, layers::BatchNormalization(o)(in));
}

TEST(SyncBatchNormalizationTest, ConfigRoundTrips) {
  auto in = Input({3});
  Model m(in, layers::SyncBatchNormalization({.name = "sbn"})(in));
  auto j = nlohmann::json::parse(m.to_json());
  nlohmann::json* layer = nullptr;
  for (auto& l : j["config"]["layers"]) {
    if (l["config"]["name"] == "sbn") layer = &l;
  }
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ((*layer)["config"]["synchronized"], true);
  EXPECT_TRUE(
      layers::BatchNormalization(model_from_json(j.dump()).get_layer("sbn")).synchronized());

  // A config without the key (written before the option, or unsynchronized) reads as false.
  const auto plain = nlohmann::json::parse(bn_model({.name = "bn"}).to_json());
  EXPECT_EQ(plain.dump().find("synchronized"), std::string::npos);
  EXPECT_FALSE(
      layers::BatchNormalization(model_from_json(plain.dump()).get_layer("bn")).synchronized());

  (*layer)["config"]["synchronized"] = "yes";
  testing::expect_error<ValueError>([&] { model_from_json(j.dump()); }, {"synchronized"});
}

}  // namespace
}  // namespace mixprec
