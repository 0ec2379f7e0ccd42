// The architecture cost model: the bytes a training strategy moves per step, from the
// compressors' exact wire sizes and the algorithms' message patterns, and the time of those
// messages in the alpha-beta-gamma model (cost_model.h). `frugal cost` prints it.
//
// Bytes are sums over the workers of what each sends (every message of the all-reduce patterns
// stays among the workers, so the workers receive as much as they send); the mean per worker is
// that sum divided by n, which is what `frugal train` reports as bytes_sent_per_worker (the mean
// over ranks, rounded). The sum of one all-reduce of N bytes over n ranks is, for every algorithm,
// fixed by the pattern whatever the blocks and segments (docs/algorithms.md):
//   ring, tree, dbtree: 2 (n - 1) N;  rd: (p log2 p + 2 rem) N;  rabenseifner:
//   (2 (p - 1) + 2 rem) N  (p the largest power of two <= n, rem = n - p);  hier with H hosts and
//   a ring between leaders: 2 (n - 1) N (one host: the binary tree);  torus R x C with a ring
//   in the columns: 2 (n - 1) N.
// The compressed aggregation paths (compressor.h), W_j the exact payload (header included) of
// tensor or chunk j:  allreduce (summable bodies): the all-reduce of the body's floats plus one;
// allgather and sign vote: n (n - 1) (W + 8) (the Allgatherv's sizes and payloads);
// two-phase: 2 (n - 1) sum_j W_j + 8 n (n - 1) over the n chunks.
// Strategies:
//  - bsp: every step the gradients of the trainable parameters through the strategy's reducer:
//    dense, or per tensor (partitions of at most partition_bytes under priority overlap) the
//    compressed path, the tensors below min_bytes together in one dense all-reduce per bucket;
//  - local:period=H: every H steps one average of the parameters and float buffers (dense: one
//    fused all-reduce; compressed: the parameters' deltas as bsp's gradients, the buffers with a
//    ring all-reduce after a length check, 16-byte messages of recursive doubling): reported per
//    step as the average's bytes / H;
//  - fedavg: per round one all-reduce of 4 (parameters + buffers + 1) bytes among the workers,
//    and the deployment's client traffic: down m x 4 (parameters + buffers), up the sum of the m
//    clients' uploads (compressed tensors' payloads, the rest 4 bytes a value).
// Top-k's payload depends on the data (its index code is the shortest of three): the model gives
// its bound, each index in the fixed-width code (`exact` is false). A compressor that moves its
// own data as a fixed sequence of all-reduces (Compressor::AggregateAllreduceFloats; PowerSGD: P
// of rows x r and Q of cols x r floats per compressed matrix, the values of any other tensor) is
// costed as those all-reduces of the plan's algorithm, at a step past its warm-up (PowerSGD's
// first start_iter steps are dense all-reduces). Compressors whose payload has no bound
// (threshold, adaptive, dgc, sbc, stc), or that move their own data otherwise (gtopk, terngrad),
// are refused (kInvalidArgument naming them).
//
//  - ps:servers=S (step_cost_ps.cc): the keys of the parameter server's sharding (what the
//    servers hold cut into parts of at most shard-mb, placed on the servers: the trainable
//    parameters, and under local (unless buffers=0) and fedavg the float buffers); per exchange
//    each worker pushes every key (a 52-byte header and its floats, or with --compress the
//    compressor's payload of the key) and gets it back (the header and the floats, or with
//    --compress-pull the payload of the key's change), so per worker it sends sum_k push_k and
//    receives sum_k answer_k, and server s receives W sum_{k on s} push_k and sends
//    W sum_{k on s} answer_k. bsp, ssp, asp, backup and lag exchange every step of a worker (the
//    asynchronous models move the same messages per push); lag's skipped pushes send a header
//    only, which depends on the data: the model gives the bound of no skip (`exact` false).
//    local:period=H exchanges the model deltas every H steps: reported per step as the
//    exchange's bytes / H. fedavg exchanges once per round; a worker that plays none of the
//    round's sampled clients pushes the headers alone (52 K bytes, weight 0): with U_r of the W
//    workers playing a client of round r (SampleClients with the plan's seed, client c on worker
//    c mod W), a round sends U_r sum_k push_k + (W - U_r) 52 K, reported as the mean over rounds
//    0 .. rounds - 1; its client traffic is as over all-reduce.
//    The start (hello, initial values), heartbeats, rests and statistics are not per step and are
//    left out, as the training counts leave them out;
//  - gossip (step_cost_gossip.cc): every round each rank sends its message to its out-neighbours
//    of the round's phase: D-PSGD 4 F bytes (F the parameters and float buffers), SGP 4 (F + 1),
//    CHOCO, DCD and ECD 4 + 8 T + sum_k W_k (the compressed message of compressed_message.h over
//    the T tensors, those below min_bytes in float32 with a wire header); a round after every step
//    (bsp), or every H steps (local:period=H); a time-varying topology's phases averaged over its
//    period. AD-PSGD (--sync asp) pairs ranks at random each step and is refused.
//
// Time (alpha-beta-gamma, no overlap): the dense buckets of PlanBuckets(bucket_cap) each cost
// AllreduceCost; a compressed tensor on the allgather path (n - 1)(alpha + (W + 8) beta), on the
// two-phase path 2 (n - 1) alpha + 2 (n - 1) / n sum_j W_j beta, on the all-reduce path the
// AllreduceCost of its body, on a custom path made of all-reduces the AllreduceCost of each. A
// parameter server, per exchange (Local SGD: divided by H): 2 alpha (a push and its answer) and the
// busiest NIC in beta: max(a worker's pushes, its answers, each server's C), where a server's keys
// k in push order pass its inbound link (in_k, the key's pushes) and then its outbound one (out_k,
// the key's W answers, which leave after its last push arrived): C = max_k (in_1 + .. + in_k +
// out_k + .. + out_K) (step_cost_ps.cc). Gossip: per round alpha + max(out-degree, in-degree) x
// message beta (the messages of a round go at once).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/cost_model.h"
#include "frugal/status.h"
#include "frugal/strategy.h"

