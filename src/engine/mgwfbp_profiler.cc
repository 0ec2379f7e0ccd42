// The MG-WFBP profiler: the block comment of mgwfbp_profiler.h describes it.
#include "engine/mgwfbp_profiler.h"

#include <algorithm>
#include <chrono>

#include "engine/merge_plan.h"

namespace frugal::engine_internal {

MgWfbpProfiler::MgWfbpProfiler(int warmup_steps, int profile_steps, std::optional<CostParams> cost,
                               double max_group_bytes)
    : warmup_steps_(warmup_steps),
      profile_steps_(profile_steps),
      cost_(cost),
      max_group_bytes_(max_group_bytes) {}

void MgWfbpProfiler::RecordCompletion(uint32_t id, Clock::time_point submitted) {
  if (planned_) return;
  const size_t generation = generations_[id]++;
  ready_times_[generation][id] = submitted;
}

void MgWfbpProfiler::RecordReduction(double bytes, double seconds) {
  if (planned_) return;
  sample_bytes_.push_back(bytes);
  sample_seconds_.push_back(seconds);
}

std::optional<MgWfbpPlan> MgWfbpProfiler::MaybePlan(std::span<const double> bytes_by_id) {
  if (planned_ || bytes_by_id.empty()) return std::nullopt;
  const size_t needed = static_cast<size_t>(warmup_steps_ + profile_steps_);
  for (uint32_t id = 0; id < bytes_by_id.size(); ++id) {
    auto it = generations_.find(id);
    if (it == generations_.end() || it->second < needed) return std::nullopt;
  }
  std::map<uint32_t, double> offset_sum;
  for (size_t g = static_cast<size_t>(warmup_steps_); g < needed; ++g) {
    const auto& slot = ready_times_[g];
    Clock::time_point first = Clock::time_point::max();
    for (const auto& [id, when] : slot) first = std::min(first, when);
    for (const auto& [id, when] : slot) {
      offset_sum[id] += std::chrono::duration<double>(when - first).count();
    }
  }
  std::vector<PlanTensor> tensors;
  for (const auto& [id, sum] : offset_sum) {
    if (id >= bytes_by_id.size()) continue;
    tensors.push_back({id, bytes_by_id[id], sum / std::max(1, profile_steps_)});
  }
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const PlanTensor& a, const PlanTensor& b) { return a.ready < b.ready; });
  MgWfbpPlan plan;
  if (cost_) {
    plan.cost = *cost_;
  } else if (StatusOr<LinearFit> fit = FitAlphaBeta(sample_bytes_, sample_seconds_); fit.ok()) {
    plan.cost.alpha = std::max(0.0, fit->alpha);
    plan.cost.beta = std::max(0.0, fit->beta);
  } else {
    double mean = 0;
    for (double s : sample_seconds_) mean += s;
    plan.cost.alpha = sample_seconds_.empty() ? 0 : mean / sample_seconds_.size();
  }
  for (const MergeGroup& g : PlanMerges(tensors, plan.cost, max_group_bytes_)) {
    plan.groups.push_back(g.ids);
  }
  planned_ = true;
  return plan;
}

}  // namespace frugal::engine_internal
