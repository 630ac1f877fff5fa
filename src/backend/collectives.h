// Collectives of one device kind: all-reduce and broadcast of a contiguous buffer across the
// processes of the group, the device services that mixprec::distributed (src/distributed/) calls
// for the tensors of that device:
//
//   const Collectives* c = backend_for(t.device()).collectives;     // nullptr: none on this device
//   c->all_reduce(group, t.data_ptr(), t.numel(), t.dtype(), ReduceOp::sum, t.device());
//
// The CPU runs them over MPI (src/backend/cpu/collectives.cpp), a CUDA GPU over NCCL
// (src/backend/cuda/collectives.cpp: one NCCL communicator per GPU, created on first use from an
// ncclUniqueId that rank 0 sends over the group's host broadcast, and the calls queued on the
// GPU's compute stream). `Backend::collectives` is a nullable capability: it is null in a build
// without MPI (CPU) or without NCCL (CUDA), and the process group then refuses a collective on
// that device with a DistributedError, unless the group has one process (nothing to exchange).
//
// Every entry is called by every rank of the group, in the same order, with the same count, dtype,
// op and root (the process group checks that before calling). float16 and bfloat16 are reduced in
// float32 (converted, reduced, rounded back once) where the library has no 16-bit reduction (MPI);
// NCCL reduces them natively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mixprec/device.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/dtype.h"

namespace mixprec {

// The process group as the collectives see it: made by the process group once it has joined the
// launcher's group (src/distributed/process_group.cpp). No MPI type appears here: `mpi_handle` is
// the group's MPI communicator as MPI_Comm_c2f gives it (MPI_Comm_f2c turns it back), 0 in a group
// of one without MPI.
struct Communicator {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::int64_t mpi_handle = 0;
  // Sends `bytes` bytes at `data` from `root` to every rank (host memory). What a device backend
  // uses to bootstrap its own communicator (the NCCL unique id). Never null when size > 1.
  void (*host_broadcast)(const Communicator& group, void* data, std::size_t bytes,
                         int root) = nullptr;
};

struct Collectives {
  // In place: `data` (count elements of `dtype`, contiguous, on `device` of this backend's kind)
  // becomes the reduction over the ranks, the same on every rank. Returns when the result is
  // ready to be read by the device's later work (CPU: in memory; CUDA: queued on the compute
  // stream). Throws DistributedError for a dtype the library cannot reduce, or when the library
  // call fails.
  void (*all_reduce)(const Communicator& group, void* data, std::size_t count, DType dtype,
                     distributed::ReduceOp op, Device device) = nullptr;
  // In place: every rank's `data` becomes `root`'s.
  void (*broadcast)(const Communicator& group, void* data, std::size_t count, DType dtype, int root,
                    Device device) = nullptr;
  // The library behind them, for describe(): "Open MPI v4.1.4", "NCCL 2.21.5".
  std::string (*library)() = nullptr;
};

}  // namespace mixprec
