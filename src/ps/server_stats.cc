// The servers' counts: the staleness histogram and its quantiles, merging, and the kStats
// payload (see server_stats.h).
#include "ps/server_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/wire.h"

namespace frugal {

void WorkerPushStats::Count(uint64_t s) {
  const size_t bucket = static_cast<size_t>(std::min(s, kMaxStaleness));
  if (staleness.size() <= bucket) staleness.resize(bucket + 1, 0);
  ++staleness[bucket];
  ++applied;
}

void WorkerPushStats::Merge(const WorkerPushStats& other) {
  applied += other.applied;
  dropped += other.dropped;
  skipped += other.skipped;
  if (staleness.size() < other.staleness.size()) staleness.resize(other.staleness.size(), 0);
  for (size_t s = 0; s < other.staleness.size(); ++s) staleness[s] += other.staleness[s];
}

uint64_t WorkerPushStats::Quantile(double q) const {
  uint64_t total = 0;
  for (uint64_t c : staleness) total += c;
  if (total == 0) return 0;
  // The smallest s whose cumulative count reaches ceil(q * total) (at least one push).
  const uint64_t need =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(total))));
  uint64_t seen = 0;
  for (size_t s = 0; s < staleness.size(); ++s) {
    seen += staleness[s];
    if (seen >= need) return s;
  }
  return staleness.size() - 1;
}

uint64_t WorkerPushStats::Max() const {
  for (size_t s = staleness.size(); s-- > 0;) {
    if (staleness[s] != 0) return s;
  }
  return 0;
}

WorkerPushStats ParameterServerStats::Total() const {
  WorkerPushStats total;
  for (const WorkerPushStats& w : workers) total.Merge(w);
  return total;
}

namespace ps_internal {
namespace {

using engine_internal::WireReader;
using engine_internal::WireWriter;

constexpr std::string_view kStatsMagic = "FPSS";
constexpr uint16_t kStatsVersion = 2;

}  // namespace

std::vector<std::byte> EncodeServerStats(const ServerStats& stats) {
  WireWriter w;
  engine_internal::PutHeader(w, kStatsMagic, kStatsVersion);
  w.Put<uint64_t>(stats.bytes_in);
  w.Put<uint64_t>(stats.bytes_out);
  w.Put<uint64_t>(stats.pushes);
  w.Put<uint64_t>(stats.updates);
  w.Put<uint32_t>(static_cast<uint32_t>(stats.workers.size()));
  for (const WorkerPushStats& s : stats.workers) {
    w.Put<uint64_t>(s.applied);
    w.Put<uint64_t>(s.dropped);
    w.Put<uint64_t>(s.skipped);
    uint32_t entries = 0;
    for (uint64_t c : s.staleness) entries += c != 0 ? 1 : 0;
    w.Put<uint32_t>(entries);
    for (size_t v = 0; v < s.staleness.size(); ++v) {
      if (s.staleness[v] == 0) continue;
      w.Put<uint64_t>(v);
      w.Put<uint64_t>(s.staleness[v]);
    }
  }
  return w.Take();
}

StatusOr<ServerStats> DecodeServerStats(std::span<const std::byte> payload, int workers) {
  WireReader r(payload);
  if (auto error = engine_internal::GetHeader(r, kStatsMagic, kStatsVersion)) {
    return MalformedError("parameter-server stats: " + *error);
  }
  auto truncated = [] { return MalformedError("parameter-server stats: truncated"); };
  ServerStats stats;
  uint32_t count = 0;
  if (!r.Get(stats.bytes_in) || !r.Get(stats.bytes_out) || !r.Get(stats.pushes) ||
      !r.Get(stats.updates) || !r.Get(count)) {
    return truncated();
  }
  if (count != static_cast<uint32_t>(workers)) {
    return MalformedError(
        fmt::format("parameter-server stats: {} workers, the job has {}", count, workers));
  }
  stats.workers.resize(count);
  for (WorkerPushStats& s : stats.workers) {
    uint32_t entries = 0;
    if (!r.Get(s.applied) || !r.Get(s.dropped) || !r.Get(s.skipped) || !r.Get(entries)) {
      return truncated();
    }
    if (entries > WorkerPushStats::kMaxStaleness + 1 || entries > r.left() / 16) {
      return MalformedError(fmt::format("parameter-server stats: {} histogram entries", entries));
    }
    uint64_t counted = 0;
    for (uint32_t e = 0; e < entries; ++e) {
      uint64_t value = 0;
      uint64_t n = 0;
      if (!r.Get(value) || !r.Get(n)) return truncated();
      if (value > WorkerPushStats::kMaxStaleness || n == 0 ||
          (!s.staleness.empty() && value < s.staleness.size())) {
        return MalformedError("parameter-server stats: bad histogram entry");
      }
      s.staleness.resize(static_cast<size_t>(value) + 1, 0);
      s.staleness[static_cast<size_t>(value)] = n;
      counted += n;
    }
    if (counted != s.applied) {
      return MalformedError(
          fmt::format("parameter-server stats: {} applied pushes, the histogram counts {}",
                      s.applied, counted));
    }
  }
  if (r.left() != 0) return MalformedError("parameter-server stats: trailing bytes");
  return stats;
}

}  // namespace ps_internal
}  // namespace frugal
