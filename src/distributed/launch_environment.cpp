// The launcher's environment and the checks of a launch (launch_environment.h).
#include "distributed/launch_environment.h"

#include <charconv>
#include <string>

#include "mixprec/distributed/distributed.h"

namespace mixprec::distributed::detail {
namespace {

// The first of `names` that is set: its value parsed, `found` set to its name. `fallback` if none.
int read_int(const std::function<const char*(const char*)>& getenv,
             std::initializer_list<const char*> names, int minimum, int fallback,
             std::string* found = nullptr) {
  for (const char* name : names) {
    const char* text = getenv(name);
    if (text == nullptr) continue;
    const std::string value(text);
    int parsed = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (error != std::errc() || end != value.data() + value.size() || parsed < minimum) {
      throw DistributedError(std::string(name) + "='" + value + "' is not " +
                             (minimum > 0 ? "a positive" : "a non-negative") +
                             " integer: the launcher's environment is broken");
    }
    if (found != nullptr) *found = name;
    return parsed;
  }
  return fallback;
}

}  // namespace

LaunchEnvironment read_launch_environment(const std::function<const char*(const char*)>& getenv) {
  LaunchEnvironment env;
  env.size = read_int(getenv, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1, -1, &env.size_variable);
  const bool pmix = getenv("PMIX_RANK") != nullptr;
  env.launched = env.size != -1 || pmix;
  if (!env.launched) {
    env.size = 1;
    return env;
  }
  env.rank = read_int(getenv, {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}, 0, 0);
  env.local_rank =
      read_int(getenv, {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, 0, 0);
  if (env.size != -1 && env.rank >= env.size) {
    throw DistributedError("the launcher says rank " + std::to_string(env.rank) + " of " +
                           std::to_string(env.size) + " processes (" + env.size_variable +
                           "): the rank is out of range");
  }
  return env;
}

bool needs_mpi(const LaunchEnvironment& env) { return env.launched && env.size != 1; }

void check_build_can_join(const LaunchEnvironment& env, bool built_with_mpi) {
  if (!needs_mpi(env) || built_with_mpi) return;
  const std::string n = env.size == -1 ? std::string("several") : std::to_string(env.size);
  const std::string where =
      env.size == -1 ? std::string("PMIX_RANK is set") : env.size_variable + "=" + n;
  throw DistributedError("launched with " + n + " processes (" + where +
                         ") but this build of mixprec has no MPI; install libopenmpi-dev and "
                         "rebuild");
}

void check_mpi_matches(const LaunchEnvironment& env, int mpi_size, int mpi_rank) {
  if (env.size != -1 && mpi_size != env.size) {
    throw DistributedError(
        "launched with " + std::to_string(env.size) + " processes (" + env.size_variable + "=" +
        std::to_string(env.size) + ") but MPI sees " + std::to_string(mpi_size) +
        (mpi_size == 1 ? " (a singleton)" : "") +
        ": mixprec's MPI library is not the launcher's; use the mpirun of the MPI that mixprec "
        "was built with");
  }
  if (env.size != -1 && mpi_rank != env.rank) {
    throw DistributedError("the launcher says rank " + std::to_string(env.rank) + " but MPI says " +
                           std::to_string(mpi_rank) +
                           ": mixprec's MPI library is not the launcher's");
  }
}

}  // namespace mixprec::distributed::detail
