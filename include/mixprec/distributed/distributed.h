// Data-parallel training across processes (issue 15): the process group that a launcher started
// and the collectives on tensors. MPI (Open MPI's `mpirun`) starts the processes and carries the
// CPU collectives; between GPUs the collectives run on NCCL, one communicator per GPU bootstrapped
// over MPI. A program that is not started by a launcher is a group of one: every collective is the
// identity and nothing of MPI is touched, so the single-process path pays nothing.
//
//   mp::distributed::initialize();                 // once; reads what mpirun set in the
//   environment if (mp::distributed::rank() == 0) save(...);   // rank 0 writes files
//   mp::distributed::all_reduce(grad);             // sum over the ranks, in place
//
// fit() and the custom loop use these through mp::distributed::DataParallel (data_parallel.h).
#pragma once

#include <string>

#include "mixprec/error.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::distributed {

// A launch that cannot work (mpirun started N processes but MPI sees another number, a build
// without MPI started by mpirun with several processes, ranks that disagree), or a collective
// called with arguments that differ between ranks where that can be detected.
class DistributedError : public Error {
 public:
  using Error::Error;
};

enum class ReduceOp { sum, max, min };

// Whether this build of mixprec has MPI (Debian's libopenmpi-dev at build time), and NCCL (the
// CUDA toolkit's, for the collectives on GPU tensors).
bool built_with_mpi();
bool built_with_nccl();

// Joins the process group of the launcher (Open MPI's mpirun: OMPI_COMM_WORLD_SIZE/RANK/
// LOCAL_RANK; other MPI launchers: PMI_SIZE/PMI_RANK). Idempotent; cheap without a launcher (a
// group of one, MPI is not initialised). Throws DistributedError when the launch is inconsistent.
// MPI is finalised at process exit.
void initialize();
bool is_initialized();

// This process in the group: 0 .. world_size() - 1. Before initialize(): 0, 1, 0.
int rank();
int world_size();
int local_rank();  // among the processes on this machine (selects the GPU)

// One line: "rank 1 of 2 (local rank 1), MPI: Open MPI v4.1.4" or "single process (no launcher)".
std::string describe();

// Collectives, called by every rank in the same order with tensors of the same shape and dtype
// (float32, float16, bfloat16, float64, int32, int64). In place on the tensor's device: MPI for
// CPU tensors, NCCL for CUDA tensors. `t` must be contiguous. In a group of one they do nothing.
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum);
void broadcast(Tensor& t, int root = 0);
// A host scalar reduced over the ranks (counts, flags, metric totals).
double all_reduce(double value, ReduceOp op = ReduceOp::sum);
void barrier();

// Ends every process of the group with `exit_code` (MPI_Abort on mixprec's communicator), for a
// program's top-level error handler: a rank that fails alone (a file it cannot write, bad input)
// would otherwise leave the others waiting in their next collective for ever, and a normal exit
// would wait in MPI_Finalize for them. In a group of one it does nothing and returns, so the caller
// goes on to return its exit code as usual; the library itself never calls it.
void abort_group(int exit_code);

}  // namespace mixprec::distributed

#pragma GCC visibility pop
