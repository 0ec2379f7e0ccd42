// MPI_Allreduce as a GradientReducer: the peer behind `--allreduce mpi` and `frugal bench`'s
// "mpi" rows. Internal to the collectives layer; reached through MakeDenseReducer("mpi").
#pragma once

#include <memory>

#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

// Needs MPI initialised and `t` to be the MPI transport spanning MPI_COMM_WORLD in rank order
// (kFailedPrecondition otherwise). The set-up (a duplicate of MPI_COMM_WORLD) is bounded by
// `timeout`, as is every Reduce.
StatusOr<std::unique_ptr<GradientReducer>> MakeMpiReducer(Transport& t, Duration timeout);

}  // namespace frugal
