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
  FRUGAL_ASSIGN_OR_RETURN(
      frugal::OpenedCheckpoint opened,
      frugal::OpenCheckpoint(options_.resume, rank, world_size, options_.identity));
  const std::string where =
      fmt::format("checkpoint {}/rank-{:05d}.state", opened.checkpoint.path, rank);
  FRUGAL_RETURN_IF_ERROR(runner_.Run("resume", [&](frugal::Transport&) -> Status {
    frugal::StateLoader loader(opened.state);
    visit(loader);
    return loader.Finish().Annotate(where);
  }));
  return opened.checkpoint.manifest.step;
}

StatusOr<uint64_t> RunCheckpoints::Save(uint64_t position,
                                        const std::function<void(frugal::StateVisitor&)>& visit) {
  const frugal::Stopwatch watch;
  uint64_t exchanged = 0;
  FRUGAL_RETURN_IF_ERROR(runner_.Run("checkpoint", [&](frugal::Transport& t) -> Status {
    frugal::StateSaver saver;
    visit(saver);
    FRUGAL_RETURN_IF_ERROR(saver.status());
    const uint64_t before = t.bytes_sent();
    Status status = SaveCheckpoint(t, options_, position, saver.records(), &bytes_, timeout_);
    exchanged = t.bytes_sent() - before;
    return status;
  }));
  ++saves_;
  seconds_ += watch.Seconds();
  return exchanged;
}

}  // namespace frugal_torch::internal