namespace frugal {

struct CostTensor {
  std::string name;
  size_t numel = 0;
  std::vector<int64_t> shape;
};

struct StepCostInput {
  std::vector<CostTensor> parameters;  // trainable, in registration order
  size_t buffer_floats = 0;            // float buffers (batch-norm statistics)
  std::vector<CostTensor> buffers;     // the same, tensor by tensor (gossip's compressed messages)
  int workers = 1;
  StrategyPlan plan;
  size_t bucket_cap_bytes = 25 << 20;
  size_t partition_bytes = 0;  // priority overlap's partitions (0: whole tensors)
  // FedAvg over a parameter server: the rounds 0 .. rounds - 1 whose sampled clients decide which
  // workers upload (the figures are their mean).
  int64_t rounds = 1;
  CostParams network;
};

struct StepCost {
  // Sums over the workers, per step (Local SGD: per step averaged over a period; FedAvg: per
  // round).
  uint64_t bytes_sum = 0;
  double bytes_per_worker = 0;  // bytes_sum / n
  // False when a compressor's payload size depends on the data (top-k): the bytes are then an
  // upper bound, every index counted in the fixed-width code (Compressor::MaxBodyBits).
  bool exact = true;
  // Of which through the compressor (the rest is dense).
  uint64_t compressed_bytes_sum = 0;
  // Local SGD: the bytes of one average (bytes_sum x period, exactly).
  uint64_t average_bytes_sum = 0;
  // FedAvg: the deployment's client traffic per round.
  uint64_t client_bytes_up = 0;
  uint64_t client_bytes_down = 0;
  // What a dense ring all-reduce of the gradients would send per step (sum over workers).
  uint64_t dense_ring_bytes_sum = 0;
  // What a worker receives per step, mean over the workers (all-reduce: what it sends).
  double received_per_worker = 0;
  // Parameter server: per server and step (as bytes_sum: Local SGD's averaged over a period,
  // FedAvg's per round, the mean over the rounds), the bytes it receives from and sends to the
  // workers.
  std::vector<double> server_bytes_in;
  std::vector<double> server_bytes_out;
  // FedAvg over a parameter server: what a worker that plays no sampled client pushes per round
  // (the keys' headers), and the workers that do, per round (the mean over the rounds).
  uint64_t idle_bytes_per_worker = 0;
  double uploading_workers = 0;
  CostTerms terms;      // per step, of the slowest pattern (see above)
  double seconds = 0;   // terms at `network`
  std::string pattern;  // one line: what moves
};

// Sum over the n ranks of the bytes one all-reduce of `bytes` sends (see above).
uint64_t AllreduceBytesSum(AllreduceAlgorithm algorithm, int n, uint64_t bytes);

// kInvalidArgument for what the model does not cover (named), kNotFound for an unknown
// compressor.
StatusOr<StepCost> ComputeStepCost(const StepCostInput& input, const CompressorRegistry& registry);

}  // namespace frugal
