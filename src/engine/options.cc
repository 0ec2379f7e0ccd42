// The engine's options: names of the overlap modes and policies, their validation, and the
// fingerprint of what every rank must share.
#include "engine/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/negotiation.h"
#include "frugal/check.h"
#include "frugal/collectives.h"
#include "frugal/fingerprint.h"
#include "frugal/random.h"

namespace frugal {

std::string_view OverlapModeName(OverlapMode mode) {
  switch (mode) {
    case OverlapMode::kNone:
      return "none";
    case OverlapMode::kWfbp:
      return "wfbp";
    case OverlapMode::kFusion:
      return "fusion";
    case OverlapMode::kPriority:
      return "priority";
  }
  return "?";
}

StatusOr<OverlapMode> ParseOverlapMode(std::string_view name) {
  for (OverlapMode mode :
       {OverlapMode::kNone, OverlapMode::kWfbp, OverlapMode::kFusion, OverlapMode::kPriority}) {
    if (name == OverlapModeName(mode)) return mode;
  }
  return InvalidArgumentError(
      fmt::format("unknown overlap mode '{}' (known: none, wfbp, fusion, priority)", name));
}

std::string_view FusionPolicyName(FusionPolicy policy) {
  switch (policy) {
    case FusionPolicy::kOff:
      return "off";
    case FusionPolicy::kCycle:
      return "cycle";
    case FusionPolicy::kMgWfbp:
      return "mgwfbp";
  }
  return "?";
}

StatusOr<FusionPolicy> ParseFusionPolicy(std::string_view name) {
  for (FusionPolicy policy : {FusionPolicy::kOff, FusionPolicy::kCycle, FusionPolicy::kMgWfbp}) {
    if (name == FusionPolicyName(policy)) return policy;
  }
  return InvalidArgumentError(
      fmt::format("unknown fusion policy '{}' (known: off, cycle, mgwfbp)", name));
}

void ApplyOverlapMode(OverlapMode mode, EngineOptions& options, FusionPolicy fusion) {
  switch (mode) {
    case OverlapMode::kNone:
    case OverlapMode::kWfbp:
      options.fusion = FusionPolicy::kOff;
      options.schedule = SchedulePolicy::kFifo;
      break;
    case OverlapMode::kFusion:
      options.fusion = fusion;
      options.schedule = SchedulePolicy::kFifo;
      break;
    case OverlapMode::kPriority:
      options.fusion = FusionPolicy::kOff;
      options.schedule = SchedulePolicy::kPriority;
      break;
  }
}

std::string StallReport::ToString() const {
  return fmt::format("tensor '{}' submitted by {} {} but not by {} {} for {:.1f} s", tensor,
                     submitted.size() == 1 ? "rank" : "ranks",
                     engine_internal::JoinRanks(submitted), missing.size() == 1 ? "rank" : "ranks",
                     engine_internal::JoinRanks(missing), seconds);
}

double EngineStats::hidden_fraction() const {
  if (comm_seconds <= 0) return 0;
  return std::clamp(1.0 - exposed_seconds / comm_seconds, 0.0, 1.0);
}

namespace engine_internal {

Status ResolveOptions(EngineOptions& options) {
  FRUGAL_CHECK_GE(options.cycle_time.count(), 0, "cycle time");
  FRUGAL_CHECK_GT(options.timeout.count(), 0, "timeout");
  FRUGAL_CHECK_GT(options.fusion_threshold_bytes, size_t{0}, "fusion threshold");
  FRUGAL_CHECK_GE(options.mgwfbp_warmup_steps, 0);
  FRUGAL_CHECK_GE(options.mgwfbp_profile_steps, 1);
  if (!options.stall_warning) options.stall_warning = options.timeout / 2;
  // A stall that lasts reaches the timeout of the negotiation, which ends the job: a warning or
  // shutdown not shorter than it would never be seen.
  for (const auto& [name, value] :
       {std::pair<const char*, Duration>{"warning", *options.stall_warning},
        {"shutdown", options.stall_shutdown}}) {
    if (value > Duration::zero() && value >= options.timeout) {
      return InvalidArgumentError(fmt::format(
          "engine start: the stall {} ({} ms) must be shorter than the timeout ({} ms), which ends "
          "the job first",
          name, value.count(), options.timeout.count()));
    }
  }
  return Status::Ok();
}

namespace {

uint64_t SchedulingFingerprint(const EngineOptions& o) {
  const std::string text = fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", static_cast<int>(o.fusion), o.fusion_threshold_bytes,
      static_cast<int>(o.schedule), o.partition_bytes, o.cycle_time.count(), o.mgwfbp_warmup_steps,
      o.mgwfbp_profile_steps, o.reduction_cost ? o.reduction_cost->alpha : -1.0,
      o.reduction_cost ? o.reduction_cost->beta : -1.0, o.detect_unmatched);
  return TensorId(text);
}

}  // namespace

Status CheckSameSchedulingOptions(Transport& t, const EngineOptions& options) {
  CollectiveOptions collective;
  collective.timeout = options.timeout;
  auto gathered = RanksDifferingFromRankZero(t, SchedulingFingerprint(options), collective);
  if (!gathered.ok()) return gathered.status().Annotate("engine start");
  const std::vector<int>& differing = *gathered;
  if (differing.empty()) return Status::Ok();
  return InvalidArgumentError(fmt::format(
      "engine start: the scheduling options (fusion, threshold, schedule, partition, cycle "
      "time) of {} {} differ from rank 0's; every rank must use the same",
      differing.size() == 1 ? "rank" : "ranks", JoinRanks(differing)));
}

}  // namespace engine_internal
}  // namespace frugal
