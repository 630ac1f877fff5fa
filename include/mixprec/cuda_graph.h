// CUDA graphs for a custom training loop: a whole training step, captured once and
// replayed, so that the host launches one graph instead of hundreds of kernels per step. fit()
// does the same on its own (MIXPREC_CUDA_GRAPHS=0 turns it off); this is the explicit tool.
//
// The seed's custom loop on a GPU, with the step captured after two eager steps:
//
//   #include <mixprec/mixprec.h>
//   #include <mixprec/cuda_graph.h>
//
//   auto optimizer = mp::mixed_precision::LossScaleOptimizer(mp::optimizers::RMSprop());
//   const mp::losses::SparseCategoricalCrossentropy loss_object;
//   const auto variables = model.trainable_variables();
//   // Fixed input buffers on the GPU: every batch is copied into them.
//   const mp::Tensor x = mp::zeros({256, 784}, {.device = mp::Device::cuda()});
//   const mp::Tensor y = mp::zeros({256}, {.dtype = mp::DType::int32, .device =
//   mp::Device::cuda()}); auto train_step = [&] {
//     mp::GradientTape tape;
//     auto loss = loss_object(y, model(x, {.training = true}));
//     auto grads = optimizer.get_unscaled_gradients(
//         tape.gradient(optimizer.get_scaled_loss(loss), variables));
//     optimizer.apply_gradients(grads, variables);  // skipped, scale halved, on Inf/NaN: on the
//     GPU
//   };
//   mp::cuda::Graph graph;
//   std::int64_t step = 0;
//   for (const auto& [xb, yb] : batches.next_epoch()) {
//     if (xb.dim(0) != 256) break;              // a graph has fixed shapes: the last batch differs
//     mp::cuda::copy_into(x, xb);               // enqueued on the GPU, no host wait
//     mp::cuda::copy_into(y, yb);
//     if (++step <= 2) {
//       train_step();                           // warm-up: slots, cuBLASLt plans, cuDNN algorithms
//     } else {
//       if (!graph.captured()) graph = mp::cuda::Graph::capture(mp::Device::cuda(), train_step);
//       graph.replay();                         // this batch's step (capture itself runs nothing)
//     }
//   }
//
// What a graph replays is the GPU work of the capture, with the addresses and the kernel arguments
// of the capture. So:
//  - inputs are fixed tensors the loop copies each batch into (copy_into), and variables,
//    optimizer slots and the loss-scale state are updated in place (as mixprec's optimizers do);
//  - host values are frozen at capture: a step whose host side changes between steps replays
//    the capture's values. mixprec's loss scaling keeps its decisions on the GPU (the skip, the
//    halving and the growth replay correctly), SGD and RMSprop with a constant learning rate have
//    the same update constants every step; Adam's and AdamW's bias correction, a learning-rate
//    schedule, clipnorm (it reads the norms back) and dropout's host-drawn keys change every step,
//    so do not capture those steps with this class: its replays would reuse the capture's values.
//    fit() replays them correctly (it records those values and rewrites them in device memory
//    before each replay: src/core/replay_parameters.h) and runs clipnorm eagerly. The host
//    counters of such state (optimizer.iterations()) do not advance on this class's replays;
//  - tensors the step creates (the loss, the new gradients) live in the graph's memory pool and
//    hold the latest replay's values; keep handles to the ones you read (capture them by reference
//    from the callable) and read them after replay() (a read waits for the GPU);
//  - the capture runs the callable's host code once and records its GPU work without running it:
//    replay() runs it, so the batch in the inputs at capture time is trained by the first replay.
//
// Memory: everything the step allocates during the capture comes from a pool reserved for the
// graph (PyTorch's graph pools work the same way); blocks of the pool are reused by nothing else
// while the graph lives, so replays allocate nothing and need no cuBLASLt or cuDNN workspace
// beyond the capture's. The pool goes back to the caching allocator when the graph is destroyed.
//
// On a CPU device, or in a build without the CUDA backend, capture() throws DeviceError ("CUDA
// graphs need a CUDA device"): a CPU loop calls its step directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "mixprec/device.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::cuda {

class Graph {
 public:
  // No graph: captured() is false, replay() throws.
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Runs `step` once on this thread with `device`'s compute stream capturing: its GPU work is
  // recorded, not run. Throws DeviceError when `device` is not a CUDA GPU that exists here, or when
  // the capture fails (the message says why: the step waited for the GPU, e.g. it read a value
  // back with item(); it allocated beyond the GPU's memory; `step` threw, its message included).
  // After a failure the GPU work of that call of `step` has not run, while its host side has
  // (e.g. the optimizer's iteration count): run the step eagerly from then on.
  static Graph capture(Device device, const std::function<void()>& step);

  bool captured() const;
  // Enqueues one run of the captured work on the device's compute stream; the host does not wait
  // (synchronize(device) or reading a result waits). Throws DeviceError without a graph.
  void replay();
  std::int64_t replays() const;
  // The graph's size (kernel, copy and memset nodes), for a look at what one step launches.
  std::size_t nodes() const;

  struct Memory {
    std::int64_t reserved_bytes = 0;  // the graph's pool
    std::int64_t allocations = 0;     // allocations the pool served (during the capture)
  };
  Memory memory() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `src` (the same shape; converted to dst's dtype; from any device) into `dst`'s storage in
// place: a new batch into a captured input. A copy from the CPU goes through the transfer path
// (Tensor::to); one on the same GPU is enqueued on its compute stream without a host wait.
void copy_into(const Tensor& dst, const Tensor& src);

}  // namespace mixprec::cuda

#pragma GCC visibility pop
