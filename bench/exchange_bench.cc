// The exchange benchmark (see exchange_bench.h). Each timed exchange: every rank passes a barrier,
// then starts one round of gossip::NeighbourExchange (rank 0 sends to every other rank when its
// mode sends and receives from every other rank when it receives; the others do the converse,
// everything posted before anything is waited for) and finishes it; each rank times its own round
// from the barrier, and the slowest rank's time is the exchange's. A receive of a known size is
// posted before the send, as gossip posts it.
#include "exchange_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "bench_util.h"
#include "frugal/collectives.h"
#include "frugal/timer.h"
#include "gossip/neighbour_exchange.h"

namespace frugal::bench {

StatusOr<ExchangeMode> ParseExchangeMode(std::string_view name) {
  for (ExchangeMode mode : {ExchangeMode::kSend, ExchangeMode::kRecv, ExchangeMode::kBoth}) {
    if (name == ExchangeModeName(mode)) return mode;
  }
  return InvalidArgumentError(
      fmt::format("unknown exchange mode '{}' (expected send, recv or both)", name));
}

std::string_view ExchangeModeName(ExchangeMode mode) {
  switch (mode) {
    case ExchangeMode::kSend:
      return "send";
    case ExchangeMode::kRecv:
      return "recv";
    case ExchangeMode::kBoth:
      return "both";
  }
  return "?";
}

StatusOr<std::vector<ExchangeSample>> RunExchangeBench(Transport& t,
                                                       const ExchangeBenchOptions& options) {
  if (t.size() < 2) {
    return InvalidArgumentError(
        fmt::format("bench exchange needs at least 2 ranks, not {} (e.g. --np 2)", t.size()));
  }
  const int me = t.rank();
  const CollectiveOptions sync{options.timeout, false};
  size_t largest = 0;
  for (size_t s : options.sizes) largest = std::max(largest, s);
  std::vector<std::byte> payload(largest, std::byte{0x5a});
  std::vector<ExchangeSample> samples;
  gossip::NeighbourExchange exchange;
  for (size_t size : options.sizes) {
    for (ExchangeMode mode : options.modes) {
      // Rank 0 sends in kSend and kBoth, receives in kRecv and kBoth; rank 1 the other way round.
      const bool rank0_sends = mode != ExchangeMode::kRecv;
      const bool rank0_receives = mode != ExchangeMode::kSend;
      const bool sends = me == 0 ? rank0_sends : rank0_receives;
      const bool receives = me == 0 ? rank0_receives : rank0_sends;
      std::vector<int> peers;
      if (me == 0) {
        for (int r = 1; r < t.size(); ++r) peers.push_back(r);
      } else {
        peers.push_back(0);
      }
      const std::vector<int> to = sends ? peers : std::vector<int>{};
      const std::vector<int> from = receives ? peers : std::vector<int>{};
      std::vector<double> times;
      for (int i = 0; i < options.warmup + options.iters; ++i) {
        FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));
        Stopwatch watch;
        exchange.Start(t, kBenchTag, to, std::span<const std::byte>(payload).first(size), from,
                       size);
        FRUGAL_RETURN_IF_ERROR(exchange.Finish(t, options.timeout, "bench exchange"));
        if (i >= options.warmup) times.push_back(watch.Seconds());
      }
      FRUGAL_RETURN_IF_ERROR(MaxToRoot(t, times, options.timeout));
      if (me != 0 || times.empty()) continue;
      ExchangeSample sample;
      sample.bytes = size;
      sample.peers = t.size() - 1;
      sample.mode = mode;
      sample.seconds = Median(times);
      sample.fastest_seconds = *std::min_element(times.begin(), times.end());
      sample.slowest_seconds = *std::max_element(times.begin(), times.end());
      sample.iters = options.iters;
      samples.push_back(sample);
    }
  }
  return samples;
}

namespace {

// For kBoth: its time over the slower one-way time of the same size; 0 when one is missing.
double BothOverOneWay(const std::vector<ExchangeSample>& samples, const ExchangeSample& both) {
  double one_way = 0;
  for (const ExchangeSample& s : samples) {
    if (s.bytes == both.bytes && s.peers == both.peers && s.mode != ExchangeMode::kBoth) {
      one_way = std::max(one_way, s.seconds);
    }
  }
  return both.mode == ExchangeMode::kBoth && one_way > 0 ? both.seconds / one_way : 0;
}

double MbitPerSecond(const ExchangeSample& s) {
  return static_cast<double>(s.bytes) * s.peers * 8 / s.seconds / 1e6;
}

}  // namespace

std::string ExchangeTable(const std::vector<ExchangeSample>& samples) {
  Table table({"bytes", "mode", "iters", "median_ms", "fastest_ms", "slowest_ms",
               "rank0_Mbit/s_per_direction", "both/one-way"},
              {false, true});
  for (const ExchangeSample& s : samples) {
    const double ratio = BothOverOneWay(samples, s);
    table.AddRow(
        {FormatBytes(s.bytes), std::string(ExchangeModeName(s.mode)), fmt::format("{}", s.iters),
         fmt::format("{:.2f}", s.seconds * 1e3), fmt::format("{:.2f}", s.fastest_seconds * 1e3),
         fmt::format("{:.2f}", s.slowest_seconds * 1e3), fmt::format("{:.1f}", MbitPerSecond(s)),
         ratio > 0 ? fmt::format("{:.2f}", ratio) : "-"});
  }
  return table.Render();
}

std::vector<nlohmann::json> ExchangeJson(const std::vector<ExchangeSample>& samples) {
  std::vector<nlohmann::json> records;
  for (const ExchangeSample& s : samples) {
    records.push_back({{"bench", "exchange"},
                       {"bytes", s.bytes},
                       {"ranks", s.peers + 1},
                       {"mode", ExchangeModeName(s.mode)},
                       {"iters", s.iters},
                       {"seconds", s.seconds},
                       {"fastest_seconds", s.fastest_seconds},
                       {"slowest_seconds", s.slowest_seconds},
                       {"mbit_per_s_per_direction", MbitPerSecond(s)}});
    if (const double ratio = BothOverOneWay(samples, s); ratio > 0) {
      records.back()["both_over_one_way"] = ratio;
    }
  }
  return records;
}

}  // namespace frugal::bench
