// Alpha-beta-gamma cost models of the collective algorithms (Hockney; Thakur, Rabenseifner and
// Gropp 2005; the all-reduce table of the communication-efficient DDL surveys).
//
// A message of m bytes costs alpha + m*beta seconds to send; reducing m bytes costs m*gamma.
// Each algorithm's cost for n ranks and N bytes is latency_terms*alpha + bandwidth_bytes*beta +
// compute_bytes*gamma; docs/algorithms.md lists the formulas. Pure functions, thread safe.
#pragma once

#include <cstddef>
#include <optional>

#include "frugal/collectives.h"

namespace frugal {

struct CostParams {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte
  double gamma = 0;  // seconds per byte reduced
};

struct CostTerms {
  double latency_terms = 0;    // coefficient of alpha
  double bandwidth_bytes = 0;  // coefficient of beta
  double compute_bytes = 0;    // coefficient of gamma

  double Seconds(const CostParams& p) const {
    return latency_terms * p.alpha + bandwidth_bytes * p.beta + compute_bytes * p.gamma;
  }
  // The terms of two patterns run one after the other.
  CostTerms& operator+=(const CostTerms& o) {
    latency_terms += o.latency_terms;
    bandwidth_bytes += o.bandwidth_bytes;
    compute_bytes += o.compute_bytes;
    return *this;
  }
};

struct CostShape {
  int ranks = 1;
  double bytes = 0;
  // Pipelined algorithms: segment size in bytes (0: unsegmented). Unset: the algorithm's default
  // segment (DefaultSegmentBytes), as AllreduceOptions leaves it.
  std::optional<double> segment_bytes{};
  // Hierarchical: ranks per host. Torus: rows.
  int ranks_per_host = 1;
  int torus_rows = 1;
};

CostTerms AllreduceCost(AllreduceAlgorithm algorithm, const CostShape& shape);

// Least-squares fit of alpha and beta from (bytes, seconds) samples of one-way message times.
// Needs at least two distinct sizes; kInvalidArgument otherwise.
struct LinearFit {
  double alpha = 0;
  double beta = 0;
  double r2 = 0;
};
StatusOr<LinearFit> FitAlphaBeta(std::span<const double> bytes, std::span<const double> seconds);

}  // namespace frugal
