// Learning-rate schedules: optional linear warm-up, then constant, step decay or cosine decay.
// Pure functions of the step, so every rank computes the same rate without communication.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal_torch {

enum class LrScheduleKind { kConstant, kStep, kCosine };

// "constant", "step" or "cosine"; kInvalidArgument otherwise.
frugal::StatusOr<LrScheduleKind> ParseLrScheduleKind(std::string_view name);
std::string_view LrScheduleName(LrScheduleKind kind);

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double base_lr = 0.1;
  // Linear warm-up over the first warmup_steps steps: base_lr * (step + 1) / warmup_steps.
  int64_t warmup_steps = 0;
  // kStep: the rate is multiplied by `gamma` at each milestone step (sorted ascending).
  std::vector<int64_t> milestones;
  double gamma = 0.1;
  // kCosine: decays from base_lr to min_lr between warmup_steps and total_steps.
  int64_t total_steps = 0;
  double min_lr = 0;
};

// The rate for 0-based `step`.
double LearningRate(const LrSchedule& schedule, int64_t step);

}  // namespace frugal_torch
