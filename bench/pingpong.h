// Ping-pong between pairs of ranks: median one-way time per message size, and the alpha-beta
// (latency, inverse bandwidth) model fitted to it with FitAlphaBeta.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frugal/cost_model.h"
#include "frugal/status.h"
#include "frugal/transport.h"
#include "peers.h"

namespace frugal::bench {

struct PingPongOptions {
  std::vector<size_t> sizes;  // message sizes in bytes
  // Round trips timed per size; 0 picks a count that takes about `target_seconds` (3 to 1000).
  int iters = 0;
  int warmup = 2;
  double target_seconds = 0.2;
  // false: rank 0 with every other rank; true: every pair of ranks.
  bool all_pairs = false;
  // Also time raw MPI round trips (MakeMpiPingPongPeer), interleaved with the transport's.
  bool compare_mpi = false;
  Duration timeout = kDefaultTimeout;
};

// Powers of two from 1 byte to 64 MiB.
std::vector<size_t> DefaultPingPongSizes();

struct PingPongSample {
  size_t bytes = 0;
  double one_way_seconds = 0;  // median over round trips of round-trip time / 2
  int iters = 0;
  std::optional<double> peer_one_way_seconds;  // the same over raw MPI, when compared
};

struct PingPongPair {
  int a = 0;  // the rank that times the round trips
  int b = 0;
  std::vector<PingPongSample> samples;
  LinearFit fit;
  bool fitted = false;  // false with fewer than two sizes
};

// Collective: every rank of `t` calls it with the same options. Pairs are measured one after the
// other (the other ranks wait), so measurements do not disturb each other. The returned pairs
// are complete on rank 0; other ranks get an empty vector.
StatusOr<std::vector<PingPongPair>> RunPingPong(Transport& t, const PingPongOptions& options);

// Measures one pair (ranks a and b call it, the others must not). Result valid on rank a. With
// a peer, its round trips alternate with the transport's.
StatusOr<PingPongPair> MeasurePair(Transport& t, int a, int b, const PingPongOptions& options,
                                   PingPongPeer* peer = nullptr);

// One least-squares line over sizes from 1 B to 64 MiB is dictated by the large messages (its
// alpha is often negative). FitByRange fits the small messages (<= kLatencyRangeBytes) for
// alpha, where latency dominates, and the large ones (>= kBandwidthRangeBytes) for beta, where
// bandwidth does; each is nullopt with fewer than two sizes in its range.
inline constexpr size_t kLatencyRangeBytes = 4 << 10;
inline constexpr size_t kBandwidthRangeBytes = 256 << 10;
struct RangeFits {
  std::optional<LinearFit> latency;
  std::optional<LinearFit> bandwidth;
};
RangeFits FitByRange(const std::vector<PingPongSample>& samples);

std::string PingPongTable(const std::vector<PingPongPair>& pairs);
std::vector<nlohmann::json> PingPongJson(const std::vector<PingPongPair>& pairs);

}  // namespace frugal::bench
