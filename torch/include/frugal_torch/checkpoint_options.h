// When and where a training run saves checkpoints and which one it resumes (`frugal train
// --checkpoint-dir DIR --checkpoint-every N|epoch --keep K --resume DIR`). Torch-free, like
// trainer.h; checkpoint.h says what a checkpoint holds.
#pragma once

#include <cstdint>
#include <string>

#include "frugal/checkpoint.h"
#include "frugal/status.h"

namespace frugal_torch {

struct CheckpointOptions {
  std::string dir;           // where checkpoints are written; empty: none
  int64_t every_steps = 0;   // > 0: after every N-th step (FedAvg: round)
  bool every_epoch = false;  // after every epoch's evaluation (FedAvg: every round)
  int keep = 2;              // committed checkpoints kept
  std::string resume;        // a checkpoint (directory) to resume; empty: start afresh
  // What must be equal to resume (the command line's choices); the world size is checked too.
  frugal::CheckpointIdentity identity;
  bool saves() const { return !dir.empty() && (every_steps > 0 || every_epoch); }
};

// kInvalidArgument naming the bad option (keep < 1, a negative interval, an interval without a
// directory).
frugal::Status ValidateCheckpointOptions(const CheckpointOptions& options);

}  // namespace frugal_torch
