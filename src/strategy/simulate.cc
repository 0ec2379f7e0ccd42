// The step simulator (see simulate.h).
//
// The event loop of one worker: `ready` holds the units whose gradient exists and that are not
// yet sent; whenever the channel is free at time t it takes the next unit by the policy (or,
// with kFusion, all ready ones), and the compute thread advances layer by layer, waiting where
// the policy says (the whole step's units, or, with kPriority, the units of the layer the
// forward is about to read). Time moves to the next event: a compute segment ending or the
// channel finishing a message.
#include "frugal/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "frugal/compress_wire.h"
#include "frugal/compressed_reducer.h"
#include "frugal/reducer.h"
#include "strategy/simulate_internal.h"
#include "strategy/step_cost_internal.h"

namespace frugal {
namespace {

using strategy_internal::RingAllreduceSeconds;
using strategy_internal::RingBandwidth;

struct Unit {
  int layer = 0;
  int step = 0;
  size_t floats = 0;
  double ready = 0;  // when its gradient exists
  double done = -1;  // when its reduction ends
};

// The payload (top-k: its bound, every index in the fixed-width code).
uint64_t Wire(const Compressor& c, const TensorInfo& t) {
  return kWireHeaderBytes + *c.MaxBodyBits(t) / 8;
}

}  // namespace

StatusOr<SimOverlap> ParseSimOverlap(std::string_view name) {
  if (name == "none") return SimOverlap::kNone;
  if (name == "wfbp") return SimOverlap::kWfbp;
  if (name == "fusion") return SimOverlap::kFusion;
  if (name == "priority") return SimOverlap::kPriority;
  return InvalidArgumentError(
      fmt::format("unknown overlap '{}' (known: none, wfbp, fusion, priority)", name));
}

StatusOr<double> UnitSeconds(const SimOptions& o, const CompressorRegistry& registry, size_t floats,
                             const std::vector<int64_t>& shape) {
  const int n = o.workers;
  if (n <= 1) return 0.0;
  const double dense_bytes = 4.0 * static_cast<double>(floats);
  if (!o.compressed.has_value() || dense_bytes < static_cast<double>(o.compressed->min_bytes)) {
    return RingAllreduceSeconds(o, dense_bytes);
  }
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> c, registry.Create(o.compressed->spec));
  if (o.compressed->error_feedback && c->inner() == nullptr) c = WithErrorFeedback(std::move(c));
  if (!strategy_internal::IsModelled(*c)) {
    return InvalidArgumentError(fmt::format(
        "frugal simulate: {} is not modelled (fixed payload sizes and top-k's bound on the "
        "allreduce, allgather, vote and two-phase paths, and aggregations made of all-reduces, "
        "as PowerSGD's)",
        c->spec()));
  }
  const TensorInfo tensor("unit", floats, shape);
  const AggregationPath path = ResolveAggregationPath(*c, o.compressed->path);
  const double alpha = o.network.alpha_s;
  const double b = RingBandwidth(o);
  const double encode = o.encode_bytes_per_s > 0 ? dense_bytes / o.encode_bytes_per_s : 0;
  const double decode_one = o.decode_bytes_per_s > 0 ? dense_bytes / o.decode_bytes_per_s : 0;
  switch (path) {
    case AggregationPath::kCustom: {  // all-reduces, past the warm-up (IsModelled checked it)
      double seconds = encode + decode_one;
      const std::vector<uint64_t> allreduces =
          *c->AggregateAllreduceFloats(tensor, strategy_internal::kSteadyStep);
      for (const uint64_t f : allreduces) seconds += RingAllreduceSeconds(o, 4.0 * double(f));
      return seconds;
    }
    case AggregationPath::kAllreduce: {
      const double body = static_cast<double>(Wire(*c, tensor) - kWireHeaderBytes) + 4;
      return encode + RingAllreduceSeconds(o, body) + decode_one;
    }
    case AggregationPath::kTwoPhase: {
      double chunks = 0;
      for (int j = 0; j < n; ++j) {
        chunks +=
            static_cast<double>(Wire(*c, TensorInfo("chunk", BlockPartition(floats, n, j).count)));
      }
      const int l = std::max(1, std::min(o.network.ranks_per_host, n));
      const double scatter_bytes = chunks * (n - 1) / n;
      // Each rank sends (n - 1) / n of the chunks; a host's NIC carries its L ranks' chunks
      // for the other n - L ranks.
      const double scatter = l >= n
                                 ? scatter_bytes / o.network.host_bytes_per_s
                                 : std::max(scatter_bytes / o.network.host_bytes_per_s,
                                            l * chunks * (n - l) / n / o.network.nic_bytes_per_s);
      const double gather = (n - 1) * (2 * alpha + chunks / n / b);
      return 2 * encode + (n - 1) * alpha + scatter + gather + 2 * decode_one;
    }
    default: {  // allgather, sign vote
      const double w = static_cast<double>(Wire(*c, tensor));
      return encode + (n - 1) * (2 * alpha + (w + 8) / b) + n * decode_one;
    }
  }
}

