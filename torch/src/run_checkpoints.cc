// Saving and resuming the checkpoints of a training loop (see run_checkpoints.h).
#include "run_checkpoints.h"

#include <fmt/format.h>

#include "frugal/timer.h"

namespace frugal_torch::internal {

using frugal::Status;
using frugal::StatusOr;

void LastEvaluation::VisitState(frugal::StateVisitor& v) {
  frugal::StateVisitor::Scope scope(v, "last");
  v.I64("done", done);
  v.F64("train_loss", train_loss);
  v.F64("test_loss", test_loss);
  v.F64("test_accuracy", test_accuracy);
  v.U64("bytes_sent", bytes_sent);
}

void LastEvaluation::ReportIn(TrainSummary& summary) const {
  summary.train_loss = train_loss;
  summary.test_loss = test_loss;
  summary.test_accuracy = test_accuracy;
  summary.bytes_sent_per_worker = bytes_sent;
}

StatusOr<uint64_t> RunCheckpoints::Resume(int rank, int world_size,
                                          const std::function<void(frugal::StateVisitor&)>& visit) {
  uint64_t step = 0;
  FRUGAL_RETURN_IF_ERROR(runner_.Run("resume", [&](frugal::Transport&) -> Status {
    FRUGAL_ASSIGN_OR_RETURN(step, LoadRankCheckpoint(options_, rank, world_size, visit));
    return Status::Ok();
  }));
  return step;
}

StatusOr<uint64_t> RunCheckpoints::Save(uint64_t position,
                                        const std::function<void(frugal::StateVisitor&)>& visit) {
  const frugal::Stopwatch watch;
  uint64_t exchanged = 0;
  const auto save = [&](frugal::Transport& t) -> Status {
    const uint64_t before = t.bytes_sent();
    Status status = SaveRankCheckpoint(t, options_, position, visit, &bytes_, timeout_);
    exchanged = t.bytes_sent() - before;
    return status;
  };
  FRUGAL_RETURN_IF_ERROR(run_save_(position, save));
  ++saves_;
  seconds_ += watch.Seconds();
  return exchanged;
}

}  // namespace frugal_torch::internal
