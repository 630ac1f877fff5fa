// The CUDA backend's collectives (backend/collectives.h) over NCCL: ncclAllReduce and
// ncclBroadcast queued on the GPU's compute stream, so they are ordered after the kernels that
// produced the buffer and before those that read it, without a host wait. Compiled only in a
// build that found NCCL (CMakeLists.txt: MIXPREC_HAVE_NCCL); without it the CUDA backend's
// `collectives` is null.
//
// One NCCL communicator per GPU of this process, created on the first collective on that GPU:
// rank 0 makes an ncclUniqueId and sends it to the others over the group's host broadcast (MPI),
// then every rank calls ncclCommInitRank. That first call is collective: every rank must make it
// (they do: each calls the same collectives in the same order). The communicators live until the
// process exits: destroying them from an exit handler could run after the CUDA runtime's own
// teardown. float16 and bfloat16 are reduced natively by NCCL (in their own precision).
#include "backend/collectives.h"

#include <nccl.h>

#include <map>
#include <mutex>
#include <string>

#include "backend/cuda/context.h"

namespace mixprec::cuda {
namespace {

using distributed::DistributedError;
using distributed::ReduceOp;

void check_nccl(ncclResult_t status, const char* what) {
  if (status == ncclSuccess) return;
  throw DistributedError(std::string(what) + " failed: " + ncclGetErrorString(status));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  throw DistributedError("all_reduce: unknown reduce op");
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return ncclFloat32;
    case DType::float16: return ncclFloat16;
    case DType::bfloat16: return ncclBfloat16;
    case DType::float64: return ncclFloat64;
    case DType::int32: return ncclInt32;
    case DType::int64: return ncclInt64;
    default:
      throw DistributedError(std::string("all_reduce: dtype ") + std::string(dtype_name(dtype)) +
                             " is not supported over NCCL");
  }
}

// The communicator of GPU `index`, created on first use (the caller holds the device current).
ncclComm_t communicator(const Communicator& group, int index) {
  static std::mutex mutex;
  static std::map<int, ncclComm_t> communicators;
  std::lock_guard lock(mutex);
  if (const auto found = communicators.find(index); found != communicators.end()) {
    return found->second;
  }
  ncclUniqueId id{};
  if (group.rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (group.size > 1) {
    if (group.host_broadcast == nullptr) {
      throw DistributedError("NCCL: the process group has no host broadcast to share its id");
    }
    group.host_broadcast(group, &id, sizeof(id), 0);
  }
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, group.size, id, group.rank), "ncclCommInitRank");
  communicators.emplace(index, comm);
  return comm;
}

void all_reduce(const Communicator& group, void* data, std::size_t count, DType dtype, ReduceOp op,
                Device device) {
  if (count == 0) return;
  const ncclDataType_t type = nccl_type(dtype);
  const StreamScope scope(device);
  check_nccl(ncclAllReduce(data, data, count, type, nccl_op(op), communicator(group, scope.index()),
                           scope.stream()),
             "ncclAllReduce");
}

void broadcast(const Communicator& group, void* data, std::size_t count, DType dtype, int root,
               Device device) {
  const std::size_t bytes = count * dtype_size(dtype);
  if (bytes == 0) return;
  const StreamScope scope(device);
  check_nccl(ncclBroadcast(data, data, bytes, ncclUint8, root, communicator(group, scope.index()),
                           scope.stream()),
             "ncclBroadcast");
}

std::string library() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         "." + std::to_string(version % 100);
}

}  // namespace

extern const Collectives kCollectives;
const Collectives kCollectives{
    .all_reduce = all_reduce, .broadcast = broadcast, .library = library};

}  // namespace mixprec::cuda
