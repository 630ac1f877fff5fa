// Gradient buckets (gradient_buckets.h): the plan and the bucketed all-reduce.
#include "distributed/gradient_buckets.h"

#include <string>

#include "mixprec/autograd.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec::distributed::detail {

std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<Tensor>& gradients,
                                                   std::int64_t bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::int64_t filled = 0;
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    if (!gradients[i].defined()) continue;
    const auto bytes = static_cast<std::int64_t>(gradients[i].numel() * sizeof(float));
    if (buckets.empty() || filled + bytes > bucket_bytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += bytes;
  }
  return buckets;
}

namespace {

void check_gradient(const Tensor& g, std::size_t i) {
  if (g.dtype() != DType::float32) {
    throw DTypeError("DataParallel::all_reduce_gradients: gradient " + std::to_string(i) + " is " +
                     std::string(dtype_name(g.dtype())) + ", expected float32 (the gradients of " +
                     "float32 variables)");
  }
  if (!g.is_contiguous()) {
    throw ValueError("DataParallel::all_reduce_gradients: gradient " + std::to_string(i) +
                     " is not contiguous; it is reduced in place, pass g.contiguous()");
  }
}

Tensor weighted(const Tensor& g, double weight) { return weight == 1.0 ? g : mul(g, weight); }

}  // namespace

void all_reduce_in_buckets(const std::vector<Tensor>& gradients, double weight,
                           std::int64_t bucket_bytes) {
  NoGradScope no_grad;
  for (const std::vector<std::size_t>& bucket : plan_buckets(gradients, bucket_bytes)) {
    for (std::size_t i : bucket) check_gradient(gradients[i], i);
    if (bucket.size() == 1) {
      const Tensor& g = gradients[bucket[0]];
      // A fresh buffer even at weight 1: the gradient may alias another tensor's storage.
      Tensor buffer = mul(g, weight);
      all_reduce(buffer, ReduceOp::sum);
      g.assign(buffer);
      continue;
    }
    std::vector<Tensor> flat;
    flat.reserve(bucket.size());
    for (std::size_t i : bucket) flat.push_back(weighted(gradients[i], weight).reshape(Shape{-1}));
    Tensor buffer = concat(flat, 0);
    all_reduce(buffer, ReduceOp::sum);
    std::int64_t offset = 0;
    for (std::size_t i : bucket) {
      const Tensor& g = gradients[i];
      g.assign(buffer.slice(0, offset, offset + g.numel()).reshape(g.shape()));
      offset += g.numel();
    }
  }
}

}  // namespace mixprec::distributed::detail
