// Learning-rate schedules (Goyal et al. 2017 warm-up; step decay; Loshchilov & Hutter cosine).
//
// LearningRate: during warm-up (step < warmup_steps) the rate grows linearly,
// base_lr * (step + 1) / warmup_steps, so that large global batches do not diverge early. After
// it, kConstant keeps base_lr; kStep multiplies base_lr by gamma once for every milestone that
// step has reached; kCosine follows min_lr + (base_lr - min_lr) * (1 + cos(pi * t)) / 2 with
// t = (step - warmup_steps) / (total_steps - warmup_steps) clamped to [0, 1].
#include "frugal_torch/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace frugal_torch {

frugal::StatusOr<LrScheduleKind> ParseLrScheduleKind(std::string_view name) {
  if (name == "constant") return LrScheduleKind::kConstant;
  if (name == "step") return LrScheduleKind::kStep;
  if (name == "cosine") return LrScheduleKind::kCosine;
  return frugal::InvalidArgumentError("unknown learning-rate schedule '" + std::string(name) +
                                      "' (known: constant, step, cosine)");
}

std::string_view LrScheduleName(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kStep:
      return "step";
    case LrScheduleKind::kCosine:
      return "cosine";
  }
  return "?";
}

double LearningRate(const LrSchedule& schedule, int64_t step) {
  FRUGAL_CHECK_GE(step, int64_t{0});
  if (step < schedule.warmup_steps) {
    return schedule.base_lr * static_cast<double>(step + 1) /
           static_cast<double>(schedule.warmup_steps);
  }
  switch (schedule.kind) {
    case LrScheduleKind::kConstant:
      return schedule.base_lr;
    case LrScheduleKind::kStep: {
      double lr = schedule.base_lr;
      for (int64_t milestone : schedule.milestones) {
        if (step >= milestone) lr *= schedule.gamma;
      }
      return lr;
    }
    case LrScheduleKind::kCosine: {
      const int64_t span = schedule.total_steps - schedule.warmup_steps;
      if (span <= 0) return schedule.min_lr;
      const double t = std::clamp(
          static_cast<double>(step - schedule.warmup_steps) / static_cast<double>(span), 0.0, 1.0);
      return schedule.min_lr +
             (schedule.base_lr - schedule.min_lr) * (1.0 + std::cos(std::numbers::pi * t)) / 2.0;
    }
  }
  return schedule.base_lr;
}

}  // namespace frugal_torch
