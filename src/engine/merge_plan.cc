// MG-WFBP (Shi, Chu and Li, "MG-WFBP: Efficient data communication for distributed synchronous
// SGD algorithms", INFOCOM 2019): merge gradients where merging shortens the iteration.
//
// Model: one reduction of m bytes takes alpha + beta * m seconds and reductions run one after
// another on the engine thread. Tensors become ready in the order given, tensor l at ready_l.
// Without merging, the group g that holds the tensors before l starts at
// start_g = max(ready_g, end of the previous group) and ends at start_g + alpha + beta * bytes_g,
// and l starts at max(ready_l, end_g). Merging l into g makes g start at max(start_g, ready_l)
// and end alpha + beta * (bytes_g + bytes_l) later. Comparing the two end times: if
// ready_l >= end_g the link is idle when l arrives and merging only delays g; otherwise the
// separate schedule ends at start_g + 2 alpha + beta (bytes_g + bytes_l) and the merged one at
// max(start_g, ready_l) + alpha + beta (bytes_g + bytes_l), so merging wins exactly when
//     ready_l < start_g + alpha,
// i.e. when l arrives within one startup latency of g's start. PlanMerges walks the tensors in
// order and applies that rule greedily (each merge moves g's ready and start to the merged
// values before the next tensor is considered), never letting a group exceed max_bytes.
#include "engine/merge_plan.h"

#include <algorithm>

namespace frugal::engine_internal {

std::vector<MergeGroup> PlanMerges(std::span<const PlanTensor> tensors, const CostParams& cost,
                                   double max_bytes) {
  std::vector<MergeGroup> groups;
  double previous_end = 0;  // end of the group before groups.back()
  for (const PlanTensor& tensor : tensors) {
    if (!groups.empty()) {
      MergeGroup& g = groups.back();
      if (tensor.ready < g.start + cost.alpha && g.bytes + tensor.bytes <= max_bytes) {
        g.ids.push_back(tensor.id);
        g.bytes += tensor.bytes;
        g.ready = std::max(g.ready, tensor.ready);
        g.start = std::max(g.ready, previous_end);
        g.end = g.start + cost.alpha + cost.beta * g.bytes;
        continue;
      }
      previous_end = g.end;
    }
    MergeGroup g;
    g.ids.push_back(tensor.id);
    g.bytes = tensor.bytes;
    g.ready = tensor.ready;
    g.start = std::max(tensor.ready, previous_end);
    g.end = g.start + cost.alpha + cost.beta * g.bytes;
    groups.push_back(std::move(g));
  }
  return groups;
}

double UnmergedEnd(std::span<const PlanTensor> tensors, const CostParams& cost) {
  double end = 0;
  for (const PlanTensor& tensor : tensors) {
    end = std::max(end, tensor.ready) + cost.alpha + cost.beta * tensor.bytes;
  }
  return end;
}

}  // namespace frugal::engine_internal