StatusOr<SimResult> Simulate(const SimOptions& o, const CompressorRegistry& registry) {
  if (o.layers.empty()) return InvalidArgumentError("frugal simulate: no layers");
  if (o.workers < 1) return InvalidArgumentError("frugal simulate: workers must be >= 1");
  if (o.steps < 2) return InvalidArgumentError("frugal simulate: at least 2 steps");
  if (!(o.straggler_factor >= 1)) return InvalidArgumentError("straggler factor must be >= 1");
  if (!(o.network.duplex_share > 0 && o.network.duplex_share <= 1)) {
    return InvalidArgumentError("--duplex-share must be in (0, 1]");
  }
  if (o.sync.kind != SyncKind::kBsp &&
      (o.arch.kind == ArchKind::kParameterServer || o.sync.kind != SyncKind::kLocal)) {
    return InvalidArgumentError(fmt::format(
        "frugal simulate: --sync {} is not simulated (bsp; local:period=H over all-reduce or "
        "gossip)",
        SyncSpecName(o.sync)));
  }
  if (o.arch.kind == ArchKind::kParameterServer) {
    return strategy_internal::SimulateParameterServer(o);
  }
  if (o.arch.kind == ArchKind::kGossip) return strategy_internal::SimulateGossip(o, registry);
  if (o.sync.kind == SyncKind::kLocal) return strategy_internal::SimulateLocalAverage(o, registry);
  const int layers = static_cast<int>(o.layers.size());
  const double f = o.straggler_factor;

  // The units of one step, in the order the policy cuts them, with their channel times.
  struct Cut {
    int layer;
    size_t floats;
    double seconds;
  };
  std::vector<Cut> cuts;
  for (int i = 0; i < layers; ++i) {
    const SimLayer& layer = o.layers[static_cast<size_t>(i)];
    size_t parts = 1;
    if (o.overlap == SimOverlap::kPriority && o.partition_bytes > 0) {
      const size_t per = std::max<size_t>(1, o.partition_bytes / sizeof(float));
      parts = std::max<size_t>(1, (layer.floats + per - 1) / per);
    }
    if (layer.floats == 0) continue;  // no gradient (the optimizer's step of a profile)
    const size_t per = parts == 1 ? layer.floats : (layer.floats + parts - 1) / parts;
    for (size_t p = 0; p < parts; ++p) {
      const size_t count = std::min(per, layer.floats - p * per);
      FRUGAL_ASSIGN_OR_RETURN(
          double s,
          UnitSeconds(o, registry, count, parts == 1 ? layer.shape : std::vector<int64_t>{}));
      cuts.push_back(Cut{i, count, s});
    }
  }

  std::vector<double> step_end(static_cast<size_t>(o.steps), 0);
  std::vector<double> layer_updated(static_cast<size_t>(layers), 0);  // previous step's
  double channel_free = 0;
  double busy = 0;
  double now = 0;
  for (int s = 0; s < o.steps; ++s) {
    // Forward: layer i waits for its update (priority) or the whole previous step.
    for (int i = 0; i < layers; ++i) {
      if (o.overlap == SimOverlap::kPriority) now = std::max(now, layer_updated[i]);
      now += f * o.layers[static_cast<size_t>(i)].forward_s;
    }
    // Backward: gradient of layer i ready at the end of its backward.
    std::vector<double> ready_at(static_cast<size_t>(layers));
    for (int i = layers - 1; i >= 0; --i) {
      now += f * o.layers[static_cast<size_t>(i)].backward_s;
      ready_at[static_cast<size_t>(i)] = now;
    }
    const double backward_end = now;
    std::vector<Unit> units;
    for (const Cut& c : cuts) {
      Unit u;
      u.layer = c.layer;
      u.step = s;
      u.floats = c.floats;
      u.ready = o.overlap == SimOverlap::kNone ? backward_end : ready_at[c.layer];
      units.push_back(u);
    }
    std::vector<double> seconds;
    for (const Cut& c : cuts) seconds.push_back(c.seconds);
    // The channel: serve the units in policy order.
    std::vector<bool> sent(units.size(), false);
    size_t left = units.size();
    if (o.overlap == SimOverlap::kNone) {
      // Buckets of PlanBuckets over the gradients in ready order (reverse layers).
      std::vector<TensorSpec> specs;
      std::vector<size_t> order;
      for (int i = layers - 1; i >= 0; --i) {
        for (size_t k = 0; k < units.size(); ++k) {
          if (units[k].layer == i) {
            specs.push_back(TensorSpec{std::to_string(k), units[k].floats});
            order.push_back(k);
          }
        }
      }
      double t = std::max(channel_free, backward_end);
      size_t next = 0;
      for (const BucketInfo& b : PlanBuckets(specs, o.bucket_cap_bytes)) {
        double bucket_seconds = 0;
        if (!o.compressed.has_value()) {
          bucket_seconds = RingAllreduceSeconds(o, 4.0 * static_cast<double>(b.count));
          next += b.entries.size();
        } else {
          for (size_t e = 0; e < b.entries.size(); ++e) bucket_seconds += seconds[order[next++]];
        }
        t += bucket_seconds;
        busy += bucket_seconds;
        for (const BucketEntry& e : b.entries) units[std::stoul(e.name)].done = t;
      }
      channel_free = t;
      left = 0;
    }
    while (left > 0) {
      double t = channel_free;
      // The earliest time some unit is ready.
      double earliest = std::numeric_limits<double>::infinity();
      for (size_t k = 0; k < units.size(); ++k) {
        if (!sent[k]) earliest = std::min(earliest, units[k].ready);
      }
      t = std::max(t, earliest);
      std::vector<size_t> take;
      if (o.overlap == SimOverlap::kFusion) {
        size_t bytes = 0;
        for (size_t k = 0; k < units.size(); ++k) {
          if (sent[k] || units[k].ready > t) continue;
          if (!take.empty() && bytes + 4 * units[k].floats > o.fusion_bytes) break;
          take.push_back(k);
          bytes += 4 * units[k].floats;
        }
      } else {
        size_t best = units.size();
        for (size_t k = 0; k < units.size(); ++k) {
          if (sent[k] || units[k].ready > t) continue;
          const bool better = best == units.size() || (o.overlap == SimOverlap::kPriority
                                                           ? units[k].layer < units[best].layer
                                                           : units[k].ready < units[best].ready);
          if (better) best = k;
        }
        take.push_back(best);
      }
      double message = 0;
      if (o.overlap == SimOverlap::kFusion && take.size() > 1 && !o.compressed.has_value()) {
        size_t floats = 0;
        for (size_t k : take) floats += units[k].floats;
        message = RingAllreduceSeconds(o, 4.0 * static_cast<double>(floats));
      } else {
        for (size_t k : take) message += seconds[k];
      }
      t += message;
      busy += message;
      for (size_t k : take) {
        sent[k] = true;
        units[k].done = t;
        --left;
      }
      channel_free = t;
    }
    // Updates.
    double all_done = backward_end;
    std::fill(layer_updated.begin(), layer_updated.end(), 0.0);
    for (const Unit& u : units) {
      all_done = std::max(all_done, u.done);
      layer_updated[u.layer] = std::max(layer_updated[u.layer], u.done);
    }
    if (o.overlap != SimOverlap::kPriority) now = all_done;
    step_end[static_cast<size_t>(s)] = all_done;
  }
  return strategy_internal::SummarizeSteps(o, step_end, busy / o.steps);
}

