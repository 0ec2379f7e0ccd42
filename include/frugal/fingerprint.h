// Checking that every rank holds the same thing (options, a bucket plan, parameters) by comparing
// a 64-bit fingerprint of it, e.g. Fnv1a (hash.h). Collective over a Transport: every rank of
// `t` calls it, in the same order as its other collectives. Blocks up to options.timeout.
#pragma once

#include <cstdint>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

// Gathers every rank's `fingerprint` (Allgatherv) and returns, in rank order, the ranks whose
// fingerprint differs from rank 0's: empty when all agree. Every rank gathers the same bytes, so
// every rank returns the same list. Errors: those of Allgatherv (kTimeout naming the ranks that
// did not answer), kMalformed when a rank sent something other than 8 bytes.
StatusOr<std::vector<int>> RanksDifferingFromRankZero(Transport& t, uint64_t fingerprint,
                                                      const CollectiveOptions& options);

}  // namespace frugal
