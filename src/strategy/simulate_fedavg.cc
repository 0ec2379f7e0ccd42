// FedAvg over all-reduce in the step simulator (see simulate.h).
//
// A round as `frugal train --sync fedavg:...` runs it on n workers (include/frugal/fedavg.h):
// SampleClients draws the round's m clients with the run's seed, worker c mod n plays client c,
// and each of its clients trains S = local-steps steps (the profile's compute per step, the
// slowest worker's pace) and, with a compressor, encodes its upload and decodes it into the
// worker's sums (the model's bytes at the measured rates). When every worker has played its
// clients, one ring all-reduce of the sums (the model's floats and the weight) ends the round.
// The round takes the busiest worker's clients plus the all-reduce.
//
// A FedAvg run has rounds, not steps: the result's step is the time of one client step at the
// run's throughput, round time x n / (m S) averaged over the rounds simulated, so that the
// scaling efficiency (compute per step over it) counts the idle workers of a round whose
// clients do not spread evenly and the all-reduce spread over the round's steps.
#include <fmt/format.h>

#include <algorithm>

#include "frugal/fedavg.h"
#include "strategy/simulate_internal.h"

namespace frugal::strategy_internal {

StatusOr<SimResult> SimulateFedAvg(const SimOptions& o) {
  const SyncSpec& sync = o.sync;
  if (sync.local_steps <= 0) {
    return InvalidArgumentError(
        "frugal simulate: FedAvg is simulated with local-steps=S (a client's steps per round; "
        "local-epochs depends on the shards' sizes, which the simulation does not know)");
  }
  const double step = o.straggler_factor * StepComputeSeconds(o);
  size_t model_floats = 0;
  for (const SimLayer& l : o.layers) model_floats += l.floats;
  const double model_bytes = 4.0 * static_cast<double>(model_floats);
  double upload = 0;  // a compressed upload, encoded and decoded on the worker
  if (o.compressed.has_value()) {
    if (o.encode_bytes_per_s > 0) upload += model_bytes / o.encode_bytes_per_s;
    if (o.decode_bytes_per_s > 0) upload += model_bytes / o.decode_bytes_per_s;
  }
  const double client = static_cast<double>(sync.local_steps) * step + upload;
  const double allreduce = RingAllreduceSeconds(o, model_bytes + 4);
  const int64_t rounds = std::max<int64_t>(o.steps, 64);
  const int64_t per_round = ClientsPerRound(sync.clients, sync.fraction);
  double time = 0;
  std::vector<int64_t> played(static_cast<size_t>(o.workers));
  for (int64_t r = 0; r < rounds; ++r) {
    std::fill(played.begin(), played.end(), 0);
    for (const int64_t c : SampleClients(o.seed, r, sync.clients, sync.fraction)) {
      ++played[static_cast<size_t>(ClientRank(c, o.workers))];
    }
    const int64_t busiest = *std::max_element(played.begin(), played.end());
    time += static_cast<double>(busiest) * client + allreduce;
  }
  const double client_steps = static_cast<double>(rounds * per_round * sync.local_steps);
  const double step_s = time * o.workers / client_steps;
  const double busy_per_step = allreduce * static_cast<double>(rounds) * o.workers / client_steps;
  return SummarizeSteps(o, {0.0, step_s}, busy_per_step);
}

}  // namespace frugal::strategy_internal
