// The gossip round benchmark (see round_bench.h). For each size: a barrier, the warm-up rounds,
// a barrier, then the timed rounds back to back. Each round is one round of
// gossip::NeighbourExchange on phase k of the graph: the message to every out-neighbour and a
// receive of its size from every in-neighbour, all posted before anything is waited for; a rank
// starts round k + 1 when its round k has finished (no barrier between rounds, as in training),
// or, lockstep, after a barrier that all ranks pass once their round k has finished. Each rank
// times every round and the whole run (lockstep: the sum of its rounds); rank 0 gets the largest
// of each over the ranks. Before the rounds of a size, after a barrier, every rank times copies
// of the size out of the caches (ColdCopySeconds) at once; rank 0 gets the largest median.
#include "round_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "bench_util.h"
#include "frugal/check.h"
#include "frugal/collectives.h"
#include "frugal/timer.h"
#include "gossip/neighbour_exchange.h"

namespace frugal::bench {

namespace {

// The median time of kCopySamples copies of `bytes` from a buffer out of the caches, as a gossip
// step meets its model after the forward and backward passes: before each timed copy the rank
// writes kEvictBytes of other memory.
double ColdCopySeconds(size_t bytes) {
  std::vector<std::byte> from(bytes, std::byte{0x5a});
  std::vector<std::byte> to(bytes, std::byte{0});
  std::vector<std::byte> evict(kEvictBytes);
  std::vector<double> times;
  for (int k = 0; k < kCopySamples; ++k) {
    std::memset(evict.data(), k, evict.size());
    Stopwatch watch;
    std::memcpy(to.data(), from.data(), bytes);
    times.push_back(watch.Seconds());
    FRUGAL_INTERNAL_ASSERT(to[bytes / 2] == std::byte{0x5a} && evict[k] == std::byte(k),
                           "the copy did not copy");
  }
  return Median(times);
}

}  // namespace

StatusOr<GossipRounds> GossipRounds::Make(const TopologySpec& spec, int ranks, uint64_t seed) {
  FRUGAL_ASSIGN_OR_RETURN(Topology graph, Topology::Make(spec, ranks, seed));
  return GossipRounds(std::move(graph));
}

GossipRounds::GossipRounds(Topology graph)
    : graph_(std::move(graph)), exchange_(std::make_unique<gossip::NeighbourExchange>()) {}
GossipRounds::GossipRounds(GossipRounds&&) noexcept = default;
GossipRounds& GossipRounds::operator=(GossipRounds&&) noexcept = default;
GossipRounds::~GossipRounds() = default;

Status GossipRounds::Run(Transport& t, uint64_t k, std::span<const std::byte> message,
                         Duration timeout) {
  const int me = t.rank();
  exchange_->Start(t, kBenchTag, graph_.Out(me, k), message, graph_.In(me, k), message.size());
  return exchange_->Finish(t, timeout, "gossip round");
}

double RoundBytesPerSecond(double degree, size_t bytes, int rounds, double seconds) {
  return degree * static_cast<double>(bytes) * rounds / seconds;
}

StatusOr<std::vector<RoundSample>> RunRoundBench(Transport& t, const RoundBenchOptions& options) {
  if (t.size() < 2) {
    return InvalidArgumentError(
        fmt::format("bench round needs at least 2 ranks, not {} (e.g. --np 4)", t.size()));
  }
  if (options.rounds <= 0 || options.warmup < 0) {
    return InvalidArgumentError("bench round: rounds must be positive, warmup not negative");
  }
  FRUGAL_ASSIGN_OR_RETURN(GossipRounds rounds,
                          GossipRounds::Make(options.topology, t.size(), options.seed));
  const Topology& graph = rounds.graph();
  const int me = t.rank();
  double degree = 0;
  for (int p = 0; p < graph.period(); ++p) {
    size_t d = 0;
    for (int r = 0; r < t.size(); ++r) {
      d = std::max({d, graph.Out(r, static_cast<uint64_t>(p)).size(),
                    graph.In(r, static_cast<uint64_t>(p)).size()});
    }
    degree += static_cast<double>(d) / graph.period();
  }
  const CollectiveOptions sync{options.timeout, false};
  size_t largest = 0;
  for (size_t s : options.sizes) largest = std::max(largest, s);
  std::vector<std::byte> payload(largest, std::byte{0x5a});
  std::vector<RoundSample> samples;
  for (size_t size : options.sizes) {
    const std::span<const std::byte> message = std::span<const std::byte>(payload).first(size);
    auto round = [&](int k) -> Status {
      return rounds.Run(t, static_cast<uint64_t>(k), message, options.timeout);
    };
    FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));
    std::vector<double> copy_seconds(1, size > 0 ? ColdCopySeconds(size) : 0.0);
    FRUGAL_RETURN_IF_ERROR(MaxToRoot(t, copy_seconds, options.timeout));
    FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));
    for (int k = 0; k < options.warmup; ++k) FRUGAL_RETURN_IF_ERROR(round(k));
    FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));
    std::vector<double> times;  // each round's, then the whole run's
    double rounds_total = 0;
    Stopwatch run;
    for (int k = 0; k < options.rounds; ++k) {
      if (options.lockstep) FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));
      Stopwatch watch;
      FRUGAL_RETURN_IF_ERROR(round(options.warmup + k));
      times.push_back(watch.Seconds());
      rounds_total += times.back();
    }
    times.push_back(options.lockstep ? rounds_total : run.Seconds());
    FRUGAL_RETURN_IF_ERROR(MaxToRoot(t, times, options.timeout));
    if (me != 0) continue;
    RoundSample sample;
    sample.topology = graph.name();
    sample.ranks = t.size();
    sample.lockstep = options.lockstep;
    sample.bytes = size;
    sample.degree = degree;
    sample.rounds = options.rounds;
    const double total = times.back();
    times.pop_back();
    sample.round_seconds = total / options.rounds;
    sample.median_round_seconds = Median(times);
    sample.slowest_round_seconds = *std::max_element(times.begin(), times.end());
    sample.round_bytes_per_s = RoundBytesPerSecond(degree, size, options.rounds, total);
    sample.copy_bytes_per_s =
        copy_seconds[0] > 0 ? static_cast<double>(size) / copy_seconds[0] : 0.0;
    samples.push_back(sample);
  }
  return samples;
}

