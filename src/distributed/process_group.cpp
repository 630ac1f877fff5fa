// PLACEHOLDER (lead's skeleton, replaced by the MPI/NCCL implementation): a group of one.
#include "mixprec/distributed/distributed.h"

namespace mixprec::distributed {

bool built_with_mpi() { return false; }
bool built_with_nccl() { return false; }
void initialize() {}
bool is_initialized() { return false; }
int rank() { return 0; }
int world_size() { return 1; }
int local_rank() { return 0; }
std::string describe() { return "single process (no launcher)"; }
void all_reduce(Tensor&, ReduceOp) {}
void broadcast(Tensor&, int) {}
double all_reduce(double value, ReduceOp) { return value; }
void barrier() {}

}  // namespace mixprec::distributed
