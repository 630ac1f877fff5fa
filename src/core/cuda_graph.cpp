// mixprec::cuda::Graph (include/mixprec/cuda_graph.h): the public face of cuda::CapturedGraph
// (src/backend/cuda/graph.h). A build without the CUDA backend has no GPU: capture() throws
// DeviceError there, as it does for a CPU device.
#include "mixprec/cuda_graph.h"

#include <string>
#include <utility>

#include "mixprec/error.h"

#if MIXPREC_HAVE_CUDA
#include "backend/cuda/graph.h"
#endif

namespace mixprec::cuda {

struct Graph::Impl {
#if MIXPREC_HAVE_CUDA
  std::unique_ptr<CapturedGraph> graph;
#endif
};

Graph::Graph() = default;
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

Graph Graph::capture(Device device, const std::function<void()>& step) {
  if (!device.is_cuda()) {
    throw DeviceError("mixprec::cuda::Graph::capture: CUDA graphs need a CUDA device, got " +
                      device.to_string() + "; on the CPU call the step directly");
  }
  if (!step) throw ValueError("mixprec::cuda::Graph::capture: the step is empty");
#if MIXPREC_HAVE_CUDA
  Graph g;
  g.impl_ = std::make_unique<Impl>();
  g.impl_->graph = CapturedGraph::capture(device, step);
  return g;
#else
  throw DeviceError(
      "mixprec::cuda::Graph::capture: this build of mixprec has no CUDA backend (built without "
      "the CUDA toolkit), so " +
      device.to_string() + " does not exist");
#endif
}

bool Graph::captured() const {
#if MIXPREC_HAVE_CUDA
  return impl_ && impl_->graph;
#else
  return false;
#endif
}

void Graph::replay() {
  if (!captured()) {
    throw DeviceError("mixprec::cuda::Graph::replay: no graph was captured (Graph::capture first)");
  }
#if MIXPREC_HAVE_CUDA
  impl_->graph->replay();
#endif
}

std::int64_t Graph::replays() const {
#if MIXPREC_HAVE_CUDA
  if (captured()) return impl_->graph->replays();
#endif
  return 0;
}

std::size_t Graph::nodes() const {
#if MIXPREC_HAVE_CUDA
  if (captured()) return impl_->graph->nodes();
#endif
  return 0;
}

Graph::Memory Graph::memory() const {
  Memory m;
#if MIXPREC_HAVE_CUDA
  if (captured()) {
    const PrivatePoolStats s = impl_->graph->pool_stats();
    m.reserved_bytes = s.reserved_bytes;
    m.allocations = s.allocations;
  }
#endif
  return m;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  if (!dst.defined() || !src.defined()) {
    throw ValueError("mixprec::cuda::copy_into: both tensors must be defined");
  }
  dst.assign(src.device() == dst.device() ? src : src.to(dst.device()));
}

}  // namespace mixprec::cuda
