// What the --inject faults (inject_spec.h) do in `frugal train`: each rank takes the faults that
// name it, at the step (or the step of an epoch, epoch=E) they name.
//   kill, stop     as the step begins, the rank prints one line naming itself, the fault and the
//                  step on stderr, then raises SIGKILL or SIGSTOP;
//   slow           a straggler (TrainOptions::stragglers), like --straggler R:F;
//   nan            TrainOptions::nan_faults: the step driver puts a NaN into the gradient;
//   drop, corrupt  the rank's transport is wrapped (fault_transport.h) and the fault armed as the
//                  step begins, with one line naming the rank, the fault and the step: the first
//                  message sent from then on is lost, or the first compressed payload (one that
//                  starts with a valid wire header, compress_wire.h) gets a bit of its header
//                  flipped, so that the receiver refuses it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "frugal/fault_transport.h"
#include "frugal/status.h"
#include "frugal/transport.h"
#include "frugal_torch/trainer.h"
#include "inject_spec.h"
#include "restarts.h"

namespace frugal::apps {

// kInvalidArgument when a fault names a rank the job does not have.
Status CheckFaultRanks(const std::vector<FaultSpec>& faults, int world_size);

// kInvalidArgument when a nan fault names a parameter the model `model` does not have (the
// message lists those it has): checked before anything is launched.
Status CheckNanTensors(const std::vector<FaultSpec>& faults, std::string_view model);

// Adds the slow faults to options.stragglers (kInvalidArgument when --straggler slows the same
// rank) and the nan faults to options.nan_faults.
Status AddTrainFaults(const std::vector<FaultSpec>& faults, frugal_torch::TrainOptions& options);

// The faults of one rank that act while it runs.
class RankFaults {
 public:
  // `notes`: where a killed or stopped rank notes why (restarts.h); must outlive this object.
  RankFaults(const std::vector<FaultSpec>& faults, int rank, const RestartNotes& notes);

  // `world`, or a wrapper of it that carries this rank's drop or corrupt fault (owned by this
  // object, which must outlive its use).
  Transport& Wrap(Transport& world);
  // As step (FedAvg: round) `step` over the run begins, step `step_in_epoch` of epoch `epoch`
  // (from 1; 0 for FedAvg's rounds): notes the progress, kills or stops the rank, or arms its
  // transport fault.
  void BeforeStep(int64_t step, int64_t epoch, int64_t step_in_epoch);
  // The hooks for the training loop's callbacks (TrainCallbacks::before_step) and for FedAvg's
  // (before_round: faults by round); empty when the rank has nothing to do.
  std::function<void(int64_t, int64_t, int64_t)> StepHook();
  std::function<void(int64_t)> RoundHook();

 private:
  bool Idle() const { return mine_.empty() && !transport_fault_ && !notes_.active(); }

  int rank_;
  const RestartNotes& notes_;
  std::vector<FaultSpec> mine_;
  std::shared_ptr<TransportFault> transport_fault_;
  FaultSpec arm_;  // when transport_fault_ is set: when to arm it
  std::unique_ptr<Transport> wrapped_;
};

}  // namespace frugal::apps
