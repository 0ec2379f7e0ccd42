// A server's counts on the wire (internal): the kStats payload a server answers a kStatsRequest
// with, and its validating decoder.
//
// Payload, little-endian (engine/wire.h's writer, sealed by its magic "FPSS" and version):
//   bytes_in u64, bytes_out u64, pushes u64, updates u64, workers u32, then per worker
//   applied u64, dropped u64, skipped u64, entries u32, entries x (staleness u64, count u64)
// with the staleness values strictly ascending, each at most WorkerPushStats::kMaxStaleness, and
// every count > 0 (the histogram, sparse).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/parameter_server.h"
#include "frugal/status.h"

namespace frugal::ps_internal {

struct ServerStats {
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t pushes = 0;   // over the server's keys: pushes received (skipped and dropped included)
  uint64_t updates = 0;  // over the server's keys: updates applied
  std::vector<WorkerPushStats> workers;
};

std::vector<std::byte> EncodeServerStats(const ServerStats& stats);
// kMalformed naming what is wrong; `workers` is the number of workers the job has.
StatusOr<ServerStats> DecodeServerStats(std::span<const std::byte> payload, int workers);

}  // namespace frugal::ps_internal
