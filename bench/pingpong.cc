// Ping-pong: for each message size, rank `a` sends the message to rank `b`, which sends it back;
// the one-way time is half the round trip, and its median over `iters` round trips (after
// `warmup` untimed ones) is the sample. When `iters` is 0, `a` derives the count from the
// warm-up round trips so that each size takes about `target_seconds`, and tells `b` the count
// before timing. FitAlphaBeta then fits one_way = alpha + bytes * beta over all sizes.
//
// With a peer (raw MPI round trips), each timed iteration makes one round trip of each kind, the
// two taking turns going first, so that both see the same conditions; vs_mpi is the MPI time
// over the transport's.
//
// RunPingPong measures the pairs (0, r) for every other rank r, or every pair (i, j), i < j,
// one at a time: all ranks pass a Barrier after each pair, and the non-zero first rank of a pair
// sends its samples to rank 0 at the end.
#include "pingpong.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench_util.h"
#include "frugal/collectives.h"
#include "frugal/timer.h"

namespace frugal::bench {

std::vector<size_t> DefaultPingPongSizes() {
  std::vector<size_t> sizes;
  for (size_t s = 1; s <= (size_t{64} << 20); s *= 2) sizes.push_back(s);
  return sizes;
}

StatusOr<PingPongPair> MeasurePair(Transport& t, int a, int b, const PingPongOptions& options,
                                   PingPongPeer* peer) {
  FRUGAL_CHECK(t.rank() == a || t.rank() == b, "MeasurePair on rank ", t.rank());
  FRUGAL_CHECK(a != b, "a pair of distinct ranks");
  const bool timer = t.rank() == a;
  const int other = timer ? b : a;
  size_t largest = 0;
  for (size_t s : options.sizes) largest = std::max(largest, s);
  std::vector<std::byte> buffer(largest, std::byte{0x42});
  PingPongPair pair{a, b, {}, {}, false};
  for (size_t size : options.sizes) {
    std::span<std::byte> message(buffer.data(), size);
    auto round_trip = [&]() -> Status {
      if (timer) {
        FRUGAL_RETURN_IF_ERROR(Send(t, other, kPingPongTag, message, options.timeout));
        return Recv(t, other, kPingPongTag, message, options.timeout);
      }
      FRUGAL_RETURN_IF_ERROR(Recv(t, other, kPingPongTag, message, options.timeout));
      return Send(t, other, kPingPongTag, message, options.timeout);
    };
    auto peer_round_trip = [&]() -> Status {
      return peer->RoundTrip(other, message, timer, options.timeout);
    };
    std::vector<double> warm;
    for (int i = 0; i < std::max(options.warmup, 1); ++i) {
      Stopwatch watch;
      FRUGAL_RETURN_IF_ERROR(round_trip());
      warm.push_back(watch.Seconds());
      if (peer != nullptr) FRUGAL_RETURN_IF_ERROR(peer_round_trip());
    }
    int iters = options.iters;
    if (iters <= 0) {
      // Rank a picks the count and tells b.
      int32_t count = 0;
      if (timer) {
        double per_trip = std::max(*std::min_element(warm.begin(), warm.end()), 1e-7);
        if (peer != nullptr) per_trip *= 2;
        count = static_cast<int32_t>(std::clamp(options.target_seconds / per_trip, 3.0, 1000.0));
        FRUGAL_RETURN_IF_ERROR(Send(t, other, kPingPongTag,
                                    AsBytes(std::span<const int32_t>(&count, 1)), options.timeout));
      } else {
        FRUGAL_RETURN_IF_ERROR(Recv(t, other, kPingPongTag,
                                    AsWritableBytes(std::span<int32_t>(&count, 1)),
                                    options.timeout));
      }
      iters = count;
    }
    std::vector<double> one_way;
    std::vector<double> peer_one_way;
    for (int i = 0; i < iters; ++i) {
      // With a peer, the two take turns going first.
      for (int turn = 0; turn < (peer != nullptr ? 2 : 1); ++turn) {
        const bool mine = peer == nullptr || (turn == 0) == (i % 2 == 0);
        Stopwatch watch;
        FRUGAL_RETURN_IF_ERROR(mine ? round_trip() : peer_round_trip());
        (mine ? one_way : peer_one_way).push_back(watch.Seconds() / 2);
      }
    }
    PingPongSample sample{size, Median(one_way), iters, std::nullopt};
    if (peer != nullptr) sample.peer_one_way_seconds = Median(peer_one_way);
    pair.samples.push_back(sample);
  }
  if (timer) {
    std::vector<double> bytes;
    std::vector<double> seconds;
    for (const auto& s : pair.samples) {
      bytes.push_back(static_cast<double>(s.bytes));
      seconds.push_back(s.one_way_seconds);
    }
    auto fit = FitAlphaBeta(bytes, seconds);
    if (fit.ok()) {
      pair.fit = *fit;
      pair.fitted = true;
    }
  }
  return pair;
}

StatusOr<std::vector<PingPongPair>> RunPingPong(Transport& t, const PingPongOptions& options) {
  std::vector<std::pair<int, int>> schedule;
  for (int i = 0; i < t.size(); ++i) {
    for (int j = i + 1; j < t.size(); ++j) {
      if (i == 0 || options.all_pairs) schedule.emplace_back(i, j);
    }
  }
  const CollectiveOptions sync{options.timeout, false};
  std::unique_ptr<PingPongPeer> peer;
  if (options.compare_mpi) {
    FRUGAL_ASSIGN_OR_RETURN(peer, MakeMpiPingPongPeer(t, options.timeout));
  }
  std::vector<PingPongPair> pairs;
  for (auto [a, b] : schedule) {
    std::optional<PingPongPair> mine;
    if (t.rank() == a || t.rank() == b) {
      FRUGAL_ASSIGN_OR_RETURN(PingPongPair pair, MeasurePair(t, a, b, options, peer.get()));
      if (t.rank() == a) mine = std::move(pair);
    }
    // Rank a (when not 0) sends its samples to rank 0.
    if (a != 0 && (t.rank() == a || t.rank() == 0)) {
      std::vector<double> flat(options.sizes.size() * 3 + 4);
      if (t.rank() == a) {
        for (size_t k = 0; k < mine->samples.size(); ++k) {
          flat[3 * k] = mine->samples[k].one_way_seconds;
          flat[3 * k + 1] = mine->samples[k].iters;
          flat[3 * k + 2] = mine->samples[k].peer_one_way_seconds.value_or(-1);
        }
        const size_t base = options.sizes.size() * 3;
        flat[base] = mine->fit.alpha;
        flat[base + 1] = mine->fit.beta;
        flat[base + 2] = mine->fit.r2;
        flat[base + 3] = mine->fitted ? 1 : 0;
        FRUGAL_RETURN_IF_ERROR(
            Send(t, 0, kBenchTag, AsBytes(std::span<const double>(flat)), options.timeout));
      } else {
        FRUGAL_RETURN_IF_ERROR(
            Recv(t, a, kBenchTag, AsWritableBytes(std::span<double>(flat)), options.timeout));
        PingPongPair pair{a, b, {}, {}, false};
        for (size_t k = 0; k < options.sizes.size(); ++k) {
          PingPongSample sample{options.sizes[k], flat[3 * k], static_cast<int>(flat[3 * k + 1]),
                                std::nullopt};
          if (flat[3 * k + 2] >= 0) sample.peer_one_way_seconds = flat[3 * k + 2];
          pair.samples.push_back(sample);
        }
        const size_t base = options.sizes.size() * 3;
        pair.fit = {flat[base], flat[base + 1], flat[base + 2]};
        pair.fitted = flat[base + 3] != 0;
        mine = std::move(pair);
      }
    }
    if (t.rank() == 0) pairs.push_back(std::move(*mine));
    FRUGAL_RETURN_IF_ERROR(Barrier(t, sync));
  }
  return pairs;
}

RangeFits FitByRange(const std::vector<PingPongSample>& samples) {
  std::vector<double> small_bytes, small_seconds, large_bytes, large_seconds;
  for (const auto& s : samples) {
    if (s.bytes <= kLatencyRangeBytes) {
      small_bytes.push_back(static_cast<double>(s.bytes));
      small_seconds.push_back(s.one_way_seconds);
    } else if (s.bytes >= kBandwidthRangeBytes) {
      large_bytes.push_back(static_cast<double>(s.bytes));
      large_seconds.push_back(s.one_way_seconds);
    }
  }
  RangeFits fits;
  if (auto f = FitAlphaBeta(small_bytes, small_seconds); f.ok()) fits.latency = *f;
  if (auto f = FitAlphaBeta(large_bytes, large_seconds); f.ok()) fits.bandwidth = *f;
  return fits;
}

std::string PingPongTable(const std::vector<PingPongPair>& pairs) {
  std::string out;
  for (const auto& pair : pairs) {
    const bool compared =
        !pair.samples.empty() && pair.samples.front().peer_one_way_seconds.has_value();
    std::vector<std::string> header = {"pair", "bytes", "iters", "latency_us", "bandwidth_GB/s"};
    if (compared) {
      header.insert(header.end(), {"mpi_latency_us", "mpi_bandwidth_GB/s", "vs_mpi"});
    }
    Table table(header, {true});
    for (const auto& s : pair.samples) {
      std::vector<std::string> row = {
          fmt::format("{}<->{}", pair.a, pair.b), FormatBytes(s.bytes), fmt::format("{}", s.iters),
          FormatMicros(s.one_way_seconds * 1e6),
          fmt::format("{:.3f}", static_cast<double>(s.bytes) / s.one_way_seconds / 1e9)};
      if (compared) {
        const double mpi = s.peer_one_way_seconds.value_or(0);
        row.insert(row.end(), {FormatMicros(mpi * 1e6),
                               fmt::format("{:.3f}", static_cast<double>(s.bytes) / mpi / 1e9),
                               fmt::format("{:.2f}x", mpi / s.one_way_seconds)});
      }
      table.AddRow(row);
    }
    out += table.Render();
    auto describe = [](const LinearFit& f) {
      return fmt::format("alpha = {} us, beta = {:.4f} ns/byte ({:.2f} GB/s), r2 = {:.4f}",
                         FormatMicros(f.alpha * 1e6), f.beta * 1e9,
                         f.beta > 0 ? 1e-9 / f.beta : 0.0, f.r2);
    };
    if (pair.fitted) {
      out += fmt::format("fit {}<->{}: {}\n", pair.a, pair.b, describe(pair.fit));
    }
    RangeFits ranges = FitByRange(pair.samples);
    if (ranges.latency) {
      out += fmt::format("fit {}<->{} of sizes <= {}: {}\n", pair.a, pair.b,
                         FormatBytes(kLatencyRangeBytes), describe(*ranges.latency));
    }
    if (ranges.bandwidth) {
      out += fmt::format("fit {}<->{} of sizes >= {}: {}\n", pair.a, pair.b,
                         FormatBytes(kBandwidthRangeBytes), describe(*ranges.bandwidth));
    }
    out += "\n";
  }
  return out;
}

std::vector<nlohmann::json> PingPongJson(const std::vector<PingPongPair>& pairs) {
  std::vector<nlohmann::json> records;
  for (const auto& pair : pairs) {
    for (const auto& s : pair.samples) {
      records.push_back(
          {{"bench", "pingpong"},
           {"rank_a", pair.a},
           {"rank_b", pair.b},
           {"bytes", s.bytes},
           {"iters", s.iters},
           {"latency_us", s.one_way_seconds * 1e6},
           {"bandwidth_gbps", static_cast<double>(s.bytes) / s.one_way_seconds / 1e9}});
      if (s.peer_one_way_seconds) {
        records.back()["mpi_latency_us"] = *s.peer_one_way_seconds * 1e6;
      }
    }
    if (pair.fitted) {
      records.push_back({{"bench", "pingpong_fit"},
                         {"rank_a", pair.a},
                         {"rank_b", pair.b},
                         {"alpha_us", pair.fit.alpha * 1e6},
                         {"beta_s_per_byte", pair.fit.beta},
                         {"r2", pair.fit.r2}});
      RangeFits ranges = FitByRange(pair.samples);
      if (ranges.latency) records.back()["small_sizes_alpha_us"] = ranges.latency->alpha * 1e6;
      if (ranges.bandwidth) {
        records.back()["large_sizes_beta_s_per_byte"] = ranges.bandwidth->beta;
      }
    }
  }
  return records;
}

}  // namespace frugal::bench
