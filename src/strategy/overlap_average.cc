// Local SGD's overlapped average (see overlap_average.h).
//
// The copy is what the average works on: the training thread never touches it while a round is
// in flight, and the model it goes on training is never seen by the transport's thread. Complete
// waits for the background call with a bound of twice the strategy's timeout (every wait of the
// average inside is bounded by it; a peer that does not answer fails the call first, naming it).
#include "strategy/overlap_average.h"

#include <chrono>

#include "frugal/check.h"

namespace frugal::strategy_internal {

OverlappedAverage::OverlappedAverage(AverageParts parts, Duration timeout, AverageFn average)
    : parts_(parts), timeout_(timeout), average_(std::move(average)) {}

OverlappedAverage::~OverlappedAverage() {
  // The background call refers to this object's buffers: never leave it running.
  if (work_) (void)work_->Wait(2 * timeout_ + std::chrono::seconds(1));
}

void OverlappedAverage::Shape(const ModelBuffers& model) {
  storage_.clear();
  copy_ = ModelBuffers{};
  auto mirror = [&](const std::vector<NamedBuffer>& from, std::vector<NamedBuffer>& to) {
    for (const NamedBuffer& b : from) {
      storage_.emplace_back(b.data.size());
      to.push_back({b.name, storage_.back()});
    }
  };
  // The views point into the inner vectors' own storage, which stays put as storage_ grows.
  mirror(model.parameters, copy_.parameters);
  if (parts_.buffers) mirror(model.buffers, copy_.buffers);
  if (parts_.momenta) mirror(model.momenta, copy_.momenta);
}

Status OverlappedAverage::Start(uint64_t step, const ModelBuffers& model, TransportRunner& runner) {
  FRUGAL_INTERNAL_ASSERT(!in_flight_, "an overlapped average is already in flight");
  const std::vector<NamedBuffer> from = AveragedBuffers(model, parts_);
  const std::vector<NamedBuffer> to = AveragedBuffers(copy_, parts_);
  FRUGAL_CHECK_EQ(from.size(), to.size());
  Pack(from, taken_);
  Unpack(taken_, to);
  auto fn = [this, step](Transport& t) -> Status { return average_(t, step, copy_); };
  work_ = runner.RunInBackground("local model average", fn);
  // Without a thread of its own the runner averages now; a failure is this step's.
  if (!work_) FRUGAL_RETURN_IF_ERROR(runner.Run("local model average", fn));
  in_flight_ = true;
  return Status::Ok();
}

Status OverlappedAverage::Complete(ModelBuffers& model) {
  if (!in_flight_) return Status::Ok();
  in_flight_ = false;
  if (work_) {
    const Status status = work_->Wait(2 * timeout_ + std::chrono::seconds(1));
    // Still running: keep the Work, so that the destructor waits for it again.
    if (!status.ok() && !work_->IsCompleted()) {
      return status.Annotate("the overlapped model average");
    }
    work_.reset();
    FRUGAL_RETURN_IF_ERROR(status);
  }
  // x = avg + (x - x_k), part by part.
  const std::vector<NamedBuffer> now = AveragedBuffers(model, parts_);
  const std::vector<NamedBuffer> avg = AveragedBuffers(copy_, parts_);
  size_t offset = 0;
  for (size_t k = 0; k < now.size(); ++k) {
    std::span<float> x = now[k].data;
    std::span<const float> a = avg[k].data;
    const float* then = taken_.data() + offset;
    for (size_t e = 0; e < x.size(); ++e) x[e] = a[e] + (x[e] - then[e]);
    offset += x.size();
  }
  return Status::Ok();
}

}  // namespace frugal::strategy_internal
