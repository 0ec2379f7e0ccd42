// The architecture cost model (see step_cost.h).
//
// Why the sums do not depend on blocks, segments or buckets: every pattern below sends each
// byte of a block along a fixed number of edges. Ring: in the reduce-scatter rank r sends every
// block but its own, in the allgather every block but block r + 1: summed over r, 2 (n - 1) N.
// Binary tree: every edge carries the buffer up once and down once: 2 (n - 1) N; the double tree
// does so with each half on its own tree. Recursive doubling: p ranks exchange the whole buffer
// log2 p times, the 2 rem ranks outside send it once (pre-step, post-step). Rabenseifner: in the
// halving step with pairs of ranges of size S each pair sends S (each partner one half), p/2
// pairs over ranges that sum to N 2^k times: (p - 1) N for the halving and again for the
// doubling. Hierarchical: the non-leaders of a host each send N up and receive it down once,
// 2 (n - H) N, plus the leaders' ring 2 (H - 1) N; the torus: the row reduce-scatter and
// allgather, R (C - 1) N each, plus the columns' rings 2 (R - 1) N. So one all-reduce of a bucket
// costs a linear function of its bytes, and the gradients of a step cost that function of the
// model's bytes however the engine buckets them.
#include "frugal/step_cost.h"

#include <fmt/format.h>

#include <bit>

#include "frugal/compress_wire.h"
#include "frugal/fedavg.h"
#include "frugal/reducer.h"
#include "strategy/step_cost_internal.h"

