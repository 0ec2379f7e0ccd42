// What a training run does when a gradient is not finite (NaN or infinite): `--nan-policy`, and
// `--inject nan:...` to make one on purpose. Torch-free, like trainer.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frugal/status.h"

namespace frugal_torch {

enum class NanPolicy {
  // The rank whose gradient is not finite stops the job with one line naming itself, the step
  // and the tensor; the gradient is replaced by zeros before it is sent, so no peer receives it.
  kAbort,
  // Every rank skips the update of that step: before any gradient of a step whose gradients are
  // averaged is sent, the ranks agree whether one of them has a non-finite gradient (so the
  // gradients are sent after backward, --overlap none). A step without averaging (a local step
  // of Local SGD) is skipped by the rank alone.
  kSkip,
};

// "abort" or "skip"; kInvalidArgument otherwise.
frugal::StatusOr<NanPolicy> ParseNanPolicy(std::string_view name);

// A NaN put into one gradient on purpose.
struct NanFault {
  int rank = 0;
  int64_t step = 0;    // 0-based over the run, or of the epoch `epoch`
  int64_t epoch = 0;   // 0, or the epoch (from 1) whose steps `step` counts
  std::string tensor;  // a parameter's name; empty: the first trainable parameter
};

}  // namespace frugal_torch
