// A tiny deterministic classification problem and model for tests of the training loop and its
// callbacks: three Gaussian blobs in 2-D and Input(2) -> Dense(8, relu) -> Dense(3) -> float32
// softmax.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec::testing {

struct TinyData {
  Tensor x;  // (n, 2) float32
  Tensor y;  // (n,) int64
};

inline TinyData blobs(std::int64_t n, std::uint64_t seed) {
  const double cx[3] = {0.0, -2.6, 2.6};
  const double cy[3] = {3.0, -1.5, -1.5};
  Generator g(seed);
  std::vector<float> xs;
  std::vector<std::int64_t> ys;
  for (std::int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % 3);
    xs.push_back(static_cast<float>(cx[c] + 0.5 * g.normal()));
    xs.push_back(static_cast<float>(cy[c] + 0.5 * g.normal()));
    ys.push_back(c);
  }
  return {from_vector(xs, {n, 2}), from_vector(ys, {n})};
}

// Under the current global policy, with weights drawn from `seed`; with `dropout` a seeded
// Dropout(0.25) after the hidden layer.
inline Model tiny_model(std::uint64_t seed, bool dropout = false) {
  clear_session();
  set_seed(seed);
  auto inputs = Input({2});
  auto x = layers::Dense(8, {.activation = "relu", .name = "hidden"})(inputs);
  if (dropout) x = layers::Dropout(0.25, {.seed = seed + 1, .name = "dropout"})(x);
  x = layers::Dense(3, {.name = "logits"})(x);
  auto outputs = layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  return Model(inputs, outputs);
}

}  // namespace mixprec::testing
