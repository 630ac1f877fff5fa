// Embedding, ReversibleEmbedding and PositionEmbedding layers: output and variable dtypes under
// float32, mixed_float16 and mixed_bfloat16 (integer ids never cast), mixed-vs-float32 parity, the
// reversible layer's two call forms (eager and functional) with the shared table's gradient the
// sum of both uses, a tiny GPT-shaped model saved and loaded with bit-identical outputs, config
// round trips, and the errors (ids out of range, floating ids, wrong rank, too long a sequence).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

using layers::Embedding;
using layers::PositionEmbedding;
using layers::ReversibleEmbedding;
using testing::all_close;
using testing::expect_error;
using testing::normal;
using testing::PolicyGuard;

Tensor token_ids(const Shape& shape, std::int32_t vocab, std::int32_t salt = 0) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<std::int32_t>((i * 7 + static_cast<std::size_t>(salt)) % vocab);
  }
  return from_vector(v, shape, {.dtype = DType::int32});
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

class EmbeddingPolicies : public ::testing::TestWithParam<const char*> {};

TEST_P(EmbeddingPolicies, Dtypes) {
  PolicyGuard guard(GetParam());
  const DType compute = mixed_precision::Policy(GetParam()).compute_dtype();
  const Tensor ids = token_ids(Shape{2, 5}, 11);
  Embedding emb(11, 4);
  const Tensor y = emb(ids);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 4}));
  EXPECT_EQ(y.dtype(), compute);
  EXPECT_EQ(emb.embeddings().dtype(), DType::float32);
  EXPECT_EQ(emb.embeddings().shape(), (Shape{11, 4}));
  // The rows, each rounded once from the float32 table.
  EXPECT_TRUE(bit_identical(y, embedding_lookup(emb.embeddings().to(compute), ids, compute)));

  ReversibleEmbedding rev(11, 4);
  const Tensor logits = rev.reverse(normal(Shape{2, 5, 4}, 1));
  EXPECT_EQ(logits.shape(), (Shape{2, 5, 11}));
  EXPECT_EQ(logits.dtype(), compute);
  EXPECT_EQ(rev.embeddings().dtype(), DType::float32);

  PositionEmbedding pos(8);
  const Tensor p = pos(normal(Shape{3, 5, 4}, 2));
  EXPECT_EQ(p.shape(), (Shape{3, 5, 4}));
  EXPECT_EQ(p.dtype(), compute);
  EXPECT_EQ(pos.embeddings().shape(), (Shape{8, 4}));
  EXPECT_EQ(pos.embeddings().dtype(), DType::float32);
  // Every batch entry holds rows 0..4 of the table.
  const Tensor rows = pos.embeddings().slice(0, 0, 5).to(compute);
  EXPECT_TRUE(bit_identical(p.slice(0, 2, 3).reshape(Shape{5, 4}).contiguous(), rows.contiguous()));
}

TEST_P(EmbeddingPolicies, MixedMatchesFloat32) {
  const Tensor ids = token_ids(Shape{3, 4}, 13, 2);
  const Tensor x = normal(Shape{3, 4, 6}, 3);
  Tensor ref_y, ref_logits;
  std::vector<Tensor> weights;
  {
    PolicyGuard guard("float32");
    ReversibleEmbedding rev(13, 6);
    ref_y = rev(ids);
    ref_logits = rev.reverse(x);
    weights = rev.get_weights();
  }
  PolicyGuard guard(GetParam());
  ReversibleEmbedding rev(13, 6);
  rev(ids);
  rev.set_weights(weights);
  EXPECT_TRUE(all_close(rev(ids), ref_y, {2e-3, 2e-3}));
  EXPECT_TRUE(all_close(rev.reverse(x), ref_logits, {2e-3, 2e-3}));
}

INSTANTIATE_TEST_SUITE_P(Policies, EmbeddingPolicies,
                         ::testing::Values("float32", "mixed_float16", "mixed_bfloat16"));

TEST(ReversibleEmbeddingLayer, SharedTableGradientSumsBothUses) {
  PolicyGuard guard("float32");
  const Tensor ids = token_ids(Shape{2, 3}, 5, 1);
  ReversibleEmbedding rev(5, 4, {.embeddings_initializer = "random_normal"});
  const Tensor h = rev(ids);             // (2, 3, 4)
  const Tensor logits = rev.reverse(h);  // (2, 3, 5)
  sum(logits).backward();
  // The same loss through explicit ops on a copy of the table.
  Tensor table = rev.embeddings().detach().contiguous();
  table = table.to(DType::float32);
  Tensor t = table.detach();
  t.set_requires_grad(true);
  const Tensor h2 = embedding_lookup(t, ids, DType::float32);
  sum(matmul(reshape(h2, Shape{6, 4}), t, Transpose::no, Transpose::yes)).backward();
  EXPECT_TRUE(all_close(rev.embeddings().grad(), t.grad(), {1e-6, 1e-6}));
  // Both uses contribute: the lookup's share alone differs.
  Tensor t_only = table.detach();
  t_only.set_requires_grad(true);
  sum(matmul(reshape(h2.detach(), Shape{6, 4}), t_only, Transpose::no, Transpose::yes)).backward();
  EXPECT_FALSE(all_close(rev.embeddings().grad(), t_only.grad(), {1e-6, 1e-6}));
}

