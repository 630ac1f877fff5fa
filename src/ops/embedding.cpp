// embedding_lookup (mixprec/transformer_ops.h): argument checks, one gather through the table's
// backend (NnKernels::embedding_gather), and the node whose backward is the deterministic
// scatter-add (NnKernels::embedding_scatter_add). ids are integers and get no gradient.
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/transformer_ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

struct EmbeddingBackward final : autograd::Node {
  Tensor ids;
  std::int64_t vocab = 0;
  DType table_dtype = DType::float32;

  std::vector<Tensor> backward(const Tensor& g) override {
    ops::check_same_device(name().c_str(), g, ids);
    return {
        backend_for(ids.device()).nn->embedding_scatter_add(g.detach(), ids, vocab, table_dtype)};
  }
  std::string name() const override { return "EmbeddingBackward"; }
  void release_saved() override { ids = Tensor(); }
};

}  // namespace

Tensor embedding_lookup(const Tensor& table, const Tensor& ids, DType out_dtype) {
  const char* op = "embedding_lookup";
  ops::check_floating(op, table);
  ops::check_defined(op, ids);
  if (table.rank() != 2) {
    throw ShapeError(std::string(op) + ": expected a table (input_dim, output_dim) of rank 2, " +
                     "got shape " + table.shape().to_string());
  }
  if (ids.dtype() != DType::int32 && ids.dtype() != DType::int64) {
    throw DTypeError(std::string(op) + ": ids must be int32 or int64, got " +
                     std::string(dtype_name(ids.dtype())) + " " + ids.shape().to_string() +
                     "; convert token ids with .to(mp::DType::int32) (floating ids are not "
                     "rounded implicitly)");
  }
  if (!is_floating(out_dtype)) {
    throw DTypeError(std::string(op) + ": out_dtype must be floating, got " +
                     std::string(dtype_name(out_dtype)));
  }
  if (table.dtype() != DType::float32 && table.dtype() != out_dtype) {
    throw DTypeError(std::string(op) + ": a " + std::string(dtype_name(table.dtype())) +
                     " table can only be read as " + std::string(dtype_name(table.dtype())) +
                     ", got out_dtype " + std::string(dtype_name(out_dtype)) +
                     "; keep the table in float32 (any out_dtype) or cast it first");
  }
  ops::check_same_device(op, table, ids);
  Tensor out = backend_for(table.device()).nn->embedding_gather(table, ids, out_dtype);
  if (!autograd::needs_record({&table})) return out;
  auto node = std::make_shared<EmbeddingBackward>();
  node->ids = autograd::fresh_copy(ids);  // the caller may reuse its ids buffer
  node->vocab = table.dim(0);
  node->table_dtype = table.dtype();
  return autograd::record(out, node, {table});
}

}  // namespace mixprec
