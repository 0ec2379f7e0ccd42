// The MG-WFBP profiler (internal): measures what the merge plan needs and makes the plan. No
// threads or transport: the engine feeds it on rank 0 and sends the plan to every rank.
//
// Every completed tensor records its local submission time per generation (its n-th
// completion). Once every tensor completed warmup_steps + profile_steps generations, MaybePlan
// averages, over the profiled generations, each tensor's ready time relative to the first tensor
// of the generation, takes the reduction cost (the given one, or alpha and beta fitted by least
// squares on the (bytes, seconds) of the single-tensor reductions recorded; their mean as alpha
// when a fit is impossible) and runs PlanMerges on the tensors in order of readiness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "frugal/cost_model.h"
#include "frugal/timer.h"

namespace frugal::engine_internal {

struct MgWfbpPlan {
  std::vector<std::vector<uint32_t>> groups;  // tensor ids, in the order backward produces them
  CostParams cost;                            // alpha and beta the plan was made with
};

class MgWfbpProfiler {
 public:
  // `cost`: the reduction cost to plan with; absent, fitted on the recorded reductions.
  MgWfbpProfiler(int warmup_steps, int profile_steps, std::optional<CostParams> cost,
                 double max_group_bytes);

  // Tensor `id` completed; it had been submitted at `submitted`.
  void RecordCompletion(uint32_t id, Clock::time_point submitted);
  // A reduction of one tensor (or partition) of `bytes` took `seconds`.
  void RecordReduction(double bytes, double seconds);

  // The plan, once every tensor (id < bytes_by_id.size(), its size in bytes) has completed
  // enough generations; nullopt before, and after the plan has been made once.
  std::optional<MgWfbpPlan> MaybePlan(std::span<const double> bytes_by_id);
  bool planned() const { return planned_; }

 private:
  const int warmup_steps_;
  const int profile_steps_;
  const std::optional<CostParams> cost_;
  const double max_group_bytes_;
  bool planned_ = false;
  std::map<uint32_t, size_t> generations_;
  std::map<size_t, std::map<uint32_t, Clock::time_point>> ready_times_;  // by generation
  std::vector<double> sample_bytes_;
  std::vector<double> sample_seconds_;
};

}  // namespace frugal::engine_internal
