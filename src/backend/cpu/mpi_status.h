// The two MPI helpers that the CPU collectives (cpu/collectives.cpp) and the process group
// (src/distributed/mpi_group.cpp) share: the MPI communicator behind a Communicator handle, and an
// MPI return code turned into a DistributedError naming the call. Included only by files compiled
// with MPI (CMakeLists.txt: MIXPREC_HAVE_MPI).
#pragma once

#include <mpi.h>

#include <string>

#include "backend/collectives.h"
#include "mixprec/distributed/distributed.h"

namespace mixprec::cpu {

inline MPI_Comm comm_of(const Communicator& group) {
  return MPI_Comm_f2c(static_cast<MPI_Fint>(group.mpi_handle));
}

// Throws DistributedError("<what> failed: <MPI's text>") unless status is MPI_SUCCESS.
inline void check_mpi(int status, const char* what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw distributed::DistributedError(std::string(what) + " failed: " + std::string(text, length));
}

}  // namespace mixprec::cpu
