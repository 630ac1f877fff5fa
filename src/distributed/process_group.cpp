// mixprec::distributed (include/mixprec/distributed/distributed.h): the process group that the
// launcher started and the collectives on tensors, dispatched to the tensor's backend
// (backend/collectives.h: MPI for CPU tensors, NCCL for CUDA tensors).
//
// Without a launcher, or launched with one process, the group has one member: MPI is never
// touched and every collective only validates its arguments. With several processes, MPI is
// initialised here (mpi_group.cpp) and finalised at exit. Calls into MPI are serialised by one
// mutex (MPI_THREAD_SERIALIZED): collectives may come from any thread, one at a time, and every
// rank must issue them in the same order. Before each collective on a tensor the ranks compare
// what they are about to do (one small all-reduce; MIXPREC_DISTRIBUTED_CHECKS=0 turns it off), so
// that mismatched calls are a DistributedError on every rank instead of a hang or wrong values.
#include "distributed/process_group.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "backend/collectives.h"
#include "distributed/launch_environment.h"
#include "mixprec/distributed/distributed.h"
#if MIXPREC_HAVE_MPI
#include "distributed/mpi_group.h"
#endif

namespace mixprec::distributed {
namespace {

struct State {
  std::mutex init_mutex;  // initialize()
  std::mutex call_mutex;  // every exchange: MPI_THREAD_SERIALIZED
  // Set once initialize() has written the fields below, which never change after: rank() and
  // friends read them without a lock (not blocked by a collective in flight on another thread).
  std::atomic<bool> initialized{false};
  Communicator group;
  bool launched = false;  // by a launcher, even with one process
  bool check_calls = true;
};

State& state() {
  static State s;
  return s;
}

bool checks_enabled() {
  const char* value = std::getenv("MIXPREC_DISTRIBUTED_CHECKS");
  return value == nullptr || std::string(value) != "0";
}

// The collectives of `t`'s device, after the checks every rank can make alone.
const Collectives* collectives_for(const Tensor& t, const char* what, bool reduce) {
  if (!t.defined()) throw DistributedError(std::string(what) + ": the tensor is undefined");
  if (!t.is_contiguous()) {
    throw DistributedError(std::string(what) +
                           ": the tensor must be contiguous (call "
                           ".contiguous() and write the result back)");
  }
  if (reduce && (t.dtype() == DType::uint8 || t.dtype() == DType::bool_)) {
    throw DistributedError(std::string(what) + ": cannot reduce a " +
                           std::string(dtype_name(t.dtype())) +
                           " tensor (float32, float16, bfloat16, float64, int32 or int64)");
  }
  const Collectives* collectives = backend_for(t.device()).collectives;
  if (collectives == nullptr && world_size() > 1) {
    throw DistributedError(
        std::string(what) + ": this build of mixprec has no collectives for " +
        t.device().to_string() + " tensors (" +
        (t.device().type == DeviceType::cpu ? "built without MPI" : "built without NCCL") + ")");
  }
  return collectives;
}

#if MIXPREC_HAVE_MPI
void check_same_call(const detail::CollectiveCall& call) {
  if (state().check_calls) detail::mpi_check_same_call(state().group, call);
}
#endif

}  // namespace

bool built_with_mpi() { return MIXPREC_HAVE_MPI; }
bool built_with_nccl() { return MIXPREC_HAVE_NCCL; }

void initialize() {
  State& s = state();
  std::lock_guard lock(s.init_mutex);
  if (s.initialized.load(std::memory_order_acquire)) return;
  const detail::LaunchEnvironment env =
      detail::read_launch_environment([](const char* name) { return std::getenv(name); });
  detail::check_build_can_join(env, built_with_mpi());
  Communicator group;
  group.local_rank = env.local_rank;
#if MIXPREC_HAVE_MPI
  if (detail::needs_mpi(env)) {
    group = detail::join_mpi_world();
    detail::check_mpi_matches(env, group.size, group.rank);
  }
#endif
  s.group = group;
  s.launched = env.launched;
  s.check_calls = checks_enabled();
  s.initialized.store(true, std::memory_order_release);
}

bool is_initialized() { return state().initialized.load(std::memory_order_acquire); }

int rank() { return detail::group().rank; }
int world_size() { return detail::group().size; }
int local_rank() { return detail::group().local_rank; }

std::string describe() {
  const Communicator g = detail::group();
  if (g.size == 1) {
    return state().launched ? "single process (launched with 1 process)"
                            : "single process (no launcher)";
  }
  std::string text = "rank " + std::to_string(g.rank) + " of " + std::to_string(g.size) +
                     " (local rank " + std::to_string(g.local_rank) + ")";
  for (DeviceType type : {DeviceType::cpu, DeviceType::cuda}) {
    const Backend* backend = find_backend(type);
    if (backend != nullptr && backend->collectives != nullptr) {
      // ", MPI: Open MPI v4.1.4", ", NCCL 2.21.5"
      text +=
          std::string(type == DeviceType::cpu ? ", MPI: " : ", ") + backend->collectives->library();
    }
  }
  return text;
}

void all_reduce(Tensor& t, ReduceOp op) {
  const Collectives* collectives = collectives_for(t, "all_reduce", true);
  if (world_size() == 1) return;
#if MIXPREC_HAVE_MPI
  std::lock_guard lock(state().call_mutex);
  check_same_call({.kind = detail::CollectiveCall::all_reduce,
                   .device_type = static_cast<std::int64_t>(t.device().type),
                   .dtype = static_cast<std::int64_t>(t.dtype()),
                   .count = t.numel(),
                   .op_or_root = static_cast<std::int64_t>(op)});
  collectives->all_reduce(state().group, t.data_ptr(), static_cast<std::size_t>(t.numel()),
                          t.dtype(), op, t.device());
#else
  (void)collectives;
  (void)op;
#endif
}

void broadcast(Tensor& t, int root) {
  const Collectives* collectives = collectives_for(t, "broadcast", false);
  if (root < 0 || root >= world_size()) {
    throw DistributedError("broadcast: root " + std::to_string(root) + " is not a rank (0 .. " +
                           std::to_string(world_size() - 1) + ")");
  }
  if (world_size() == 1) return;
#if MIXPREC_HAVE_MPI
  std::lock_guard lock(state().call_mutex);
  check_same_call({.kind = detail::CollectiveCall::broadcast,
                   .device_type = static_cast<std::int64_t>(t.device().type),
                   .dtype = static_cast<std::int64_t>(t.dtype()),
                   .count = t.numel(),
                   .op_or_root = root});
  collectives->broadcast(state().group, t.data_ptr(), static_cast<std::size_t>(t.numel()),
                         t.dtype(), root, t.device());
#else
  (void)collectives;
#endif
}

double all_reduce(double value, ReduceOp op) {
  if (world_size() == 1) return value;
#if MIXPREC_HAVE_MPI
  std::lock_guard lock(state().call_mutex);
  check_same_call({.kind = detail::CollectiveCall::scalar_all_reduce,
                   .count = 1,
                   .op_or_root = static_cast<std::int64_t>(op)});
  return detail::mpi_all_reduce(state().group, value, op);
#else
  (void)op;
  return value;
#endif
}

void barrier() {
  if (world_size() == 1) return;
#if MIXPREC_HAVE_MPI
  std::lock_guard lock(state().call_mutex);
  detail::mpi_barrier(state().group);
#endif
}

void abort_group(int exit_code) {
  if (world_size() == 1) return;
#if MIXPREC_HAVE_MPI
  // No lock: another thread may hold the call mutex inside a collective that will never end.
  detail::mpi_abort(state().group, exit_code);
#else
  (void)exit_code;
#endif
}

namespace detail {

Communicator group() { return is_initialized() ? state().group : Communicator{}; }

bool mpi_initialized() {
#if MIXPREC_HAVE_MPI
  return mpi_is_initialized();
#else
  return false;
#endif
}

}  // namespace detail

}  // namespace mixprec::distributed
