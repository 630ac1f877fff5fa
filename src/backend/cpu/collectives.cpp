// The CPU's collectives (backend/collectives.h) over MPI: MPI_Allreduce and MPI_Bcast on the
// group's communicator. Compiled only in a build with MPI (CMakeLists.txt: MIXPREC_HAVE_MPI);
// without it the CPU backend's `collectives` is null.
//
// float32, float64, int32 and int64 map to MPI datatypes. MPI has no float16/bfloat16 type, so a
// 16-bit buffer is widened to float32, reduced in float32 and rounded back once (round to nearest
// even): a sum of N 16-bit values is then the float32 sum rounded once, not N roundings; max and
// min are exact. A broadcast moves any dtype's bits unchanged (as bytes).
#include "backend/collectives.h"

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/mpi_status.h"
#include "mixprec/convert.h"

namespace mixprec::cpu {
namespace {

using distributed::DistributedError;
using distributed::ReduceOp;

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  throw DistributedError("all_reduce: unknown reduce op");
}

// The MPI type of a dtype MPI reduces natively; MPI_DATATYPE_NULL for float16/bfloat16.
MPI_Datatype native_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::int32: return MPI_INT32_T;
    case DType::int64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

// MPI counts are int: a larger buffer goes in chunks.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

void all_reduce_native(MPI_Comm comm, void* data, std::size_t count, MPI_Datatype type,
                       std::size_t element_bytes, MPI_Op op) {
  auto* bytes = static_cast<char*>(data);
  for (std::size_t done = 0; done < count; done += kMaxChunk) {
    const std::size_t n = std::min(kMaxChunk, count - done);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, bytes + done * element_bytes, static_cast<int>(n), type,
                            op, comm),
              "MPI_Allreduce");
  }
}

template <typename Half>
void all_reduce_widened(MPI_Comm comm, Half* data, std::size_t count, MPI_Op op) {
  std::vector<float> wide(count);
  convert(data, wide.data(), count);
  all_reduce_native(comm, wide.data(), count, MPI_FLOAT, sizeof(float), op);
  convert(wide.data(), data, count);
}

void all_reduce(const Communicator& group, void* data, std::size_t count, DType dtype, ReduceOp op,
                Device) {
  if (count == 0) return;
  const MPI_Comm comm = comm_of(group);
  if (const MPI_Datatype type = native_type(dtype); type != MPI_DATATYPE_NULL) {
    all_reduce_native(comm, data, count, type, dtype_size(dtype), mpi_op(op));
  } else if (dtype == DType::float16) {
    all_reduce_widened(comm, static_cast<float16*>(data), count, mpi_op(op));
  } else if (dtype == DType::bfloat16) {
    all_reduce_widened(comm, static_cast<bfloat16*>(data), count, mpi_op(op));
  } else {
    throw DistributedError(std::string("all_reduce: dtype ") + std::string(dtype_name(dtype)) +
                           " is not supported over MPI");
  }
}

void broadcast(const Communicator& group, void* data, std::size_t count, DType dtype, int root,
               Device) {
  // The bits travel unchanged: as bytes, in chunks MPI's int count can hold.
  const std::size_t total = count * dtype_size(dtype);
  auto* bytes = static_cast<char*>(data);
  for (std::size_t done = 0; done < total; done += kMaxChunk) {
    const std::size_t n = std::min(kMaxChunk, total - done);
    check_mpi(MPI_Bcast(bytes + done, static_cast<int>(n), MPI_BYTE, root, comm_of(group)),
              "MPI_Bcast");
  }
}

std::string library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, length);
  // "Open MPI v4.1.4, package: ..., ident: ..." -> "Open MPI v4.1.4"
  if (const auto end = version.find_first_of(",\n"); end != std::string::npos) version.resize(end);
  return version;
}

}  // namespace

extern const Collectives kCollectives;
const Collectives kCollectives{
    .all_reduce = all_reduce, .broadcast = broadcast, .library = library};

}  // namespace mixprec::cpu
