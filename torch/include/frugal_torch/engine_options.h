// How `frugal train` overlaps gradient communication with computation (torch-free, so that the
// command-line layer can fill it without torch headers). See frugal_torch/engine_optimizer.h.
#pragma once

#include "frugal/engine.h"

namespace frugal_torch {

struct OverlapOptions {
  frugal::OverlapMode mode = frugal::OverlapMode::kPriority;
  // kFusion: the fusion policy (kCycle: Horovod's; kMgWfbp: merges planned from the model).
  frugal::FusionPolicy fusion = frugal::FusionPolicy::kMgWfbp;
  bool od_sgd = false;     // apply the previous step's averaged gradient (one-step delay)
  bool skip_comm = false;  // compute only: gradients are not exchanged
  // Cycle time, thresholds, partition size, stall inspector, logger. fusion and schedule are set
  // from `mode`; timeout from the training options.
  frugal::EngineOptions engine;
  bool timeline = false;  // record a Chrome trace of every rank (TrainSummary::timeline_json)
};

}  // namespace frugal_torch
