// What the launcher says about this process, read from the environment (Open MPI's mpirun:
// OMPI_COMM_WORLD_SIZE/RANK/LOCAL_RANK; MPICH/Hydra and Intel MPI: PMI_SIZE/PMI_RANK,
// MPI_LOCALRANKID; a PMIx launcher such as srun --mpi=pmix: PMIX_RANK), and the checks of a launch
// against the build and against what MPI reports. Pure functions of their arguments, so that the
// inconsistent launches are testable without a launcher (tests/distributed/).
#pragma once

#include <functional>
#include <string>

namespace mixprec::distributed::detail {

struct LaunchEnvironment {
  bool launched = false;  // a launcher variable is set
  int size = 1;           // -1: the launcher does not say (PMIx alone); MPI will
  int rank = 0;
  int local_rank = 0;
  std::string size_variable;  // where `size` came from, for messages: "OMPI_COMM_WORLD_SIZE"
};

// `getenv` returns the variable's value or nullptr (std::getenv in the library). Throws
// DistributedError for a value that is not a number in range.
LaunchEnvironment read_launch_environment(const std::function<const char*(const char*)>& getenv);

// Whether this process must join an MPI group: launched with more than one process, or with an
// unknown number. A launch of one process is a group of one that leaves MPI alone.
bool needs_mpi(const LaunchEnvironment& env);

// Throws DistributedError when the launcher started several processes and this build has no MPI.
void check_build_can_join(const LaunchEnvironment& env, bool built_with_mpi);

// Throws DistributedError when MPI's world differs from the launcher's (a program linked against
// another MPI than the launcher's sees itself as a singleton: size 1).
void check_mpi_matches(const LaunchEnvironment& env, int mpi_size, int mpi_rank);

}  // namespace mixprec::distributed::detail
