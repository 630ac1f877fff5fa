// The launcher's environment and the checks of a launch (src/distributed/launch_environment.h),
// with fake environments: the inconsistent launches without a launcher.
#include "distributed/launch_environment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mixprec/distributed/distributed.h"

namespace mixprec::distributed::detail {
namespace {

using Variables = std::map<std::string, std::string>;

LaunchEnvironment read(const Variables& variables) {
  return read_launch_environment([&](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

// The message of the DistributedError that `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const DistributedError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnvironment, NoLauncherIsAGroupOfOne) {
  const LaunchEnvironment env = read({{"PATH", "/usr/bin"}});
  EXPECT_FALSE(env.launched);
  EXPECT_EQ(env.size, 1);
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_FALSE(needs_mpi(env));
  EXPECT_NO_THROW(check_build_can_join(env, false));
}

TEST(LaunchEnvironment, ReadsOpenMpi) {
  const LaunchEnvironment env = read({{"OMPI_COMM_WORLD_SIZE", "4"},
                                      {"OMPI_COMM_WORLD_RANK", "3"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_TRUE(env.launched);
  EXPECT_EQ(env.size, 4);
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.size_variable, "OMPI_COMM_WORLD_SIZE");
  EXPECT_TRUE(needs_mpi(env));
}

TEST(LaunchEnvironment, ReadsPmiAndPmix) {
  const LaunchEnvironment pmi =
      read({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}, {"MPI_LOCALRANKID", "1"}});
  EXPECT_EQ(pmi.size, 2);
  EXPECT_EQ(pmi.rank, 1);
  EXPECT_EQ(pmi.local_rank, 1);
  EXPECT_EQ(pmi.size_variable, "PMI_SIZE");
  // PMIx alone does not say the size: MPI will, and MPI must be joined.
  const LaunchEnvironment pmix = read({{"PMIX_RANK", "5"}});
  EXPECT_TRUE(pmix.launched);
  EXPECT_EQ(pmix.size, -1);
  EXPECT_EQ(pmix.rank, 5);
  EXPECT_TRUE(needs_mpi(pmix));
}

TEST(LaunchEnvironment, OneProcessLeavesMpiAlone) {
  const LaunchEnvironment env =
      read({{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}});
  EXPECT_TRUE(env.launched);
  EXPECT_FALSE(needs_mpi(env));
  EXPECT_NO_THROW(check_build_can_join(env, false));
}

TEST(LaunchEnvironment, BrokenValuesAreNamed) {
  std::string message = error_of([] { read({{"OMPI_COMM_WORLD_SIZE", "two"}}); });
  EXPECT_NE(message.find("OMPI_COMM_WORLD_SIZE='two'"), std::string::npos) << message;
  message = error_of([] { read({{"OMPI_COMM_WORLD_SIZE", "0"}}); });
  EXPECT_NE(message.find("OMPI_COMM_WORLD_SIZE='0'"), std::string::npos) << message;
  message = error_of([] { read({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}}); });
  EXPECT_NE(message.find("rank 2 of 2"), std::string::npos) << message;
  message = error_of([] { read({{"PMI_SIZE", "2"}, {"PMI_RANK", "-1"}}); });
  EXPECT_NE(message.find("PMI_RANK='-1'"), std::string::npos) << message;
}

TEST(LaunchEnvironment, SeveralProcessesWithoutMpiIsAClearError) {
  const LaunchEnvironment env =
      read({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}});
  const std::string message = error_of([&] { check_build_can_join(env, false); });
  EXPECT_EQ(message,
            "launched with 2 processes (OMPI_COMM_WORLD_SIZE=2) but this build of mixprec has no "
            "MPI; install libopenmpi-dev and rebuild");
  EXPECT_NO_THROW(check_build_can_join(env, true));
}

TEST(LaunchEnvironment, MpiWorldMustMatchTheLauncher) {
  const LaunchEnvironment env =
      read({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}});
  EXPECT_NO_THROW(check_mpi_matches(env, 2, 1));
  std::string message = error_of([&] { check_mpi_matches(env, 1, 0); });
  EXPECT_NE(message.find("launched with 2 processes (OMPI_COMM_WORLD_SIZE=2) but MPI sees 1"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("singleton"), std::string::npos) << message;
  message = error_of([&] { check_mpi_matches(env, 2, 0); });
  EXPECT_NE(message.find("the launcher says rank 1 but MPI says 0"), std::string::npos) << message;
  // PMIx alone: MPI's size is the truth.
  EXPECT_NO_THROW(check_mpi_matches(read({{"PMIX_RANK", "0"}}), 3, 0));
}

}  // namespace
}  // namespace mixprec::distributed::detail
