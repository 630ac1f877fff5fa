// The MPI side of the process group (mpi_group.h).
#include "distributed/mpi_group.h"

#include <mpi.h>

#include <array>
#include <cstdlib>
#include <string>

#include "backend/cpu/mpi_status.h"

namespace mixprec::distributed::detail {
namespace {

using cpu::check_mpi;
using cpu::comm_of;

// Registered with atexit by join_mpi_world() when mixprec initialised MPI. Tolerates a program
// that finalised MPI itself.
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  throw DistributedError("all_reduce: unknown reduce op");
}

}  // namespace

bool mpi_is_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

Communicator join_mpi_world() {
  if (!mpi_is_initialized()) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
              "MPI_Init_thread");
    std::atexit(finalize_at_exit);
  }
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  // On mixprec's own communicator errors come back as codes (turned into DistributedError)
  // instead of aborting every rank; the program's MPI_COMM_WORLD keeps its handler.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  Communicator group;
  MPI_Comm_rank(comm, &group.rank);
  MPI_Comm_size(comm, &group.size);
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, group.rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  MPI_Comm_rank(node, &group.local_rank);
  MPI_Comm_free(&node);
  group.mpi_handle = MPI_Comm_c2f(comm);
  group.host_broadcast = mpi_host_broadcast;
  return group;
}

void mpi_barrier(const Communicator& group) {
  check_mpi(MPI_Barrier(comm_of(group)), "MPI_Barrier");
}

void mpi_abort(const Communicator& group, int exit_code) { MPI_Abort(comm_of(group), exit_code); }

double mpi_all_reduce(const Communicator& group, double value, ReduceOp op) {
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, mpi_op(op), comm_of(group)),
            "MPI_Allreduce");
  return value;
}

void mpi_host_broadcast(const Communicator& group, void* data, std::size_t bytes, int root) {
  check_mpi(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_of(group)), "MPI_Bcast");
}

namespace {

const char* kind_name(std::int64_t kind) {
  switch (kind) {
    case CollectiveCall::all_reduce: return "all_reduce";
    case CollectiveCall::broadcast: return "broadcast";
    default: return "all_reduce of a scalar";
  }
}

// A field of a CollectiveCall in words: the dtype and device kind by name.
std::string field_value(int field, std::int64_t value) {
  switch (field) {
    case 0: return kind_name(value);
    case 1: return static_cast<DeviceType>(value) == DeviceType::cpu ? "cpu" : "cuda";
    case 2: return std::string(dtype_name(static_cast<DType>(value)));
    default: return std::to_string(value);
  }
}

}  // namespace

void mpi_check_same_call(const Communicator& group, const CollectiveCall& call) {
  constexpr int kFields = 5;
  const std::array<std::int64_t, kFields> mine = {call.kind, call.device_type, call.dtype,
                                                  call.count, call.op_or_root};
  static constexpr std::array<const char*, kFields> kWhat = {"collective", "device", "dtype",
                                                             "element count", "reduce op or root"};
  std::array<std::int64_t, 2 * kFields> range{};
  for (int i = 0; i < kFields; ++i) {
    range[i] = mine[i];
    range[kFields + i] = -mine[i];
  }
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, range.data(), 2 * kFields, MPI_INT64_T, MPI_MAX, comm_of(group)),
      "MPI_Allreduce");
  for (int i = 0; i < kFields; ++i) {
    const std::int64_t high = range[i];
    const std::int64_t low = -range[kFields + i];
    if (high == low) continue;
    throw DistributedError(std::string(kind_name(call.kind)) + " on rank " +
                           std::to_string(group.rank) + ": the ranks disagree on the " + kWhat[i] +
                           " (" + field_value(i, low) + " .. " + field_value(i, high) +
                           ", this rank " + field_value(i, mine[i]) +
                           "); every rank must call the same collectives in the same order with "
                           "tensors of the same shape and dtype");
  }
}

}  // namespace mixprec::distributed::detail
