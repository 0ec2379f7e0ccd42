// FedAvg over all-reduce in the step simulator (see simulate.h).
//
// A round as `frugal train --sync fedavg:...` runs it on n workers (include/frugal/fedavg.h):
// SampleClients draws the round's m clients with the run's seed, worker c mod n plays client c,
// and each of its clients trains S = local-steps steps, or local-epochs x ceil(its samples /
// batch size) (the profile's compute per step, the slowest worker's pace) and, with a compressor,
// encodes its upload and decodes it into the worker's sums (the model's bytes at the measured
// rates). When every worker has played its clients, one ring all-reduce of the sums (the model's
// floats and the weight) ends the round. The round takes the busiest worker's clients plus the
// all-reduce.
//
// A FedAvg run has rounds, not steps: the result's step is the time of one client step at the
// run's throughput, the rounds' time x n over their clients' steps, so that the
// scaling efficiency (compute per step over it) counts the idle workers of a round whose
// clients do not spread evenly and the all-reduce spread over the round's steps.
#include <fmt/format.h>

#include <algorithm>

#include "frugal/fedavg.h"
#include "strategy/simulate_internal.h"

namespace frugal::strategy_internal {
namespace {

// Each client's steps per round: local-steps, or local-epochs passes over its samples in batches
// of batch_size (the last one short), as frugal train's clients run them.
StatusOr<std::vector<int64_t>> ClientSteps(const SimOptions& o) {
  const SyncSpec& sync = o.sync;
  const auto clients = static_cast<size_t>(sync.clients);
  if (sync.local_steps > 0) return std::vector<int64_t>(clients, sync.local_steps);
  if (o.client_samples.empty()) {
    return InvalidArgumentError(
        "frugal simulate: FedAvg with local-epochs needs the clients' samples: "
        "--client-samples N (the training set an IID split shares out) or --fit-partition FILE "
        "(a `frugal train --json` FedAvg record); or use local-steps=S");
  }
  if (o.client_samples.size() != clients) {
    return InvalidArgumentError(
        fmt::format("frugal simulate: the partition has {} clients where --sync fedavg names {}",
                    o.client_samples.size(), clients));
  }
  if (o.batch_size < 1) {
    return InvalidArgumentError("frugal simulate: --batch-size must be >= 1");
  }
  std::vector<int64_t> steps;
  for (const int64_t samples : o.client_samples) {
    if (samples < 1) {
      return InvalidArgumentError("frugal simulate: every client needs at least one sample");
    }
    steps.push_back(sync.local_epochs * ((samples + o.batch_size - 1) / o.batch_size));
  }
  return steps;
}

}  // namespace

StatusOr<SimResult> SimulateFedAvg(const SimOptions& o) {
  const SyncSpec& sync = o.sync;
  FRUGAL_ASSIGN_OR_RETURN(const std::vector<int64_t> steps_of, ClientSteps(o));
  const double step = o.straggler_factor * StepComputeSeconds(o);
  size_t model_floats = 0;
  for (const SimLayer& l : o.layers) model_floats += l.floats;
  const double model_bytes = 4.0 * static_cast<double>(model_floats);
  double upload = 0;  // a compressed upload, encoded and decoded on the worker
  if (o.compressed.has_value()) {
    if (o.encode_bytes_per_s > 0) upload += model_bytes / o.encode_bytes_per_s;
    if (o.decode_bytes_per_s > 0) upload += model_bytes / o.decode_bytes_per_s;
  }
  const double allreduce = RingAllreduceSeconds(o, model_bytes + 4);
  const int64_t rounds = o.rounds > 0 ? o.rounds : std::max<int64_t>(o.steps, 64);
  double time = 0;
  double client_steps = 0;
  std::vector<double> busy(static_cast<size_t>(o.workers));
  for (int64_t r = 0; r < rounds; ++r) {
    std::fill(busy.begin(), busy.end(), 0.0);
    for (const int64_t c : SampleClients(o.seed, r, sync.clients, sync.fraction)) {
      const double steps = static_cast<double>(steps_of[static_cast<size_t>(c)]);
      busy[static_cast<size_t>(ClientRank(c, o.workers))] += steps * step + upload;
      client_steps += steps;
    }
    time += *std::max_element(busy.begin(), busy.end()) + allreduce;
  }
  const double step_s = time * o.workers / client_steps;
  const double busy_per_step = allreduce * static_cast<double>(rounds) * o.workers / client_steps;
  return SummarizeSteps(o, {0.0, step_s}, busy_per_step);
}

}  // namespace frugal::strategy_internal
