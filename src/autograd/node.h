// Autograd graph nodes. A recorded op creates one Node holding what its backward needs; the node's
// edges point at the nodes of its inputs (their grad_fn, or the accumulator of a leaf variable).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mixprec/tensor.h"

namespace mixprec::autograd {

class Node {
 public:
  virtual ~Node() = default;
  // Gradients with respect to each input (one per edge, same order), given the gradient of the
  // output. An entry may be undefined when that input needs no gradient.
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors once backward has run (unless the graph is retained).
  virtual void release_saved() {}
  // Set once backward has run with the graph released: a second pass through this node cannot
  // work (its saved tensors are gone) and is refused with a clear error.
  bool released = false;

  // One edge per input; a null edge means that input needs no gradient.
  std::vector<std::shared_ptr<Node>> next;
  // Geometry of the output, to check incoming gradients and to make zero gradients.
  Shape output_shape;
  DType output_dtype = DType::float32;
};

// The sink of a leaf variable: adds the incoming gradient into the variable's .grad().
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& variable) : variable_(variable) {}
  std::vector<Tensor> backward(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> variable() const { return variable_.lock(); }

 private:
  std::weak_ptr<TensorImpl> variable_;  // weak: the variable owns this node, not the reverse
};

// A new contiguous tensor with the values of `t` and no autograd state: gradients handed out to
// the user (.grad(), grad()) are their own tensors, never aliases of one another or of a tensor
// the caller passed in, so in-place updates of one (unscaling, clipping) cannot change another.
Tensor fresh_copy(const Tensor& t);

// True when `t` is a plain contiguous tensor whose handle and storage nobody else holds (no view,
// no other handle, no autograd state): a gradient that can be handed out without a copy.
bool sole_handle(const Tensor& t);

// True when an op on these inputs must be recorded.
bool needs_record(std::initializer_list<const Tensor*> inputs);
bool needs_record(const std::vector<Tensor>& inputs);
// The edge an op takes to `input`: its grad_fn, its leaf accumulator, or null.
std::shared_ptr<Node> edge_to(const Tensor& input);
// Connects `node` to `inputs` and makes it the grad_fn of `output` when recording is needed;
// returns `output`. Call with every tensor input of the op, in the order backward returns grads.
Tensor record(Tensor output, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs);

}  // namespace mixprec::autograd