std::string RoundTable(const std::vector<RoundSample>& samples) {
  Table table({"topology", "ranks", "rounds_start", "bytes", "degree", "rounds", "round_ms",
               "median_ms", "slowest_ms", "Mbit/s_per_host", "copy_GB/s"},
              {true, false, true});
  for (const RoundSample& s : samples) {
    table.AddRow({s.topology, fmt::format("{}", s.ranks), s.lockstep ? "lockstep" : "free",
                  FormatBytes(s.bytes), fmt::format("{:.2f}", s.degree),
                  fmt::format("{}", s.rounds), fmt::format("{:.2f}", s.round_seconds * 1e3),
                  fmt::format("{:.2f}", s.median_round_seconds * 1e3),
                  fmt::format("{:.2f}", s.slowest_round_seconds * 1e3),
                  fmt::format("{:.1f}", s.round_bytes_per_s * 8 / 1e6),
                  fmt::format("{:.2f}", s.copy_bytes_per_s / 1e9)});
  }
  return table.Render();
}

std::vector<nlohmann::json> RoundJson(const std::vector<RoundSample>& samples) {
  std::vector<nlohmann::json> records;
  for (const RoundSample& s : samples) {
    records.push_back({{"bench", "round"},
                       {"topology", s.topology},
                       {"ranks", s.ranks},
                       {"lockstep", s.lockstep},
                       {"bytes", s.bytes},
                       {"degree", s.degree},
                       {"rounds", s.rounds},
                       {"round_seconds", s.round_seconds},
                       {"median_round_seconds", s.median_round_seconds},
                       {"slowest_round_seconds", s.slowest_round_seconds},
                       {"round_bytes_per_s", s.round_bytes_per_s},
                       {"copy_bytes_per_s", s.copy_bytes_per_s}});
  }
  return records;
}

}  // namespace frugal::bench
