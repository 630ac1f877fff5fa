// Internals of the process group (process_group.cpp) that the tests reach: the group the
// collectives see, and whether this process touched MPI.
#pragma once

#include "backend/collectives.h"

namespace mixprec::distributed::detail {

// The group joined by initialize() (a group of one before it or without a launcher).
Communicator group();

// Whether MPI is initialised in this process (false in a build without MPI).
bool mpi_initialized();

}  // namespace mixprec::distributed::detail
