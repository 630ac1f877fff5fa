// Which process of a data-parallel run writes files (issue 15): rank 0 only. The callbacks that
// write (CSVLogger, ModelCheckpoint, BackupAndRestore, TensorBoard) ask this before each write;
// their decisions (the best value so far, the epoch counters) still run on every rank. A single
// process is rank 0.
#pragma once

#include "mixprec/distributed/distributed.h"

namespace mixprec::callbacks::detail {

inline bool writes_files() { return distributed::rank() == 0; }

}  // namespace mixprec::callbacks::detail
