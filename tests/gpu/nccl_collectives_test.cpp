// The CUDA backend's collectives over NCCL (src/backend/cuda/collectives.cpp) with one rank on one
// GPU: the communicator is created from a unique id without MPI, and ncclAllReduce/ncclBroadcast
// run on the GPU's compute stream for every dtype. With one rank a reduction is the identity, so
// the test checks the values come back unchanged after being queued between kernels on the same
// stream (a GPU value computed just before, read just after). A build without NCCL skips.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collectives.h"
#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

const Collectives* nccl_or_null() { return backend_for(kGpu).collectives; }

TEST(NcclCollectives, OneRankAllReduceAndBroadcastEveryDtype) {
  MIXPREC_REQUIRE_GPU();
  const Collectives* collectives = nccl_or_null();
  if (collectives == nullptr) GTEST_SKIP() << "this build has no NCCL";
  EXPECT_EQ(collectives->library().rfind("NCCL 2.", 0), 0u) << collectives->library();
  const Communicator group;  // rank 0 of 1, no MPI
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                      DType::int64}) {
    const Tensor host = arange(-20.0, 21.0, 1.0, {.dtype = dtype});
    for (distributed::ReduceOp op :
         {distributed::ReduceOp::sum, distributed::ReduceOp::max, distributed::ReduceOp::min}) {
      // Casts (exact for these values) are kernels queued just before and just after the
      // collective.
      Tensor gpu = on_gpu(host).to(DType::float64).to(dtype);
      collectives->all_reduce(group, gpu.data_ptr(), static_cast<std::size_t>(gpu.numel()),
                              gpu.dtype(), op, gpu.device());
      Tensor after = gpu.to(DType::float64);
      EXPECT_EQ(on_cpu(after).to_vector<double>(), host.to_vector<double>())
          << dtype_name(dtype) << " op " << static_cast<int>(op);
    }
    Tensor gpu = on_gpu(host);
    collectives->broadcast(group, gpu.data_ptr(), static_cast<std::size_t>(gpu.numel()),
                           gpu.dtype(), 0, gpu.device());
    EXPECT_EQ(on_cpu(gpu).to_vector<double>(), host.to_vector<double>()) << dtype_name(dtype);
  }
}

// The public API on a GPU tensor in a group of one: checks, then nothing to exchange.
TEST(NcclCollectives, PublicApiOnGpuTensorInAGroupOfOne) {
  MIXPREC_REQUIRE_GPU();
  if (distributed::world_size() > 1) GTEST_SKIP() << "a group of one only";
  Tensor gpu = on_gpu(from_vector(std::vector<float>{1, 2, 3}, {3}));
  distributed::all_reduce(gpu);
  distributed::broadcast(gpu, 0);
  EXPECT_EQ(on_cpu(gpu).to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace mixprec::testing
