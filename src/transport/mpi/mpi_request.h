// Started MPI operations as frugal Work, for the MPI transport and for layers above it that call
// MPI themselves (the MPI_Allreduce reducer). Internal to frugal.
//
// The memory an MPI operation reads or writes belongs to the operation, not to its caller: the
// caller hands it over (`Memory`) when the operation starts. When the Work completes, the memory
// is released. When the caller gives up first (Wait times out, or the Work is destroyed
// unfinished), the request and its memory go to the runtime that made the transport, which keeps
// them until MPI completes the request or MpiRuntime finalises MPI. So MPI never reads or writes
// memory its caller has freed or reused, however late the peer is.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::mpi_internal {

// Memory owned by a started MPI operation (any object: a staging buffer, a vector, a handle that
// MPI writes at completion).
using Memory = std::shared_ptr<void>;

// Maps an MPI error code to frugal's closed set of codes, by the code's error class.
Status MpiError(int error, std::string_view what);

// Whether `t` was made by MpiRuntime::World() or split from such a transport.
bool IsMpiTransport(const Transport& t);

// A Work over `request`, an operation started by the caller on `memory`, polled with the back-off
// of MPI transport `t` (IsMpiTransport(t) must hold). On success the Work releases `memory`; a
// failed MPI_Test gives MpiError(what). `timeout_message(timeout)` is the text of kTimeout.
std::unique_ptr<Work> WorkForRequest(Transport& t, MPI_Request request, Memory memory,
                                     std::string what,
                                     std::function<std::string(Duration)> timeout_message);

}  // namespace frugal::mpi_internal
