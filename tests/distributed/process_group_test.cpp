// The process group (mixprec::distributed) as any rank sees it, and as a group of one: without a
// launcher a program is rank 0 of 1, MPI is never touched and every collective is the identity
// after the same argument checks as with several processes.
#include "distributed/process_group.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collectives.h"
#include "mixprec/creation.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/ops.h"

namespace mixprec::distributed {
namespace {

#define SKIP_UNLESS_GROUP_OF_ONE() \
  if (world_size() > 1) GTEST_SKIP() << "a group of one only (this run has " << world_size() << ")"

TEST(ProcessGroup, InitializeIsIdempotentAndRanksAreInRange) {
  initialize();  // main() did it once already
  EXPECT_TRUE(is_initialized());
  EXPECT_GE(world_size(), 1);
  EXPECT_GE(rank(), 0);
  EXPECT_LT(rank(), world_size());
  EXPECT_GE(local_rank(), 0);
  EXPECT_LT(local_rank(), world_size());
}

TEST(ProcessGroup, GroupOfOneLeavesMpiAlone) {
  SKIP_UNLESS_GROUP_OF_ONE();
  EXPECT_EQ(rank(), 0);
  EXPECT_EQ(local_rank(), 0);
  EXPECT_FALSE(detail::mpi_initialized());
  EXPECT_EQ(detail::group().size, 1);
  EXPECT_EQ(detail::group().mpi_handle, 0);
  EXPECT_NE(describe().find("single process"), std::string::npos) << describe();
}

TEST(ProcessGroup, GroupOfOneCollectivesAreTheIdentity) {
  SKIP_UNLESS_GROUP_OF_ONE();
  Tensor t = from_vector(std::vector<float>{1.5f, -2.0f, 3.25f}, {3});
  all_reduce(t, ReduceOp::sum);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  all_reduce(t, ReduceOp::max);
  broadcast(t, 0);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(all_reduce(2.5, ReduceOp::sum), 2.5);
  EXPECT_EQ(all_reduce(-1.0, ReduceOp::min), -1.0);
  barrier();
  EXPECT_FALSE(detail::mpi_initialized());
}

TEST(ProcessGroup, DescribeNamesRankAndLibrary) {
  const std::string text = describe();
  if (world_size() == 1) {
    EXPECT_TRUE(text == "single process (no launcher)" ||
                text == "single process (launched with 1 process)")
        << text;
  } else {
    const std::string head = "rank " + std::to_string(rank()) + " of " +
                             std::to_string(world_size()) + " (local rank " +
                             std::to_string(local_rank()) + ")";
    EXPECT_EQ(text.rfind(head, 0), 0u) << text;
    EXPECT_NE(text.find(", MPI: "), std::string::npos) << text;
  }
}

// Checks every rank makes alone, before anything is exchanged: the same in a group of one.
TEST(ProcessGroup, BadArgumentsAreRefusedOnEveryRank) {
  Tensor matrix = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor transposed = transpose(matrix, 0, 1);
  ASSERT_FALSE(transposed.is_contiguous());
  try {
    all_reduce(transposed);
    FAIL() << "no DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("contiguous"), std::string::npos) << e.what();
  }
  Tensor flags = zeros({4}, {.dtype = DType::bool_});
  try {
    all_reduce(flags);
    FAIL() << "no DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reduce a bool tensor"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(broadcast(flags, 0));  // a broadcast moves any dtype's bits
  try {
    broadcast(matrix, world_size());
    FAIL() << "no DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a rank"), std::string::npos) << e.what();
  }
  Tensor undefined;
  EXPECT_THROW(all_reduce(undefined), DistributedError);
  EXPECT_THROW(broadcast(matrix, -1), DistributedError);
}

// The collectives are a nullable capability of the backend: present exactly when the build has
// the device's collective library.
TEST(ProcessGroup, BackendCollectivesExactlyWhenBuilt) {
  const Backend& cpu = backend_for(Device::cpu());
  EXPECT_EQ(cpu.collectives != nullptr, built_with_mpi());
  if (cpu.collectives != nullptr) {
    EXPECT_NE(cpu.collectives->all_reduce, nullptr);
    EXPECT_NE(cpu.collectives->broadcast, nullptr);
    EXPECT_NE(cpu.collectives->library().find("MPI"), std::string::npos)
        << cpu.collectives->library();
  }
  const Backend* cuda = find_backend(DeviceType::cuda);
  if (cuda == nullptr) {
    EXPECT_FALSE(built_with_nccl());
  } else {
    EXPECT_EQ(cuda->collectives != nullptr, built_with_nccl());
    if (cuda->collectives != nullptr) {
      EXPECT_EQ(cuda->collectives->library().rfind("NCCL 2.", 0), 0u)
          << cuda->collectives->library();
    }
  }
}

}  // namespace
}  // namespace mixprec::distributed
