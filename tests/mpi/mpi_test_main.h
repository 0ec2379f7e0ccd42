// Shared by the tier-2 suites, which run as one process per rank under a real `mpirun`.
//
// The test main initialises MPI through MpiRuntime before any test runs and finalises it after
// the last one; tests take a fresh transport over a duplicate of MPI_COMM_WORLD with
// TestWorld(), so a test that leaves stray messages behind (a timeout test) cannot disturb the
// next one. Every rank runs every test in the same order; only rank 0 prints the full report,
// the other ranks print their failures prefixed with their rank.
#pragma once

#include <chrono>
#include <memory>
#include <utility>

#include "frugal/mpi_transport.h"
#include "frugal/transport.h"

namespace frugal::mpitest {

// How long a test waits for an operation before it fails.
inline constexpr Duration kTimeout = std::chrono::seconds(30);

// The runtime created by the test main.
MpiRuntime& Runtime();

// A fresh world transport; fails the calling test if MPI cannot make one.
std::unique_ptr<Transport> TestWorld();

// The ranks before and after this one in a ring: {left, right}.
inline std::pair<int, int> Neighbours(const Transport& t) {
  return {(t.rank() + t.size() - 1) % t.size(), (t.rank() + 1) % t.size()};
}

// Tests the operations given up on this rank (which drives MPI's progress) until MPI has
// completed all of them; false if some remain after `timeout`.
bool AbandonedOperationsComplete(Duration timeout);

}  // namespace frugal::mpitest
