// CapturedGraph (graph.h): stream capture into a private pool, instantiate, replay.
#include "backend/cuda/graph.h"

#include <exception>
#include <string>

#include "backend/cuda/context.h"
#include "backend/cuda/host_waits.h"
#include "backend/cuda/replay_words.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

std::string cuda_text(cudaError_t status) {
  return std::string(cudaGetErrorString(status)) + " (" + cudaGetErrorName(status) + ")";
}

std::string exception_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

bool compute_stream_capturing(Device device) {
  if (!device.is_cuda() || device.index < 0 || device.index >= visible_device_count()) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(context(device.index).compute, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

std::unique_ptr<CapturedGraph> CapturedGraph::capture(Device device,
                                                      const std::function<void()>& body) {
  const int index = require_device(device);
  DeviceGuard guard(index);
  const cudaStream_t stream = context(index).compute;
  const PoolId pool = create_graph_pool(device);
  begin_graph_pool(device, pool);
  const cudaError_t begin = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (begin != cudaSuccess) {
    (void)cudaGetLastError();
    end_graph_pool(device);
    release_graph_pool(device, pool);
    throw DeviceError("CUDA graph capture could not start on " + device.to_string() + ": " +
                      cuda_text(begin));
  }
  std::exception_ptr error;
  try {
    body();
  } catch (...) {
    error = std::current_exception();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  end_graph_pool(device);
  if (error || end != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();  // a capture error is not sticky: clear it
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    // Nothing captured ran: no work is pending on the pool's blocks.
    release_graph_pool(device, pool);
    const std::string why = error                ? exception_text(error)
                            : end != cudaSuccess ? cuda_text(end)
                                                 : std::string("the capture recorded no graph");
    throw DeviceError("CUDA graph capture failed on " + device.to_string() + ": " + why);
  }
  std::size_t nodes = 0;
  if (cudaGraphGetNodes(graph, nullptr, &nodes) != cudaSuccess) (void)cudaGetLastError();
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  if (inst != cudaSuccess || exec == nullptr) {
    (void)cudaGetLastError();
    release_graph_pool(device, pool);
    throw DeviceError("CUDA graph instantiation failed on " + device.to_string() + ": " +
                      cuda_text(inst));
  }
  std::unique_ptr<CapturedGraph> captured(new CapturedGraph());
  captured->device_ = device;
  captured->exec_ = exec;
  captured->pool_ = pool;
  captured->nodes_ = nodes;
  return captured;
}

CapturedGraph::~CapturedGraph() {
  DeviceGuard guard(device_.index);
  // Queued replays read and write the pool's blocks: wait for them before the pool is shared.
  count_host_wait();
  if (cudaStreamSynchronize(context(device_.index).compute) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  release_graph_pool(device_, pool_);
}

void CapturedGraph::replay() {
  DeviceGuard guard(device_.index);
  check(cudaGraphLaunch(exec_, context(device_.index).compute), "cudaGraphLaunch");
  ++replays_;
}

void write_replay_words(Device device, std::uint64_t* dst, const std::uint64_t* words,
                        std::size_t count) {
  if (count == 0) return;
  if (count > kReplayWords) {
    throw ValueError("write_replay_words: " + std::to_string(count) + " words, at most " +
                     std::to_string(kReplayWords));
  }
  kernels::ReplayWords table{};
  for (std::size_t i = 0; i < count; ++i) table.words[i] = words[i];
  StreamScope scope(device);
  kernels::write_replay_words(dst, table, static_cast<int>(count), scope.stream());
}

}  // namespace mixprec::cuda
