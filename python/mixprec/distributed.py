"""Data-parallel training over the processes of mpirun (mixprec::distributed).

    model.fit(x, y, batch_size=1024, distribute=mixprec.distributed.DataParallel())

batch_size is then the global batch, split between the ranks. In a build without MPI,
built_with_mpi() is False and a group of one process trains alone.
"""

from ._mixprec.distributed import (
    DataParallel,
    all_reduce,
    barrier,
    broadcast,
    built_with_mpi,
    built_with_nccl,
    describe,
    initialize,
    is_initialized,
    local_rank,
    rank,
    world_size,
)

__all__ = ["DataParallel", "all_reduce", "barrier", "broadcast", "built_with_mpi",
           "built_with_nccl", "describe", "initialize", "is_initialized", "local_rank", "rank",
           "world_size"]