namespace strategy_internal {

// Bandwidth of the ring's busiest link.
double RingBandwidth(const SimOptions& o) {
  const SimNetwork& net = o.network;
  const int l = std::max(1, net.ranks_per_host);
  if (o.workers <= l) return net.host_bytes_per_s;
  double b = net.nic_bytes_per_s;
  const int hosts = (o.workers + l - 1) / l;
  if (net.hosts_per_rack > 0 && hosts > net.hosts_per_rack && net.rack_bytes_per_s > 0) {
    b = std::min(b, net.rack_bytes_per_s);
  }
  return b;
}

double RingAllreduceSeconds(const SimOptions& o, double bytes) {
  const int n = o.workers;
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * (o.network.alpha_s + bytes / n / RingBandwidth(o));
}

SimResult SummarizeSteps(const SimOptions& o, const std::vector<double>& step_end,
                         double busy_per_step) {
  SimResult r;
  r.step_s = (step_end.back() - step_end.front()) / static_cast<double>(step_end.size() - 1);
  double compute = 0;
  for (const SimLayer& l : o.layers) compute += l.forward_s + l.backward_s;
  r.compute_s = o.straggler_factor * compute;
  r.comm_busy_s = busy_per_step;
  r.exposed_comm_s = std::max(0.0, r.step_s - r.compute_s);
  r.comm_share = r.step_s > 0 ? r.exposed_comm_s / r.step_s : 0;
  r.scaling_efficiency = r.step_s > 0 ? compute / r.step_s : 0;
  return r;
}

}  // namespace strategy_internal

}  // namespace frugal
