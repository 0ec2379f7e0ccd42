// The gossip algorithms on a flat model: the interface the strategy layer drives, once per
// gossip round, and the factories of each algorithm.
//
// The model is one float vector x (the parameters, then the float buffers), split into tensors
// by a FlatLayout. One round r of an algorithm, on every rank:
//
//   BeforeStep(t, r, x)   if ActsBeforeStep(r): x is the model the local step will start from;
//                         the algorithm may keep it, start sending it, or change it (de-biasing);
//   (the local step: forward, backward, the optimizer, all outside; x += update)
//   AfterStep(t, r, x)    x is the model after the local step; on return, the model of the next
//                         round (mixed with the neighbours' as the algorithm says);
//   Settle(t, x)          completes every exchange still in flight, so that x is the rank's
//                         whole model (before an evaluation); the next round goes on from there.
//   Progress(t)           between the calls above, while the local step computes: moves what is
//                         in flight along without blocking; true when nothing is left in flight.
//
// Round r uses phase r mod period of the topology and keys the compressors' random streams.
// All exchanges go over `t`, whose ranks are the topology's ranks; bytes are counted by `t`.
// Every wait is bounded by the options' timeout. Not thread safe: one thread (the one that owns
// the transport) calls everything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/gossip.h"
#include "frugal/transport.h"

namespace frugal::gossip {

struct FlatLayout {
  std::vector<TensorInfo> tensors;
  std::vector<size_t> offsets;
  size_t total = 0;

  void Add(std::string name, size_t numel);
};

struct AlgorithmOptions {
  const Topology* topology = nullptr;  // outlives the algorithm
  const MixingMatrix* mixing = nullptr;
  int rank = 0;  // this rank in the topology (the transport's rank)
  Duration timeout = kDefaultTimeout;
  uint64_t seed = 0;
  // dpsgd
  bool atc = false;
  // choco, dcd, ecd: the compressor of tensors of at least compress_min_bytes bytes (smaller
  // ones go as float32); choco's consensus step.
  std::shared_ptr<const Compressor> compressor;
  size_t compress_min_bytes = 0;
  double gamma = 0.9;
  // sgp
  bool overlap = false;
};

using StateVisitor = std::function<void(std::string_view name, std::span<float>)>;

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  // Once, with the initial model (the same on every rank).
  virtual Status Begin(const FlatLayout& layout, std::span<const float> x) = 0;
  virtual bool ActsBeforeStep(uint64_t round) const {
    (void)round;
    return false;
  }
  virtual Status BeforeStep(Transport& t, uint64_t round, std::span<float> x) {
    (void)t, (void)round, (void)x;
    return Status::Ok();
  }
  virtual Status AfterStep(Transport& t, uint64_t round, std::span<float> x) = 0;
  virtual Status Settle(Transport& t, std::span<float> x) {
    (void)t, (void)x;
    return Status::Ok();
  }
  virtual bool Progress(Transport& t) {
    (void)t;
    return true;
  }
  // Every vector the algorithm keeps across rounds, by name.
  virtual void VisitState(const StateVisitor& visit) { (void)visit; }
  // Counts for the run's summary, by name.
  virtual void Report(const std::function<void(std::string_view, double)>& report) const {
    (void)report;
  }
};

// D-PSGD, CTA or ATC (options.atc), with options.mixing doubly stochastic.
std::unique_ptr<Algorithm> MakeDpsgd(const AlgorithmOptions& options);
// CHOCO-SGD, DCD-PSGD, ECD-PSGD on a static graph with options.mixing doubly stochastic.
std::unique_ptr<Algorithm> MakeChoco(const AlgorithmOptions& options);
std::unique_ptr<Algorithm> MakeDcd(const AlgorithmOptions& options);
std::unique_ptr<Algorithm> MakeEcd(const AlgorithmOptions& options);
// Push-sum (SGP) with options.mixing column stochastic.
std::unique_ptr<Algorithm> MakePushSum(const AlgorithmOptions& options);
// AD-PSGD's pairwise averages on an undirected bipartite graph (options.mixing unused).
std::unique_ptr<Algorithm> MakePairwise(const AlgorithmOptions& options);

// acc[e] = sum_j W_ij x_j[e] over the entries of `row` in order (ascending j, i itself
// included), summed in double; `values(j)` is rank j's vector. acc is resized.
void MixRow(std::span<const MixingMatrix::Entry> row,
            const std::function<std::span<const float>(int)>& values, std::vector<double>& acc);

// The message tags of the algorithms (kGossipTags).
inline constexpr int kMixTag = kGossipTags[0];
inline constexpr int kCompressedTag = kGossipTags[1];
inline constexpr int kPushSumTag = kGossipTags[2];
inline constexpr int kPairRequestTag = kGossipTags[3];
inline constexpr int kPairReplyTag = kGossipTags[4];

}  // namespace frugal::gossip
