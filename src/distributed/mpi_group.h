// The MPI side of the process group: joining the launcher's MPI world, finalising it at exit, and
// the host-side exchanges of the group (barrier, scalar all-reduce, byte broadcast, the check that
// every rank calls the same collective). Compiled only in a build with MPI
// (CMakeLists.txt: MIXPREC_HAVE_MPI); process_group.cpp calls it only then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/collectives.h"
#include "mixprec/distributed/distributed.h"

namespace mixprec::distributed::detail {

// Initialises MPI (MPI_Init_thread, MPI_THREAD_SERIALIZED) unless the program already did, and
// returns the group of a private duplicate of MPI_COMM_WORLD (local_rank: the rank among the
// processes that share this machine's memory). When mixprec initialised MPI it finalises it at
// exit (atexit), unless it is finalised already.
Communicator join_mpi_world();

// Whether MPI is initialised in this process (whoever did it), for the tests' "no MPI touched".
bool mpi_is_initialized();

void mpi_barrier(const Communicator& group);
// MPI_Abort on the group's communicator: ends every process of the job.
void mpi_abort(const Communicator& group, int exit_code);
double mpi_all_reduce(const Communicator& group, double value, ReduceOp op);
void mpi_host_broadcast(const Communicator& group, void* data, std::size_t bytes, int root);

// What a rank is about to do, compared across the ranks before a collective on tensors.
struct CollectiveCall {
  enum Kind : std::int64_t { all_reduce, broadcast, scalar_all_reduce };
  Kind kind = all_reduce;
  std::int64_t device_type = 0;  // DeviceType
  std::int64_t dtype = 0;        // DType
  std::int64_t count = 0;
  std::int64_t op_or_root = 0;  // the ReduceOp, or the broadcast's root
};

// One small all-reduce (max of the fields and of their negations): throws DistributedError on
// every rank, naming the field and its range, when the ranks' calls differ. Never hangs on a
// mismatch of these fields: every rank takes part in the same check.
void mpi_check_same_call(const Communicator& group, const CollectiveCall& call);

}  // namespace mixprec::distributed::detail
