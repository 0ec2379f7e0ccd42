// Ping-pong: for each message size, rank `a` sends the message to rank `b`, which sends it back;
// the one-way time is half the round trip, and its median over `iters` round trips (after
// `warmup` untimed ones) is the sample. When `iters` is 0, `a` derives the count from the
// warm-up round trips so that each size takes about `target_seconds`, and tells `b` the count
// before timing. FitAlphaBeta then fits one_way = alpha + bytes * beta over all sizes.
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

StatusOr<PingPongPair> MeasurePair(Transport& t, int a, int b, const PingPongOptions& options) {
  FRUGAL_CHECK(t.rank() == a || t.rank() == b, "MeasurePair on rank ", t.rank());
  FRUGAL_CHECK(a != b, "a pair of distinct ranks");
  const bool timer = t.rank() == a;
  const int peer = timer ? b : a;
  size_t largest = 0;
  for (size_t s : options.sizes) largest = std::max(largest, s);
  std::vector<std::byte> buffer(largest, std::byte{0x42});
  PingPongPair pair{a, b, {}, {}, false};
  for (size_t size : options.sizes) {
    std::span<std::byte> message(buffer.data(), size);
    auto round_trip = [&]() -> Status {
      if (timer) {
        FRUGAL_RETURN_IF_ERROR(Send(t, peer, kPingPongTag, message, options.timeout));
        return Recv(t, peer, kPingPongTag, message, options.timeout);
      }
      FRUGAL_RETURN_IF_ERROR(Recv(t, peer, kPingPongTag, message, options.timeout));
      return Send(t, peer, kPingPongTag, message, options.timeout);
    };
    std::vector<double> warm;
    for (int i = 0; i < std::max(options.warmup, 1); ++i) {
      Stopwatch watch;
      FRUGAL_RETURN_IF_ERROR(round_trip());
      warm.push_back(watch.Seconds());
    }
    int iters = options.iters;
    if (iters <= 0) {
      // Rank a picks the count and tells b.
      int32_t count = 0;
      if (timer) {
        double per_trip = std::max(*std::min_element(warm.begin(), warm.end()), 1e-7);
        count = static_cast<int32_t>(std::clamp(options.target_seconds / per_trip, 3.0, 1000.0));
        FRUGAL_RETURN_IF_ERROR(Send(t, peer, kPingPongTag,
                                    AsBytes(std::span<const int32_t>(&count, 1)), options.timeout));
      } else {
        FRUGAL_RETURN_IF_ERROR(Recv(t, peer, kPingPongTag,
                                    AsWritableBytes(std::span<int32_t>(&count, 1)),
                                    options.timeout));
      }
      iters = count;
    }
    std::vector<double> one_way;
    one_way.reserve(static_cast<size_t>(iters));
    for (int i = 0; i < iters; ++i) {
      Stopwatch watch;
      FRUGAL_RETURN_IF_ERROR(round_trip());
      one_way.push_back(watch.Seconds() / 2);
    }
    pair.samples.push_back({size, Median(one_way), iters});
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
  std::vector<PingPongPair> pairs;
  for (auto [a, b] : schedule) {
    std::optional<PingPongPair> mine;
    if (t.rank() == a || t.rank() == b) {
      FRUGAL_ASSIGN_OR_RETURN(PingPongPair pair, MeasurePair(t, a, b, options));
      if (t.rank() == a) mine = std::move(pair);
    }
    // Rank a (when not 0) sends its samples to rank 0.
    if (a != 0 && (t.rank() == a || t.rank() == 0)) {
      std::vector<double> flat(options.sizes.size() * 2 + 4);
      if (t.rank() == a) {
        for (size_t k = 0; k < mine->samples.size(); ++k) {
          flat[2 * k] = mine->samples[k].one_way_seconds;
          flat[2 * k + 1] = mine->samples[k].iters;
        }
        const size_t base = options.sizes.size() * 2;
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
          pair.samples.push_back(
              {options.sizes[k], flat[2 * k], static_cast<int>(flat[2 * k + 1])});
        }
        const size_t base = options.sizes.size() * 2;
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

namespace {

std::string Micros(double seconds) {
  const double us = seconds * 1e6;
  return us < 10     ? fmt::format("{:.2f}", us)
         : us < 1000 ? fmt::format("{:.1f}", us)
                     : fmt::format("{:.0f}", us);
}

}  // namespace

std::string PingPongTable(const std::vector<PingPongPair>& pairs) {
  std::string out;
  for (const auto& pair : pairs) {
    Table table({"pair", "bytes", "iters", "latency_us", "bandwidth_GB/s"}, {true});
    for (const auto& s : pair.samples) {
      table.AddRow({fmt::format("{}<->{}", pair.a, pair.b), FormatBytes(s.bytes),
                    fmt::format("{}", s.iters), Micros(s.one_way_seconds),
                    fmt::format("{:.3f}", static_cast<double>(s.bytes) / s.one_way_seconds / 1e9)});
    }
    out += table.Render();
    if (pair.fitted) {
      out += fmt::format(
          "fit {}<->{}: alpha = {} us, beta = {:.4f} ns/byte ({:.2f} GB/s), r2 = {:.4f}\n\n",
          pair.a, pair.b, Micros(pair.fit.alpha), pair.fit.beta * 1e9,
          pair.fit.beta > 0 ? 1e-9 / pair.fit.beta : 0.0, pair.fit.r2);
    } else {
      out += "\n";
    }
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
    }
    if (pair.fitted) {
      records.push_back({{"bench", "pingpong_fit"},
                         {"rank_a", pair.a},
                         {"rank_b", pair.b},
                         {"alpha_us", pair.fit.alpha * 1e6},
                         {"beta_s_per_byte", pair.fit.beta},
                         {"r2", pair.fit.r2}});
    }
  }
  return records;
}

}  // namespace frugal::bench
