#include "ps/client_stats.h"

#include <algorithm>

#include "ps/ps_common.h"
#include "ps/server_stats.h"

namespace frugal::ps_internal {

EngineStats ClientCounters::Stats() const {
  EngineStats stats;
  const std::vector<engine_internal::Interval> intervals = busy->Snapshot();
  for (const auto& i : intervals) stats.comm_seconds += Seconds(i.end - i.begin);
  stats.exposed_seconds = engine_internal::OverlapSeconds(intervals, waits->Snapshot());
  stats.tensors = completed.load();
  stats.negotiation_bytes = control_bytes.load();
  return stats;
}

void StatsGather::Begin(std::shared_ptr<engine_internal::WorkState> state,
                        ParameterServerStats* out, int servers, int workers) {
  state_ = std::move(state);
  out_ = out;
  workers_ = workers;
  answered_.assign(static_cast<size_t>(servers), 0);
  merged_ = ParameterServerStats{};
  merged_.workers.resize(static_cast<size_t>(workers));
  merged_.bytes_in.assign(static_cast<size_t>(servers), 0);
  merged_.bytes_out.assign(static_cast<size_t>(servers), 0);
}

Status StatsGather::Answer(int server, std::span<const std::byte> payload) {
  const size_t i = static_cast<size_t>(server);
  if (!state_ || answered_[i] != 0) return MalformedError("statistics that were not asked for");
  FRUGAL_ASSIGN_OR_RETURN(ServerStats stats, DecodeServerStats(payload, workers_));
  answered_[i] = 1;
  merged_.bytes_in[i] = stats.bytes_in;
  merged_.bytes_out[i] = stats.bytes_out;
  merged_.pushes += stats.pushes;
  merged_.updates += stats.updates;
  for (size_t w = 0; w < stats.workers.size(); ++w) merged_.workers[w].Merge(stats.workers[w]);
  if (std::all_of(answered_.begin(), answered_.end(), [](char a) { return a != 0; })) {
    *out_ = std::move(merged_);
    std::shared_ptr<engine_internal::WorkState> state = std::move(state_);
    *this = StatsGather{};
    state->Complete(Status::Ok());
  }
  return Status::Ok();
}

void StatsGather::Cancel(const Status& status) {
  if (!state_) return;
  state_->Complete(status);
  *this = StatsGather{};
}

}  // namespace frugal::ps_internal
