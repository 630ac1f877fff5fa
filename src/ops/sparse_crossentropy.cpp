#include "ops/sparse_crossentropy.h"

#include <memory>
#include <string>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec::ops {

namespace {

constexpr const char* kName = "sparse_softmax_crossentropy";

struct SparseCrossentropyBackward final : autograd::Node {
  Tensor logits;     // (R, V) contiguous, the forward's input dtype
  Tensor labels;     // (R) contiguous int64
  Tensor row_stats;  // (R, 2) compute type
  Tensor count;      // 0-d compute type
  std::int64_t ignore = kNoIgnoredClass;
  Shape shape;  // the logits' shape as the op received them
  std::vector<Tensor> backward(const Tensor& g) override {
    check_same_device(kName, g, logits);
    // The loss's gradient, a 0-d value in the compute type on the device (never read back).
    const Tensor g_c = g.detach().to(count.dtype()).contiguous();
    const Tensor dx =
        backend_for(g.device())
            .tensor->sparse_crossentropy_backward(logits, labels, ignore, row_stats, count, g_c);
    return {reshape(dx, shape)};
  }
  std::string name() const override { return "SparseCrossentropyBackward"; }
  void release_saved() override {
    logits = Tensor(), labels = Tensor(), row_stats = Tensor(), count = Tensor();
  }
};

}  // namespace

Tensor sparse_softmax_crossentropy(const Tensor& logits, const Tensor& labels,
                                   std::optional<std::int64_t> ignore_class) {
  check_floating(kName, logits);
  check_same_device(kName, logits, labels);
  if (logits.rank() < 1) {
    throw ShapeError(std::string(kName) + ": logits must have a class axis last, got shape " +
                     logits.shape().to_string());
  }
  const std::int64_t classes = logits.shape()[logits.rank() - 1];
  const std::int64_t rows = classes == 0 ? 0 : logits.numel() / classes;
  if (labels.numel() != rows) {
    throw ShapeError(std::string(kName) + ": " + std::to_string(labels.numel()) +
                     " labels for logits of shape " + logits.shape().to_string() +
                     "; expected one label per row (" + std::to_string(rows) + ")");
  }
  const std::int64_t ignore = ignore_class.value_or(kNoIgnoredClass);
  // (R, V) and (R): views where the tensors are contiguous already.
  const Tensor x = reshape(logits.detach().contiguous(), Shape{rows, classes});
  const Tensor y = reshape(labels.detach().to(DType::int64).contiguous(), Shape{rows});
  SparseCrossentropyForward f =
      backend_for(logits.device()).tensor->sparse_crossentropy_forward(x, y, ignore);
  if (!autograd::needs_record({&logits})) return f.loss;
  auto node = std::make_shared<SparseCrossentropyBackward>();
  node->logits = x;
  node->labels = y;
  node->row_stats = std::move(f.row_stats);
  node->count = std::move(f.count);
  node->ignore = ignore;
  node->shape = logits.shape();
  return autograd::record(f.loss, node, {logits});
}

}  // namespace mixprec::ops
