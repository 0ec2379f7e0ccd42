// `frugal bench allreduce`: frugal's all-reduce algorithms against MPI_Allreduce and Gloo, with
// the alpha-beta-gamma model's prediction next to each measurement.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/cost_model.h"
#include "frugal/logging.h"
#include "frugal/status.h"
#include "frugal/transport.h"
#include "peers.h"

namespace frugal::bench {

// Names accepted besides frugal's own algorithms (ParseAllreduceAlgorithm).
inline constexpr std::string_view kMpiPeerName = "mpi";
inline constexpr std::string_view kGlooPeerName = "gloo";
// Appended to one of frugal's algorithms ("ring:staged"): the same algorithm on the same buffer,
// but not told that the buffer is shared with the transport (AllreduceOptions::data_owner), so
// its sends and receives on it take the transport's staging copies, as on a caller's own memory.
inline constexpr std::string_view kStagedSuffix = ":staged";
// Appended to one of frugal's algorithms ("ring:fused"): AllreduceFused of the same buffer cut
// into tensors of kFusedTensorCounts floats in turn (the last one takes the rest): what a bucket
// of fused gradients costs, each with the bits of its own all-reduce.
inline constexpr std::string_view kFusedSuffix = ":fused";
// The sizes of ResNet-20's tensors: a batch-norm vector, the first convolution, and the
// convolutions of its three stages.
inline constexpr size_t kFusedTensorCounts[] = {16, 432, 2304, 9216, 36864};
// Between one of frugal's algorithms and its suffix ("ring@256K", "tree@1M:staged"): the segment
// of that case, in place of --segment-bytes and the algorithm's default, so that several segment
// sizes of one algorithm take turns in the same run.
inline constexpr char kSegmentSeparator = '@';

struct AllreduceBenchOptions {
  std::vector<size_t> sizes;            // bytes, multiples of sizeof(float)
  std::vector<std::string> algorithms;  // frugal algorithm names (ALGO:staged, ALGO:fused too),
                                        // "mpi", "gloo"
  int iters = 10;
  int warmup = 2;
  Duration timeout = kDefaultTimeout;
  // Passed to frugal's algorithms (see AllreduceOptions); unset: each algorithm's default.
  std::optional<size_t> segment_bytes;
  int ranks_per_host = 0;
  int torus_rows = 0;
  GlooPeerOptions gloo;
};

// Default sizes and algorithms of the command.
std::vector<size_t> DefaultAllreduceSizes();       // 4K, 64K, 1M, 16M, 64M
std::vector<std::string> DefaultAllreduceNames();  // every frugal algorithm, mpi, gloo

// Checks names, sizes and counts before anything runs (kInvalidArgument naming what is wrong).
Status ValidateAllreduceBenchOptions(const AllreduceBenchOptions& options);

struct AllreduceBenchRow {
  std::string algorithm;
  int ranks = 0;
  size_t bytes = 0;
  int iters = 0;
  double time_us = 0;  // median over iterations of the slowest rank's time
  double min_us = 0;
  double max_us = 0;
  double algbw_gbps = 0;                     // bytes / time, GB = 1e9 bytes
  double busbw_gbps = 0;                     // algbw * 2(n-1)/n
  std::optional<double> predicted_us;        // frugal algorithms only
  std::optional<size_t> segment_bytes;       // frugal algorithms only: the segment they used
  std::optional<double> ratio_to_best_peer;  // best peer's time / this time
  bool correct = false;  // every rank's result equalled the exact sum in every iteration
};

struct AllreduceBenchReport {
  int ranks = 0;
  CostParams model;         // alpha, beta from the start-up ping-pong, gamma from a local reduction
  LinearFit latency_fit;    // ping-pong fit over small messages: model.alpha = max(alpha, 0)
  LinearFit bandwidth_fit;  // ping-pong fit over large messages: model.beta = max(beta, 0)
  bool fitted = false;      // false on a single rank (no ping-pong)
  std::vector<AllreduceBenchRow> rows;
};

// Collective over `t` (every rank, same options; `t` must span MPI_COMM_WORLD when "mpi" is
// asked for). The report is complete on rank 0.
StatusOr<AllreduceBenchReport> RunAllreduceBench(Transport& t, const AllreduceBenchOptions& options,
                                                 const Logger& logger);

std::string AllreduceTable(const AllreduceBenchReport& report);
std::vector<nlohmann::json> AllreduceJson(const AllreduceBenchReport& report);

// busbw of nccl-tests for all-reduce: algbw * 2(n-1)/n.
double AllreduceBusBandwidth(double algbw, int ranks);

}  // namespace frugal::bench