// A tiny GPT-shaped model: ids -> tied embedding + positions -> LayerNormalization -> Dense ->
// RMSNormalization -> tied logits.
Model tiny_lm(std::int64_t vocab, std::int64_t seq, std::int64_t width) {
  auto ids = Input({seq}, {.dtype = DType::int32, .name = "ids"});
  ReversibleEmbedding tokens(vocab, width, {.name = "tokens"});
  auto h = tokens(ids);
  auto p = PositionEmbedding(seq, {.name = "positions"})(h);
  h = layers::Add()({h, p});
  h = layers::LayerNormalization({.name = "ln"})(h);
  h = layers::Dense(width, {.activation = "relu"})(h);
  h = layers::RMSNormalization({.name = "rms"})(h);
  auto logits = tokens.reverse(h);
  return Model(ids, logits);
}

TEST(ReversibleEmbeddingLayer, ModelSaveLoadRoundTripsBitIdentically) {
  for (const char* policy : {"float32", "mixed_bfloat16"}) {
    PolicyGuard guard(policy);
    Model m = tiny_lm(17, 6, 8);
    const Tensor ids = token_ids(Shape{3, 6}, 17, 3);
    const Tensor out = m(ids);
    EXPECT_EQ(out.shape(), (Shape{3, 6, 17}));
    // One table for both forms.
    EXPECT_EQ(Embedding(m.get_layer("tokens")).embeddings().shape(), (Shape{17, 8}));
    testing::TempDir dir;
    m.save(dir.path() / "lm");
    Model again = load_model(dir.path() / "lm");
    EXPECT_EQ(again.to_json(), m.to_json()) << policy;
    EXPECT_TRUE(bit_identical(again(ids), out)) << policy;
    // Config round trip alone.
    EXPECT_EQ(model_from_json(m.to_json()).to_json(), m.to_json());
    // The summary lists the layers.
    std::ostringstream os;
    m.summary(os);
    const std::string summary = os.str();
    EXPECT_NE(summary.find("ReversibleEmbedding"), std::string::npos);
    EXPECT_NE(summary.find("PositionEmbedding"), std::string::npos);
  }
}

TEST(EmbeddingLayer, ConfigRoundTrip) {
  auto ids = Input({4}, {.dtype = DType::int64});
  auto y = Embedding(
      9, 3,
      {.embeddings_initializer = initializers::random_uniform(-0.1, 0.1), .name = "emb"})(ids);
  Model m(ids, y);
  Model again = model_from_json(m.to_json());
  EXPECT_EQ(again.to_json(), m.to_json());
  const Embedding e(again.get_layer("emb"));
  EXPECT_EQ(e.input_dim(), 9);
  EXPECT_EQ(e.output_dim(), 3);
  expect_error<ValueError>([&] { ReversibleEmbedding r(again.get_layer("emb")); },
                           {"not a ReversibleEmbedding"});
}

TEST(EmbeddingLayer, Errors) {
  Embedding emb(5, 2, {.name = "emb"});
  expect_error<ValueError>(
      [&] {
        emb(from_vector(std::vector<std::int32_t>{1, 5}, Shape{2}, {.dtype = DType::int32}));
      },
      {"emb", "id 5", "flat position 1", "(2,)", "[0, 5)"});
  expect_error<DTypeError>([&] { emb(zeros(Shape{2, 3})); }, {"emb", "int32 or int64", "float32"});
  expect_error<DTypeError>([&] { emb(Input({3})); }, {"int32 or int64"});
  expect_error<ValueError>([] { Embedding(0, 3); }, {"input_dim", ">= 1"});
  ReversibleEmbedding rev(5, 2);
  expect_error<ShapeError>([&] { rev.reverse(zeros(Shape{2, 3})); }, {"(..., 2)", "(2, 3)"});
  expect_error<DTypeError>(
      [&] {
        rev.reverse(from_vector(std::vector<std::int32_t>{1}, Shape{1}, {.dtype = DType::int32}));
      },
      {"reverse", "floating"});
  PositionEmbedding pos(4);
  expect_error<ShapeError>(
      [&] {
        pos(zeros(Shape{2, 5, 3}));
      },
      {"5 positions", "sequence_length = 4"});
  expect_error<ShapeError>([&] { pos(zeros(Shape{2, 3})); }, {"(batch, sequence, features)"});
  expect_error<ValueError>([] { PositionEmbedding(0); }, {"sequence_length >= 1"});
}

}  // namespace
}  // namespace mixprec
