// Saved casts of variables (autograd/saved_cast.h): the recipe and the scope that allows it.
#include "autograd/saved_cast.h"

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "core/tensor_impl.h"
#include "ops/cast.h"

namespace mixprec::autograd {

namespace {
thread_local int g_recast_depth = 0;
}  // namespace

RecastScope::RecastScope() { ++g_recast_depth; }
RecastScope::~RecastScope() { --g_recast_depth; }

bool recast_enabled() { return g_recast_depth > 0; }

Tensor SavedCast::recast() const {
  return backend_for(variable.device()).tensor->cast(variable.detach(), dtype);
}

std::optional<SavedCast> saved_cast_of(const Tensor& t) {
  if (!recast_enabled() || !t.defined()) return std::nullopt;
  const auto* cast = dynamic_cast<const ops::CastBackward*>(t.grad_fn().get());
  if (cast == nullptr || cast->next.size() != 1) return std::nullopt;
  const auto* leaf = dynamic_cast<const AccumulateGrad*>(cast->next[0].get());
  if (leaf == nullptr) return std::nullopt;
  std::shared_ptr<TensorImpl> variable = leaf->variable();
  if (!variable) return std::nullopt;
  Tensor v(std::move(variable));
  // The cast's output is a fresh contiguous tensor of the variable's shape; a view of it is not.
  if (v.shape() != t.shape() || !v.is_contiguous() || !t.is_contiguous() || t.offset() != 0 ||
      t.impl()->storage->nbytes() != t.nbytes()) {
    return std::nullopt;
  }
  return SavedCast{std::move(v), t.dtype()};
}

}  // namespace mixprec::autograd
