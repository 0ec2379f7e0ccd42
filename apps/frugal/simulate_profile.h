// Per-layer compute times for `frugal simulate`, from a measured table or from the Chrome trace
// that `frugal train --timeline FILE` writes.
//
// Table (CSV, '#' comments): `name,floats,forward_ms,backward_ms`, one line per layer (a
// gradient tensor) in forward order.
//
// Trace: the events of one rank. Each step of the "compute" row has a "forward" and a
// "backward" span; each gradient's row "tensor NAME" has a "queue" span that starts when the
// backward hook submitted it, i.e. when the gradient became ready, or a "ready" mark where the
// step kept its gradients (gossip, Local SGD's local steps). Per step (the first one,
// warm-up, is skipped when there are more), the gradients in ready order get the backward time
// since the previous one was ready (the first since the backward began); each tensor's backward
// time is the median over the steps, and the step's median forward time is split over the
// tensors in proportion to their backward times (the trace has no per-layer forward). `order`
// gives the forward order (the model's parameters); every name of it must be in the trace. The
// result starts with one more layer, kOptimizerLayer, without gradient: its forward time is the
// median "step" span, the optimizer's step (the simulator runs it before each forward).
// rank kSlowestRank: the layers of the rank whose compute (the sum of the layers' forward and
// backward times and the optimizer's step) is the largest of the ranks with a "compute" row, the
// lowest such rank on a tie: workers in lock step (BSP, a gossip round with its neighbours) go
// at the pace of the slowest.
// rank kLockstepRank: the slowest rank's layers scaled so that a step's compute is the median over
// the steps of the largest compute (forward, backward and optimizer spans) of any rank in that
// step: ranks in lock step wait each step for whichever is slowest then, and on shared cores (or
// with jitter) that is not always the same rank.
//
// Errors: kInvalidArgument naming the file and the line or what is missing.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

inline constexpr char kOptimizerLayer[] = "(optimizer step)";
inline constexpr int kSlowestRank = -1;
inline constexpr int kLockstepRank = -2;

struct ProfiledLayer {
  std::string name;
  size_t floats = 0;  // from the table; 0 from a trace (the model gives it)
  double forward_s = 0;
  double backward_s = 0;
};

StatusOr<std::vector<ProfiledLayer>> ParseLayerTable(std::string_view text,
                                                     std::string_view source);

StatusOr<std::vector<ProfiledLayer>> LayersFromTrace(std::string_view trace_json, int rank,
                                                     const std::vector<std::string>& order,
                                                     std::string_view source);

}  // namespace frugal::apps
