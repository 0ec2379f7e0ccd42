// `--inject SPEC` (repeatable): faults on demand, for testing what a job does when a rank fails.
//   kill:rank=R,step=S     rank R dies (SIGKILL) as step S begins
//   stop:rank=R,step=S     rank R freezes (SIGSTOP) as step S begins
//   slow:rank=R,factor=F   rank R's forward and backward take F times as long (--straggler R:F)
//   nan:rank=R,step=S[,tensor=NAME]
//                          a NaN appears in rank R's gradient of NAME (default: the first
//                          parameter) in step S
//   corrupt:rank=R,step=S  the first compressed payload rank R sends from step S on has a bit
//                          flipped in its header
//   drop:rank=R,step=S     the first message rank R sends from step S on is lost
// Steps count from 0 over the whole run (FedAvg: rounds). Every kind but slow also takes
// epoch=E (E >= 1): step=S then counts the rank's own steps of epoch E from 0, so a fault can be
// placed after the checkpoint of an epoch's end even where the workers share an epoch at their own
// pace (parameter-server ssp, asp, backup); not with FedAvg, which counts rounds. A fault fires on
// the first attempt of a job only: a job restarted by --max-restarts runs without them. Pure
// parsing; what each fault does is wired in train_cmd.cc and the layers it names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal::apps {

enum class FaultKind { kKill, kStop, kSlow, kNan, kCorrupt, kDrop };

struct FaultSpec {
  FaultKind kind = FaultKind::kKill;
  int rank = 0;
  int64_t step = 0;    // all but slow
  int64_t epoch = 0;   // all but slow: 0, or the epoch (from 1) whose steps `step` counts
  double factor = 1;   // slow
  std::string tensor;  // nan: empty means the first parameter
  std::string text;    // as given
  // Whether the fault fires as the step `step` (over the run) begins, step `step_in_epoch` of epoch
  // `epoch` (from 1).
  bool FiresAt(int64_t step, int64_t epoch, int64_t step_in_epoch) const {
    return this->epoch > 0 ? epoch == this->epoch && step_in_epoch == this->step
                           : step == this->step;
  }
};

// kInvalidArgument naming the spec and what is accepted for a bad kind, a missing, unknown or
// repeated key, or a value out of range.
StatusOr<FaultSpec> ParseFaultSpec(std::string_view text);

// Every --inject item; kInvalidArgument for the first bad one, or for two faults of the same kind
// on the same rank.
StatusOr<std::vector<FaultSpec>> ParseFaultSpecs(const std::vector<std::string>& items);

}  // namespace frugal::apps
