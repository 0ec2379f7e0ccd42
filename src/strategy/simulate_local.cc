// Local SGD over all-reduce in the step simulator (see simulate.h).
//
// One worker stands for all (the workers take their local steps in lock step). Each step
// computes (forward, backward and the optimizer's step, the slowest worker's pace); after every
// H-th step the workers average their models, the exchange ModelAverager makes: dense, the
// parameters in one bucket, one ring all-reduce of all their bytes; compressed, the change of
// every parameter since the last average is one unit of the gradient path (UnitSeconds, the
// tensor whole: encoding, the compressor's aggregation path and decoding).
//   without overlap: the average runs after the step's compute and the next step starts when it
//                    ends;
//   overlap=1:       the average starts after the step's compute and runs beside the next H
//                    local steps, whose compute runs `contention` times slower while it moves;
//                    the next averaging step waits for it before it starts its own.
// The steady state is measured over whole periods from the end of the first averaging step, so
// that an overlapped average always has one in flight to wait for.
#include <fmt/format.h>

#include <algorithm>

#include "strategy/simulate_internal.h"

namespace frugal::strategy_internal {

StatusOr<SimResult> SimulateLocalAverage(const SimOptions& o, const CompressorRegistry& registry) {
  const SyncSpec& sync = o.sync;
  if (sync.intra_period > 0 || sync.start_epoch > 0 || sync.average_momenta) {
    return InvalidArgumentError(
        "frugal simulate: Local SGD is simulated without start-epoch, intra-period and momenta=1");
  }
  const double compute = o.straggler_factor * StepComputeSeconds(o);
  double average = 0;  // the exchange's time on the channel
  size_t model_floats = 0;
  for (const SimLayer& l : o.layers) {
    if (l.floats == 0) continue;
    model_floats += l.floats;
    if (o.compressed.has_value()) {
      FRUGAL_ASSIGN_OR_RETURN(const double s, UnitSeconds(o, registry, l.floats, l.shape));
      average += s;
    }
  }
  if (!o.compressed.has_value()) average = RingAllreduceSeconds(o, 4.0 * double(model_floats));
  const int64_t h = sync.period;
  const int64_t periods = std::max<int64_t>(1, (o.steps - 1 + h - 1) / h);
  const int64_t steps = h + periods * h;
  std::vector<double> step_end(static_cast<size_t>(steps), 0);
  double now = 0;
  double channel_free = 0;
  for (int64_t s = 0; s < steps; ++s) {
    now = ComputeEnd(now, compute, channel_free, o.contention);
    if (o.workers > 1 && (s + 1) % h == 0) {
      if (sync.overlap) {
        now = std::max(now, channel_free);  // the previous average, applied now
        channel_free = now + average;
      } else {
        now += average;
      }
    }
    step_end[static_cast<size_t>(s)] = now;
  }
  // From the end of step H-1 (the first average) to the end of the last step: `periods` periods.
  const std::vector<double> window(step_end.begin() + (h - 1), step_end.end());
  const double busy_per_step = o.workers > 1 ? average / static_cast<double>(h) : 0;
  return SummarizeSteps(o, window, busy_per_step);
}

}  // namespace frugal::strategy_internal