namespace frugal {
namespace {

int FloorLog2(int n) { return std::bit_width(static_cast<unsigned>(n)) - 1; }

// The check of equal lengths before a checked all-reduce: recursive doubling of 16 bytes.
uint64_t LengthCheckBytesSum(int n) {
  return AllreduceBytesSum(AllreduceAlgorithm::kRecursiveDoubling, n, 16);
}

struct Compression {
  std::unique_ptr<Compressor> compressor;
  AggregationPath path = AggregationPath::kAuto;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  size_t min_bytes = 0;
  bool bound = false;  // payload sizes are upper bounds (MaxBodyBits)
};

StatusOr<Compression> MakeCompression(const CompressedReducerOptions& options,
                                      const CompressorRegistry& registry) {
  Compression c;
  FRUGAL_ASSIGN_OR_RETURN(c.compressor, registry.Create(options.spec));
  if (options.error_feedback && c.compressor->inner() == nullptr) {
    c.compressor = WithErrorFeedback(std::move(c.compressor));
  }
  const CompressorTraits traits = c.compressor->traits();
  if (!strategy_internal::IsModelled(*c.compressor)) {
    return InvalidArgumentError(fmt::format(
        "frugal cost: {} {} (the model covers compressors of a fixed payload size, and top-k's "
        "bound, on the allreduce, allgather, vote and two-phase paths, and aggregations made of "
        "all-reduces, as PowerSGD's)",
        c.compressor->spec(),
        traits.custom_aggregate ? "moves its own data"
                                : "has a payload size that depends on the data, without a bound"));
  }
  c.bound = traits.variable_size && !traits.custom_aggregate;
  c.path = ResolveAggregationPath(*c.compressor, options.path);
  c.algorithm = options.algorithm;
  c.min_bytes = options.min_bytes;
  return c;
}

uint64_t WireBytes(const Compressor& c, const TensorInfo& tensor) {
  return strategy_internal::CompressedWireBytes(c, tensor);
}

// The algorithm of the plan's dense all-reduces (another library's is counted as its model).
// The direct all-reduce moves values through one machine's memory, which no network model covers.
StatusOr<AllreduceAlgorithm> DenseAlgorithm(const StrategyPlan& plan) {
  FRUGAL_ASSIGN_OR_RETURN(const AllreduceAlgorithm algorithm,
                          ModelAllreduceAlgorithm(plan.arch.algorithm));
  if (algorithm == AllreduceAlgorithm::kDirect) {
    return InvalidArgumentError(
        "frugal cost: the direct all-reduce reads the peers' memory on one machine; the model "
        "covers networks (give another algorithm)");
  }
  return algorithm;
}

// One tensor (or partition) through the compressed path: bytes summed over ranks, and the time
// terms of one rank.
struct PathCost {
  uint64_t bytes_sum = 0;
  CostTerms terms;
};

PathCost CompressedEntry(const Compression& c, const TensorInfo& tensor, int n) {
  PathCost cost;
  if (n == 1) return cost;
  const double m = n - 1;
  switch (c.path) {
    case AggregationPath::kAllreduce: {
      const uint64_t floats = (WireBytes(*c.compressor, tensor) - kWireHeaderBytes) / 4;
      const uint64_t bytes = 4 * (floats + 1);
      cost.bytes_sum = AllreduceBytesSum(c.algorithm, n, bytes);
      cost.terms = AllreduceCost(c.algorithm, CostShape{.ranks = n, .bytes = double(bytes)});
      break;
    }
    case AggregationPath::kCustom: {  // a sequence of all-reduces (MakeCompression checked it)
      const std::vector<uint64_t> allreduces =
          *c.compressor->AggregateAllreduceFloats(tensor, strategy_internal::kSteadyStep);
      for (const uint64_t floats : allreduces) {
        cost.bytes_sum += AllreduceBytesSum(c.algorithm, n, 4 * floats);
        cost.terms +=
            AllreduceCost(c.algorithm, CostShape{.ranks = n, .bytes = 4.0 * double(floats)});
      }
      break;
    }
    case AggregationPath::kTwoPhase: {
      uint64_t chunks = 0;
      const bool matrix = tensor.shape.size() >= 2 && tensor.numel > 0;
      for (int j = 0; j < n; ++j) {
        if (matrix) {
          const Block rows = BlockPartition(tensor.rows(), n, j);
          chunks += WireBytes(*c.compressor, TensorInfo("chunk", rows.count * tensor.cols(),
                                                        {static_cast<int64_t>(rows.count),
                                                         static_cast<int64_t>(tensor.cols())}));
        } else {
          chunks += WireBytes(*c.compressor,
                              TensorInfo("chunk", BlockPartition(tensor.numel, n, j).count));
        }
      }
      cost.bytes_sum =
          2 * static_cast<uint64_t>(n - 1) * chunks + 8 * static_cast<uint64_t>(n) * (n - 1);
      cost.terms.latency_terms = 2 * m;
      cost.terms.bandwidth_bytes = 2 * m / n * static_cast<double>(chunks) + 8 * m;
      cost.terms.compute_bytes = 4.0 * static_cast<double>(tensor.numel) / n;
      break;
    }
    default: {  // allgather, sign vote
      const uint64_t w = WireBytes(*c.compressor, tensor);
      cost.bytes_sum = static_cast<uint64_t>(n) * (n - 1) * (w + 8);
      cost.terms.latency_terms = 2 * m;
      cost.terms.bandwidth_bytes = m * static_cast<double>(w + 8);
      cost.terms.compute_bytes = m * 4.0 * static_cast<double>(tensor.numel);
      break;
    }
  }
  return cost;
}

// The entries of a reduction of `tensors`: whole tensors, or partitions of at most
// `partition_bytes` as the engine cuts them (ceil(count / per) parts of ceil(count / parts)).
std::vector<TensorInfo> Entries(const std::vector<CostTensor>& tensors, size_t partition_bytes) {
  std::vector<TensorInfo> entries;
  for (const CostTensor& t : tensors) {
    size_t parts = 1;
    if (partition_bytes > 0) {
      const size_t per = std::max<size_t>(1, partition_bytes / sizeof(float));
      parts = std::max<size_t>(1, (t.numel + per - 1) / per);
    }
    if (parts == 1) {
      entries.emplace_back(t.name, t.numel, t.shape);
      continue;
    }
    const size_t per = (t.numel + parts - 1) / parts;
    for (size_t p = 0; p < parts; ++p) {
      entries.emplace_back(fmt::format("{}#{}", t.name, p), std::min(per, t.numel - p * per));
    }
  }
  return entries;
}

// One reduction of `tensors` through the reducer of `plan`: dense, or compressed.
StatusOr<PathCost> Reduction(const StepCostInput& in, const std::vector<CostTensor>& tensors,
                             const CompressorRegistry& registry, uint64_t* compressed_sum,
                             std::string* pattern, bool* exact) {
  const int n = in.workers;
  PathCost total;
  FRUGAL_ASSIGN_OR_RETURN(AllreduceAlgorithm dense_algorithm, DenseAlgorithm(in.plan));
  std::vector<TensorSpec> specs;
  if (!in.plan.compressed.has_value()) {
    uint64_t floats = 0;
    for (const CostTensor& t : tensors) {
      floats += t.numel;
      specs.push_back(TensorSpec{t.name, t.numel});
    }
    total.bytes_sum = AllreduceBytesSum(dense_algorithm, n, 4 * floats);
    for (const BucketInfo& b : PlanBuckets(specs, in.bucket_cap_bytes)) {
      total.terms +=
          AllreduceCost(dense_algorithm, CostShape{.ranks = n, .bytes = 4.0 * double(b.count)});
    }
    *pattern =
        fmt::format("{} all-reduce of {} floats", AllreduceAlgorithmName(dense_algorithm), floats);
    return total;
  }
  FRUGAL_ASSIGN_OR_RETURN(Compression c, MakeCompression(*in.plan.compressed, registry));
  if (c.bound) *exact = false;
  uint64_t small = 0;
  size_t compressed_entries = 0;
  for (const TensorInfo& e : Entries(tensors, in.partition_bytes)) {
    if (4 * e.numel < c.min_bytes) {
      small += e.numel;
      continue;
    }
    const PathCost p = CompressedEntry(c, e, n);
    total.bytes_sum += p.bytes_sum;
    *compressed_sum += p.bytes_sum;
    total.terms += p.terms;
    ++compressed_entries;
  }
  if (small > 0) {
    total.bytes_sum += AllreduceBytesSum(c.algorithm, n, 4 * small);
    total.terms += AllreduceCost(c.algorithm, CostShape{.ranks = n, .bytes = 4.0 * double(small)});
  }
  *pattern = fmt::format("{} tensors through {} ({}{}), {} floats dense ({} all-reduce)",
                         compressed_entries, c.compressor->spec(), AggregationPathName(c.path),
                         c.path == AggregationPath::kCustom ? ", past its warm-up steps" : "",
                         small, AllreduceAlgorithmName(c.algorithm));
  return total;
}

}  // namespace

namespace strategy_internal {

bool IsModelled(const Compressor& c) {
  const TensorInfo probe("probe", 1000);
  if (c.traits().custom_aggregate)
    return c.AggregateAllreduceFloats(probe, kSteadyStep).has_value();
  return c.MaxBodyBits(probe).has_value();
}

uint64_t CompressedWireBytes(const Compressor& c, const TensorInfo& tensor) {
  const std::optional<uint64_t> bits = c.MaxBodyBits(tensor);
  FRUGAL_INTERNAL_ASSERT(bits.has_value(), c.spec(), " has no bound");
  return kWireHeaderBytes + *bits / 8;
}

StatusOr<std::string> FedAvgClientTraffic(const StepCostInput& in,
                                          const CompressorRegistry& registry, StepCost& cost) {
  const SyncSpec& sync = in.plan.sync;
  uint64_t parameter_floats = 0;
  for (const CostTensor& t : in.parameters) parameter_floats += t.numel;
  const int64_t m = ClientsPerRound(sync.clients, sync.fraction);
  cost.client_bytes_down = static_cast<uint64_t>(m) * 4 * (parameter_floats + in.buffer_floats);
  uint64_t upload = 4 * in.buffer_floats;
  if (in.plan.compressed.has_value()) {
    FRUGAL_ASSIGN_OR_RETURN(Compression c, MakeCompression(*in.plan.compressed, registry));
    if (c.bound) cost.exact = false;
    for (const CostTensor& t : in.parameters) {
      upload += 4 * t.numel < c.min_bytes
                    ? 4 * t.numel
                    : WireBytes(*c.compressor, TensorInfo(t.name, t.numel, t.shape));
    }
  } else {
    upload += 4 * parameter_floats;
  }
  cost.client_bytes_up = static_cast<uint64_t>(m) * upload;
  return fmt::format("{} clients download the model and upload {} bytes each", m, upload);
}

}  // namespace strategy_internal

uint64_t AllreduceBytesSum(AllreduceAlgorithm algorithm, int n, uint64_t bytes) {
  if (n <= 1) return 0;
  const uint64_t p = uint64_t{1} << FloorLog2(n);
  const uint64_t rem = static_cast<uint64_t>(n) - p;
  switch (algorithm) {
    case AllreduceAlgorithm::kRecursiveDoubling:
      return (p * static_cast<uint64_t>(FloorLog2(static_cast<int>(p))) + 2 * rem) * bytes;
    case AllreduceAlgorithm::kRabenseifner:
      return (2 * (p - 1) + 2 * rem) * bytes;
    case AllreduceAlgorithm::kDirect:  // the values are read, not sent: only where they lie
      return static_cast<uint64_t>(n) * static_cast<uint64_t>(n - 1) * kDirectRegionBytes;
    default:  // ring, tree, dbtree, torus with ring in columns, hier with one rank per host
      return 2 * static_cast<uint64_t>(n - 1) * bytes;
  }
}

StatusOr<StepCost> ComputeStepCost(const StepCostInput& in, const CompressorRegistry& registry) {
  if (in.workers < 1) return InvalidArgumentError("frugal cost: --np must be >= 1");
  if (in.plan.arch.kind == ArchKind::kParameterServer) {
    return strategy_internal::ParameterServerStepCost(in, registry);
  }
  if (in.plan.arch.kind == ArchKind::kGossip) {
    return strategy_internal::GossipStepCost(in, registry);
  }
  const int n = in.workers;
  StepCost cost;
  uint64_t parameter_floats = 0;
  for (const CostTensor& t : in.parameters) parameter_floats += t.numel;
  cost.dense_ring_bytes_sum = AllreduceBytesSum(AllreduceAlgorithm::kRing, n, 4 * parameter_floats);
  const SyncSpec& sync = in.plan.sync;
  std::string pattern;
  switch (sync.kind) {
    case SyncKind::kBsp: {
      FRUGAL_ASSIGN_OR_RETURN(
          PathCost p, Reduction(in, in.parameters, registry, &cost.compressed_bytes_sum, &pattern,
                                &cost.exact));
      cost.bytes_sum = p.bytes_sum;
      cost.terms = p.terms;
      cost.pattern = "every step: " + pattern;
      break;
    }
    case SyncKind::kLocal: {
      if (sync.intra_period > 0 || sync.start_epoch > 0) {
        return InvalidArgumentError(
            "frugal cost: Local SGD is modelled without start-epoch and intra-period");
      }
      std::vector<CostTensor> averaged = in.parameters;
      StepCostInput whole = in;  // the average's bucket holds whole tensors
      whole.partition_bytes = 0;
      const size_t extra = sync.average_buffers ? in.buffer_floats : 0;
      if (sync.average_momenta) {
        return InvalidArgumentError("frugal cost: Local SGD is modelled without momenta=1");
      }
      PathCost p;
      if (!in.plan.compressed.has_value()) {
        if (extra > 0) averaged.push_back(CostTensor{"buffers", extra, {}});
        FRUGAL_ASSIGN_OR_RETURN(p, Reduction(whole, averaged, registry, &cost.compressed_bytes_sum,
                                             &pattern, &cost.exact));
      } else {
        FRUGAL_ASSIGN_OR_RETURN(p, Reduction(whole, averaged, registry, &cost.compressed_bytes_sum,
                                             &pattern, &cost.exact));
        if (extra > 0 && n > 1) {
          p.bytes_sum +=
              LengthCheckBytesSum(n) + AllreduceBytesSum(AllreduceAlgorithm::kRing, n, 4 * extra);
          pattern += fmt::format(", {} buffer floats exact (ring)", extra);
        }
      }
      cost.average_bytes_sum = p.bytes_sum;
      cost.bytes_sum = p.bytes_sum / static_cast<uint64_t>(sync.period);
      cost.bytes_per_worker = static_cast<double>(p.bytes_sum) / (double(sync.period) * n);
      cost.compressed_bytes_sum /= static_cast<uint64_t>(sync.period);
      cost.terms =
          CostTerms{p.terms.latency_terms / sync.period, p.terms.bandwidth_bytes / sync.period,
                    p.terms.compute_bytes / sync.period};
      cost.pattern = sync.overlap
                         ? fmt::format("every {0} steps, beside the next {0} local steps: {1}",
                                       sync.period, pattern)
                         : fmt::format("every {} steps: {}", sync.period, pattern);
      break;
    }
    case SyncKind::kAsp:  // asynchronous gossip or a parameter server: modelled above
    case SyncKind::kSsp:
    case SyncKind::kBackup:
    case SyncKind::kLag:
      return InvalidArgumentError(
          fmt::format("frugal cost: --sync {} is not modelled", SyncSpecName(sync)));
    case SyncKind::kFedAvg: {
      FRUGAL_ASSIGN_OR_RETURN(AllreduceAlgorithm algorithm, DenseAlgorithm(in.plan));
      const uint64_t model_floats = parameter_floats + in.buffer_floats;
      const uint64_t bytes = 4 * (model_floats + 1);
      cost.bytes_sum = AllreduceBytesSum(algorithm, n, bytes);
      cost.terms = AllreduceCost(algorithm, CostShape{.ranks = n, .bytes = double(bytes)});
      FRUGAL_ASSIGN_OR_RETURN(const std::string clients,
                              strategy_internal::FedAvgClientTraffic(in, registry, cost));
      cost.pattern = fmt::format("every round: {} all-reduce of {} floats among the workers; {}",
                                 AllreduceAlgorithmName(algorithm), model_floats + 1, clients);
      break;
    }
  }
  if (sync.kind != SyncKind::kLocal)
    cost.bytes_per_worker = static_cast<double>(cost.bytes_sum) / n;
  cost.received_per_worker = cost.bytes_per_worker;
  cost.seconds = cost.terms.Seconds(in.network);
  return cost;
}

}  // namespace frugal
