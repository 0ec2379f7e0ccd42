// BSP over all-reduce in the step simulator (see simulate.h).
//
// One worker stands for all. Its training thread runs the layers' forward, then their backward;
// its channel serves the units whose gradient exists, one message at a time in the policy's
// order. The two advance together: a compute segment first lets the channel start every message
// it would start by then, and while a message moves the compute runs `contention` times slower
// (the CPU that moving it takes from the training thread); where the channel is idle nothing can
// wake it before the segment ends, since gradients become ready only at the end of a layer's
// backward. Without overlap (kNone) the buckets move after the backward, while nothing computes.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "frugal/reducer.h"
#include "strategy/simulate_internal.h"

namespace frugal::strategy_internal {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// A unit of one step, in the order the policy cuts them, with its time on the channel.
struct Cut {
  int layer;
  size_t floats;
  double seconds;
};

// The worker's channel and the units of its current step.
class Channel {
 public:
  Channel(const SimOptions& o, const std::vector<Cut>& cuts)
      : o_(o),
        cuts_(cuts),
        units_(cuts.size()),
        layer_done_(o.layers.size(), 0),
        step_end_(static_cast<size_t>(o.steps), 0) {}

  // Step s begins its backward: none of its units is ready. The previous step's are all sent by
  // then (its forward waited for every layer, or its end for the whole step).
  void StartStep(int s) {
    step_ = static_cast<size_t>(s);
    for (Unit& u : units_) u = Unit{};
    left_ = units_.size();
  }

  // The gradient of `layer` exists from time t.
  void Ready(int layer, double t) {
    for (size_t k = 0; k < cuts_.size(); ++k) {
      if (cuts_[k].layer == layer) units_[k].ready = t;
    }
    step_end_[step_] = std::max(step_end_[step_], t);
  }

  // Starts every message that starts at or before `limit`.
  void Serve(double limit) {
    while (ServeOne(limit)) {
    }
  }

  // When the units of `layer` of the current step are reduced, serving the channel up to them.
  double LayerDone(int layer) {
    for (size_t k = 0; k < cuts_.size(); ++k) {
      while (cuts_[k].layer == layer && !units_[k].sent && ServeOne(kNever)) {
      }
    }
    return layer_done_[static_cast<size_t>(layer)];
  }

  // When every unit of the current step is reduced (and its backward over).
  double StepDone() {
    Serve(kNever);
    return step_end_[step_];
  }

  double free() const { return free_; }
  double busy() const { return busy_; }
  const std::vector<double>& step_end() const { return step_end_; }

 private:
  struct Unit {
    double ready = kNever;
    bool sent = false;
  };

  // The next message, if the channel starts it at or before `limit`: at t = max(free, the
  // earliest ready unit), the units ready by t that the policy takes.
  bool ServeOne(double limit) {
    if (left_ == 0) return false;
    double earliest = kNever;
    for (const Unit& u : units_) {
      if (!u.sent) earliest = std::min(earliest, u.ready);
    }
    const double t = std::max(free_, earliest);
    if (earliest == kNever || t > limit) return false;
    std::vector<size_t> take;
    if (o_.overlap == SimOverlap::kFusion) {
      size_t bytes = 0;
      for (size_t k = 0; k < units_.size(); ++k) {
        if (units_[k].sent || units_[k].ready > t) continue;
        if (!take.empty() && bytes + 4 * cuts_[k].floats > o_.fusion_bytes) break;
        take.push_back(k);
        bytes += 4 * cuts_[k].floats;
      }
    } else {
      size_t best = units_.size();
      for (size_t k = 0; k < units_.size(); ++k) {
        if (units_[k].sent || units_[k].ready > t) continue;
        const bool better = best == units_.size() || (o_.overlap == SimOverlap::kPriority
                                                          ? cuts_[k].layer < cuts_[best].layer
                                                          : units_[k].ready < units_[best].ready);
        if (better) best = k;
      }
      take.push_back(best);
    }
    double message = 0;
    if (o_.overlap == SimOverlap::kFusion && take.size() > 1 && !o_.compressed.has_value()) {
      size_t floats = 0;
      for (size_t k : take) floats += cuts_[k].floats;
      message = RingAllreduceSeconds(o_, 4.0 * static_cast<double>(floats));
    } else {
      for (size_t k : take) message += cuts_[k].seconds;
    }
    free_ = t + message;
    busy_ += message;
    for (size_t k : take) {
      units_[k].sent = true;
      --left_;
      double& done = layer_done_[static_cast<size_t>(cuts_[k].layer)];
      done = std::max(done, free_);
    }
    step_end_[step_] = std::max(step_end_[step_], free_);
    return true;
  }

