// The step simulator (see simulate.h): the options checked, the time of one unit on the channel,
// and the dispatch to each architecture's and synchronization's part (simulate_allreduce.cc,
// simulate_local.cc, simulate_fedavg.cc, simulate_ps.cc, simulate_gossip.cc); the ring's rates and
// the summary of the steady state they share.
#include "frugal/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

// The payload (top-k: its bound, every index in the fixed-width code).
uint64_t Wire(const Compressor& c, const TensorInfo& t) {
  return kWireHeaderBytes + *c.MaxBodyBits(t) / 8;
}

}  // namespace

double DuplexShareAt(const SimNetwork& network, double bytes) {
  const std::vector<DuplexPoint>& points = network.duplex_by_bytes;
  if (points.empty()) return network.duplex_share;
  if (bytes <= points.front().bytes) return points.front().share;
  if (bytes >= points.back().bytes) return points.back().share;
  const auto above = std::upper_bound(points.begin(), points.end(), bytes,
                                      [](double b, const DuplexPoint& p) { return b < p.bytes; });
  const DuplexPoint& lo = *(above - 1);
  const DuplexPoint& hi = *above;
  const double t = std::log(bytes / lo.bytes) / std::log(hi.bytes / lo.bytes);
  return lo.share + t * (hi.share - lo.share);
}

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
  if (!(o.contention >= 1) || !std::isfinite(o.contention)) {
    return InvalidArgumentError("frugal simulate: contention must be finite and >= 1");
  }
  if (o.contention != 1 && o.arch.kind == ArchKind::kParameterServer) {
    return InvalidArgumentError(
        "frugal simulate: contention is modelled for --arch allreduce and gossip (the parameter "
        "server's compute beside its pushes is not)");
  }
  if (!(o.network.duplex_share > 0 && o.network.duplex_share <= 1)) {
    return InvalidArgumentError("--duplex-share must be in (0, 1]");
  }
  const std::vector<DuplexPoint>& duplex = o.network.duplex_by_bytes;
  for (size_t i = 0; i < duplex.size(); ++i) {
    if (!(duplex[i].share > 0 && duplex[i].share <= 1) || !(duplex[i].bytes > 0) ||
        !std::isfinite(duplex[i].bytes) || (i > 0 && !(duplex[i].bytes > duplex[i - 1].bytes))) {
      return InvalidArgumentError(
          "frugal simulate: the duplex shares by message size need ascending sizes > 0 and "
          "shares in (0, 1]");
    }
  }
  const bool simulated =
      o.sync.kind == SyncKind::kBsp ||
      (o.sync.kind == SyncKind::kLocal && o.arch.kind != ArchKind::kParameterServer) ||
      (o.sync.kind == SyncKind::kFedAvg && o.arch.kind == ArchKind::kAllreduce);
  if (!simulated) {
    return InvalidArgumentError(fmt::format(
        "frugal simulate: --sync {} is not simulated (bsp; local:period=H over all-reduce or "
        "gossip; fedavg:...,local-steps=S over all-reduce)",
        SyncSpecName(o.sync)));
  }
  if (o.arch.kind == ArchKind::kParameterServer) {
    return strategy_internal::SimulateParameterServer(o);
  }
  if (o.arch.kind == ArchKind::kGossip) return strategy_internal::SimulateGossip(o, registry);
  if (o.sync.kind == SyncKind::kLocal) return strategy_internal::SimulateLocalAverage(o, registry);
  if (o.sync.kind == SyncKind::kFedAvg) return strategy_internal::SimulateFedAvg(o);
  return strategy_internal::SimulateAllreduce(o, registry);
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

double StepComputeSeconds(const SimOptions& o) {
  double seconds = 0;
  for (const SimLayer& l : o.layers) seconds += l.forward_s + l.backward_s;
  return seconds;
}

SimResult SummarizeSteps(const SimOptions& o, const std::vector<double>& step_end,
                         double busy_per_step) {
  SimResult r;
  r.step_s = (step_end.back() - step_end.front()) / static_cast<double>(step_end.size() - 1);
  const double compute = StepComputeSeconds(o);
  r.compute_s = o.straggler_factor * compute;
  r.comm_busy_s = busy_per_step;
  r.exposed_comm_s = std::max(0.0, r.step_s - r.compute_s);
  r.comm_share = r.step_s > 0 ? r.exposed_comm_s / r.step_s : 0;
  r.scaling_efficiency = r.step_s > 0 ? compute / r.step_s : 0;
  return r;
}

}  // namespace strategy_internal

}  // namespace frugal
