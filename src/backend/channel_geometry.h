// The geometry of a per-channel broadcast: an operand of shape (N, 1, ..., 1, C) or (1, ..., 1, C)
// (or (C)) against a full tensor (N, ..., C), e.g. the squeeze-and-excitation gate multiplied
// into an activation. Shared by the op layer (src/ops/binary.cpp, which picks the fused gradient
// kernel with it) and the CPU kernels (backend/cpu/binary_channel.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "mixprec/shape.h"

namespace mixprec {

// full viewed as (groups, rows, channels) and the small operand as (groups, channels): the small
// operand's element (n, c) applies to every row of group n.
struct ChannelGeometry {
  std::int64_t groups = 1;
  std::int64_t rows = 1;
  std::int64_t channels = 1;
};

// The geometry when `small` broadcasts to `full` as above with at least one middle axis (rank of
// full >= 2) and some broadcasting actually happens; nullopt otherwise (same shapes, scalars,
// other broadcasts).
inline std::optional<ChannelGeometry> channel_geometry(const Shape& full, const Shape& small) {
  const int rank = full.rank();
  if (rank < 2 || small.rank() > rank || small.rank() < 1 || full.numel() == 0) return std::nullopt;
  const int shift = rank - small.rank();
  const auto small_dim = [&](int i) { return i < shift ? std::int64_t{1} : small[i - shift]; };
  if (small_dim(rank - 1) != full[rank - 1]) return std::nullopt;
  for (int i = 1; i + 1 < rank; ++i) {
    if (small_dim(i) != 1) return std::nullopt;
  }
  const std::int64_t first = small_dim(0);
  if (first != 1 && first != full[0]) return std::nullopt;
  ChannelGeometry g;
  g.channels = full[rank - 1];
  g.groups = rank == 2 ? 1 : first;  // (N, C) against (1, C) or (C): one group of N rows
  if (rank == 2 && first != 1) return std::nullopt;  // same shape: no broadcast
  g.rows = full.numel() / (g.groups * g.channels);
  if (g.rows == 1) return std::nullopt;  // nothing is broadcast
  return g;
}

}  // namespace mixprec
