// Gradient buckets of data-parallel training (src/distributed/data_parallel.cpp): consecutive
// gradients grouped into buffers of about bucket_bytes, each flattened, weighted, summed over the
// ranks by one all-reduce and copied back. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mixprec/tensor.h"

namespace mixprec::distributed::detail {

// The defined gradients' indices in order, cut into groups whose float32 bytes add up to at most
// bucket_bytes (a gradient larger than that is a group of its own).
std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<Tensor>& gradients,
                                                   std::int64_t bucket_bytes);

// Each defined gradient multiplied by `weight` and summed over the ranks, in place, one
// all_reduce per bucket. DTypeError for a gradient that is not float32; ValueError for one that
// is not contiguous (it is written in place).
void all_reduce_in_buckets(const std::vector<Tensor>& gradients, double weight,
                           std::int64_t bucket_bytes);

}  // namespace mixprec::distributed::detail
