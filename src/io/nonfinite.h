// Counting NaN and Inf in stored tensors, for the loaders' refusal of non-finite weights
// (LoadOptions::allow_nonfinite, include/mixprec/io/load_options.h). Internal to src/io.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/io/load_options.h"
#include "mixprec/tensor.h"

namespace mixprec::io::detail {

// The elements of a contiguous host tensor whose exponent bits are all ones (Inf or NaN), read
// from the bits so that every floating dtype, float16 and bfloat16 included, is counted exactly
// and without conversion. 0 for integer and bool tensors.
std::int64_t count_nonfinite(const Tensor& host);

// Unless options.allow_nonfinite: IOError "<where>: tensor '<name>' holds 3 non-finite values
// (NaN or Inf) of 12; ..." for the first such tensor of `tensors` whose name starts with `prefix`.
void check_finite(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::string& prefix, const LoadOptions& options, const std::string& where);

}  // namespace mixprec::io::detail
