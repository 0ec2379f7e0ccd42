// The consistency rules (see consistency.h).
//
// bsp: every push must be computed on the key's current version (a worker cannot have seen any
// other, since the server answers its pull only after the update); the server keeps the W pushes
// of the version and applies their average; a pull made with the push of version v waits for
// version v + 1, so each worker's pull is answered exactly once per update.
//
// lag: as bsp (a skip is a push without a gradient; the server averages every worker's last
// upload).
//
// backup: the first W - B pushes of version v are averaged and applied; a push of an older
// version (late for its update, or computed before it) is dropped. The pull made with a push of
// version v waits for v + 1, which exists already when the push was dropped. At the end of an
// epoch the workers rest one by one; once every worker that may still push has pushed version v,
// what is there is applied, so that nobody waits for a push that will not come.
//
// ssp with bound S: every push is applied as it arrives; the pull made with the push that brought
// the puller's clock to c waits until every worker not resting has a clock of at least c - S. So a
// worker S clocks ahead of the slowest goes on, one S + 1 ahead waits; with S = 0 a worker's pull
// after its k-th push sees every worker's k pushes applied, as under bsp.
//
// asp: pushes applied as they arrive, pulls answered at once.
//
// Under ssp and asp the staleness policy may drop (drop:T) or scale down (scale) a stale push.
#include "ps/consistency.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace frugal::ps_internal {

ConsistencyRules::ConsistencyRules(const ParameterServerConfig& config)
    : kind_(config.consistency),
      workers_(config.workers()),
      staleness_(config.staleness),
      backup_(config.backup),
      policy_(config.staleness_policy),
      drop_above_(config.drop_above) {}

PushAction ConsistencyRules::OnPush(uint64_t version, uint64_t pushed_version,
                                    std::string& error) const {
  error.clear();
  if (pushed_version > version) {
    error = fmt::format("computed on version {}, which the key (at version {}) has not reached",
                        pushed_version, version);
    return PushAction::kDrop;
  }
  switch (kind_) {
    case PsConsistency::kBsp:
    case PsConsistency::kLag:
      if (pushed_version != version) {
        error = fmt::format("computed on version {}, but the key is at version {}", pushed_version,
                            version);
      }
      return PushAction::kAccumulate;
    case PsConsistency::kBackup:
      return pushed_version == version ? PushAction::kAccumulate : PushAction::kDrop;
    case PsConsistency::kSsp:
    case PsConsistency::kAsp:
      if (policy_ == StalenessPolicy::kDrop && version - pushed_version > drop_above_) {
        return PushAction::kDrop;
      }
      return PushAction::kApply;
  }
  return PushAction::kDrop;
}

bool ConsistencyRules::Complete(int have, bool all_active_in) const {
  if (kind_ == PsConsistency::kBackup) {
    return have >= workers_ - backup_ || (have > 0 && all_active_in);
  }
  return have >= workers_;
}

int ConsistencyRules::Divisor(int have) const {
  return kind_ == PsConsistency::kBackup ? std::max(have, 1) : workers_;
}

double ConsistencyRules::Scale(uint64_t staleness) const {
  if (policy_ != StalenessPolicy::kScale || staleness <= 1) return 1.0;
  return 1.0 / static_cast<double>(staleness);
}

PullNeed ConsistencyRules::NeedOf(uint64_t pushed_version, uint64_t clock) const {
  switch (kind_) {
    case PsConsistency::kSsp: {
      const uint64_t bound = static_cast<uint64_t>(staleness_);
      return PullNeed{0, clock > bound ? clock - bound : 0};
    }
    case PsConsistency::kAsp:
      return PullNeed{0, 0};
    default:
      return PullNeed{pushed_version + 1, 0};
  }
}

bool ConsistencyRules::Ready(const PullNeed& need, uint64_t version,
                             uint64_t min_active_clock) const {
  return version >= need.min_version && min_active_clock >= need.min_clock;
}

std::vector<int> ConsistencyRules::Blocking(const PullNeed& need, std::span<const uint64_t> clocks,
                                            std::span<const char> resting,
                                            std::span<const char> have) const {
  std::vector<int> blocking;
  for (int w = 0; w < workers_; ++w) {
    const size_t i = static_cast<size_t>(w);
    const bool waits =
        kind_ == PsConsistency::kSsp ? resting[i] == 0 && clocks[i] < need.min_clock : have[i] == 0;
    if (waits) blocking.push_back(w);
  }
  return blocking;
}

int64_t ConsistencyRules::ScheduleStep(uint64_t progress) const {
  if (progress == 0) return 0;
  return static_cast<int64_t>((progress - 1) / static_cast<uint64_t>(workers_));
}

}  // namespace frugal::ps_internal
