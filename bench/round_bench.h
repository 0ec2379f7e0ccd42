// Gossip rounds on a graph: how long a round of gossip's neighbour exchange takes when every
// rank sends a message to its out-neighbours and receives its in-neighbours' at once, round after
// round, as D-PSGD and SGP run them. The per-host rate of the round, d M / round (d the largest
// out- or in-degree of the round's phase, M the message), is the rate at which the hosts' NICs
// carry the round's concurrent flows; `frugal simulate --fit-round FILE` takes it. On a network
// whose NICs carry several concurrent flows per direction at their full rate, it is the NIC
// rate; docs/performance.md ("What a gossip round costs on the emulated links") measures less.
// Each size also gets the rate at which a rank copies a message of that size out of the caches
// (memcpy after writing kEvictBytes of other memory, every rank at once, before the timed
// rounds): a gossip step passes its model through memory several times on the training thread
// (packing, the snapshot, the messages, the mix) after a forward and backward pass that moved
// the model out of the caches, and `frugal simulate --fit-round` takes that rate for them.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "frugal/gossip_graph.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::gossip {
class NeighbourExchange;
}  // namespace frugal::gossip

namespace frugal::bench {

// Gossip rounds one at a time: round k sends `message` to the out-neighbours of phase k of the
// graph and receives its in-neighbours' messages of the same size, all in flight at once (as
// D-PSGD's round; gossip::NeighbourExchange). Used by the thread that owns the transport.
class GossipRounds {
 public:
  // kInvalidArgument when the graph cannot be built over `ranks` ranks.
  static StatusOr<GossipRounds> Make(const TopologySpec& spec, int ranks, uint64_t seed);
  GossipRounds(GossipRounds&&) noexcept;
  GossipRounds& operator=(GossipRounds&&) noexcept;
  ~GossipRounds();

  Status Run(Transport& t, uint64_t k, std::span<const std::byte> message, Duration timeout);
  const Topology& graph() const { return graph_; }

 private:
  explicit GossipRounds(Topology graph);
  Topology graph_;
  std::unique_ptr<gossip::NeighbourExchange> exchange_;
};

struct RoundBenchOptions {
  TopologySpec topology;
  uint64_t seed = 0;          // random-regular graphs
  std::vector<size_t> sizes;  // message sizes in bytes
  int rounds = 20;            // timed rounds per size
  int warmup = 2;             // untimed rounds before them
  // A barrier before every round (and its time left out): the rounds start together instead of
  // each rank starting its next round when its own has finished.
  bool lockstep = false;
  Duration timeout = kDefaultTimeout;
};

struct RoundSample {
  std::string topology;
  int ranks = 0;
  bool lockstep = false;
  size_t bytes = 0;
  // The mean over the phases of the graph's period of the phase's largest out- or in-degree.
  double degree = 0;
  int rounds = 0;
  // The slowest rank's time for all timed rounds, over their number (the rounds run back to back
  // from a barrier, each rank starting its next round when its own has finished; lockstep: the
  // sum of the rounds' times, each from its barrier).
  double round_seconds = 0;
  // Median and largest over the rounds of the slowest rank's time of that round.
  double median_round_seconds = 0;
  double slowest_round_seconds = 0;
  // degree x bytes / round_seconds.
  double round_bytes_per_s = 0;
  // bytes / the slowest rank's median time of one copy of `bytes` out of the caches
  // (kCopySamples copies on every rank at once, after a barrier).
  double copy_bytes_per_s = 0;
};

inline constexpr int kCopySamples = 10;
inline constexpr size_t kEvictBytes = size_t{64} << 20;  // above the last-level caches at hand

// Collective over the transport (any size >= 2; kInvalidArgument for 1 or a graph that cannot be
// built over its ranks); every rank calls it with the same options. Round k uses phase k of the
// graph. The samples are complete on rank 0; the other ranks get an empty vector.
StatusOr<std::vector<RoundSample>> RunRoundBench(Transport& t, const RoundBenchOptions& options);

// The round's per-host rate for `rounds` rounds of `bytes` over `seconds` on a graph of mean
// largest degree `degree`: degree x bytes x rounds / seconds.
double RoundBytesPerSecond(double degree, size_t bytes, int rounds, double seconds);

std::string RoundTable(const std::vector<RoundSample>& samples);
std::vector<nlohmann::json> RoundJson(const std::vector<RoundSample>& samples);

}  // namespace frugal::bench