  const SimOptions& o_;
  const std::vector<Cut>& cuts_;
  std::vector<Unit> units_;
  std::vector<double> layer_done_;
  std::vector<double> step_end_;
  size_t step_ = 0;
  size_t left_ = 0;
  double free_ = 0;
  double busy_ = 0;
};

// kNone: every step computes, then its buckets (PlanBuckets over the gradients in ready order,
// reverse layers) move one after the other, and the next step starts when the last one ends.
SimResult SimulateBuckets(const SimOptions& o, const std::vector<Cut>& cuts) {
  std::vector<TensorSpec> specs;
  std::vector<size_t> order;
  for (int i = static_cast<int>(o.layers.size()) - 1; i >= 0; --i) {
    for (size_t k = 0; k < cuts.size(); ++k) {
      if (cuts[k].layer == i) {
        specs.push_back(TensorSpec{std::to_string(k), cuts[k].floats});
        order.push_back(k);
      }
    }
  }
  double comm = 0;
  size_t next = 0;
  for (const BucketInfo& b : PlanBuckets(specs, o.bucket_cap_bytes)) {
    if (!o.compressed.has_value()) {
      comm += RingAllreduceSeconds(o, 4.0 * static_cast<double>(b.count));
      next += b.entries.size();
    } else {
      for (size_t e = 0; e < b.entries.size(); ++e) comm += cuts[order[next++]].seconds;
    }
  }
  const double compute = o.straggler_factor * StepComputeSeconds(o);
  std::vector<double> step_end(static_cast<size_t>(o.steps));
  for (size_t s = 0; s < step_end.size(); ++s) {
    step_end[s] = static_cast<double>(s + 1) * (compute + comm);
  }
  return SummarizeSteps(o, step_end, comm);
}

}  // namespace

double ComputeEnd(double start, double work, double busy_until, double contention) {
  if (busy_until <= start) return start + work;
  const double slow = busy_until - start;  // seconds of the channel busy from `start`
  if (work * contention <= slow) return start + work * contention;
  return busy_until + (work - slow / contention);
}

StatusOr<SimResult> SimulateAllreduce(const SimOptions& o, const CompressorRegistry& registry) {
  const int layers = static_cast<int>(o.layers.size());
  const double f = o.straggler_factor;
  std::vector<Cut> cuts;
  for (int i = 0; i < layers; ++i) {
    const SimLayer& layer = o.layers[static_cast<size_t>(i)];
    if (layer.floats == 0) continue;  // no gradient (the optimizer's step of a profile)
    size_t parts = 1;
    if (o.overlap == SimOverlap::kPriority && o.partition_bytes > 0) {
      const size_t per = std::max<size_t>(1, o.partition_bytes / sizeof(float));
      parts = std::max<size_t>(1, (layer.floats + per - 1) / per);
    }
    const size_t per = parts == 1 ? layer.floats : (layer.floats + parts - 1) / parts;
    for (size_t p = 0; p < parts; ++p) {
      const size_t count = std::min(per, layer.floats - p * per);
      FRUGAL_ASSIGN_OR_RETURN(
          double s,
          UnitSeconds(o, registry, count, parts == 1 ? layer.shape : std::vector<int64_t>{}));
      cuts.push_back(Cut{i, count, s});
    }
  }
  if (o.overlap == SimOverlap::kNone) return SimulateBuckets(o, cuts);

  Channel channel(o, cuts);
  double now = 0;
  // `work` seconds of compute from `now`: the channel starts what it would meanwhile, and the
  // compute runs `contention` times slower while a message moves.
  auto compute = [&](double work) {
    for (;;) {
      channel.Serve(now);
      const double free = channel.free();
      const double end = ComputeEnd(now, work, free, o.contention);
      if (free <= now || end <= free) {
        now = end;
        return;
      }
      work -= (free - now) / o.contention;  // the channel frees first: it may start another
      now = free;
    }
  };
  for (int s = 0; s < o.steps; ++s) {
    // Forward: layer i waits for its update (priority) or the whole previous step.
    for (int i = 0; i < layers; ++i) {
      if (o.overlap == SimOverlap::kPriority) now = std::max(now, channel.LayerDone(i));
      compute(f * o.layers[static_cast<size_t>(i)].forward_s);
    }
    // Backward: the gradient of layer i is ready at the end of its backward.
    channel.StartStep(s);
    for (int i = layers - 1; i >= 0; --i) {
      compute(f * o.layers[static_cast<size_t>(i)].backward_s);
      channel.Ready(i, now);
    }
    if (o.overlap != SimOverlap::kPriority) now = channel.StepDone();
  }
  channel.StepDone();
  return SummarizeSteps(o, channel.step_end(), channel.busy() / o.steps);
}

}  // namespace frugal::strategy_internal
