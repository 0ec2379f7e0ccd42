// When a training loop saves checkpoints, and how it resumes (internal to frugal_torch; the
// loops in trainer.cc and fedavg_trainer.cc use it, checkpoint.h says what is saved).
//
// A loop counts positions (steps, or FedAvg's rounds). DueAfterStep says whether to save after a
// position that does not end an epoch (every `every_steps` positions); DueAfterEpoch whether to
// save after an epoch's evaluation (every epoch, or when the position is a multiple of
// every_steps), so that a checkpoint at the end of an epoch always comes after its evaluation.
// Save and Resume run `visit` on the thread that owns the transport (through `run_save` and
// `runner`).
#pragma once

#include <cstdint>
#include <functional>

#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/strategy.h"
#include "frugal_torch/checkpoint.h"
#include "frugal_torch/trainer.h"

namespace frugal_torch::internal {

// The last evaluation of a run (scope "last/" of the loop's position): a run that resumes with
// nothing left to train (its checkpoint is the run's last, or followed the epoch that reached
// --stop-at-accuracy) reports it instead of evaluating again.
struct LastEvaluation {
  int64_t done = 0;  // epochs (FedAvg: rounds) evaluated so far
  double train_loss = 0;
  double test_loss = 0;
  double test_accuracy = 0;
  uint64_t bytes_sent = 0;  // per worker, over the run
  void VisitState(frugal::StateVisitor& v);
  // Whether a run resuming after this evaluation stops at once (--stop-at-accuracy).
  bool ReachedTarget(double stop_at_accuracy) const {
    return done > 0 && stop_at_accuracy > 0 && test_accuracy >= stop_at_accuracy;
  }
  // The summary's losses, accuracy and bytes, from this evaluation.
  void ReportIn(TrainSummary& summary) const;
};

class RunCheckpoints {
 public:
  // How a save runs: `save` (collective over the ranks whose files make the set) for checkpoint
  // `position`, on the thread that owns their transport.
  using SaveRunner = std::function<frugal::Status(
      uint64_t position, const std::function<frugal::Status(frugal::Transport&)>& save)>;

  // Save runs through `run_save` (a strategy's RunCheckpoint; FedAvg's, with the servers when
  // there are any). Resume runs through `runner`.
  RunCheckpoints(const CheckpointOptions& options, frugal::TransportRunner& runner,
                 frugal::Duration timeout, SaveRunner run_save)
      : options_(options), runner_(runner), timeout_(timeout), run_save_(std::move(run_save)) {}

  bool resuming() const { return !options_.resume.empty(); }
  // Reads this rank's file of options.resume and restores it through `visit`; returns the
  // checkpoint's position. kInvalidArgument / kMalformed / kNotFound naming the file and field.
  frugal::StatusOr<uint64_t> Resume(int rank, int world_size,
                                    const std::function<void(frugal::StateVisitor&)>& visit);

  bool DueAfterStep(int64_t position, bool ends_epoch) const {
    return options_.dir.size() > 0 && options_.every_steps > 0 && !ends_epoch &&
           position % options_.every_steps == 0;
  }
  bool DueAfterEpoch(int64_t position) const {
    return options_.dir.size() > 0 &&
           (options_.every_epoch ||
            (options_.every_steps > 0 && position % options_.every_steps == 0));
  }

  // Collective: saves the state `visit` gives as checkpoint `position`. Returns the bytes the
  // ranks' exchange about it sent from this rank (not training traffic).
  frugal::StatusOr<uint64_t> Save(uint64_t position,
                                  const std::function<void(frugal::StateVisitor&)>& visit);

  int64_t saves() const { return saves_; }
  double seconds() const { return seconds_; }  // in Save, this rank
  uint64_t bytes() const { return bytes_; }    // this rank's last file

 private:
  const CheckpointOptions& options_;
  frugal::TransportRunner& runner_;
  frugal::Duration timeout_;
  SaveRunner run_save_;
  int64_t saves_ = 0;
  double seconds_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace frugal_torch::internal
