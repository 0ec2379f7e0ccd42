// How FedAvg's clients split the training set: the partition of the samples over K clients (not
// over the ranks), from the seed, and the order a client visits its shard. No torch types.
//
// PartitionClients:
//  - iid: the iid sampler's permutation of epoch 0 (IidPermutation(N, seed, 0)); client k takes
//    positions k, k+K, k+2K, ... of it. The shards are disjoint, cover the set, and differ in
//    size by at most one. With K equal to the number of ranks, client k's shard is the set of
//    samples rank k uses in the first epoch of a BSP run.
//  - dirichlet:ALPHA: DirichletSplit(labels, K, ALPHA, seed, attempt) for attempt = 0, 1, ...
//    (for each class, Dirichlet(ALPHA) proportions over the clients), keeping the first draw that
//    gives every client at least `min_samples` samples; at most kMaxPartitionAttempts draws.
//  - source: SourceSplit(labels, K): whole sources (text files) per client, the largest ones
//    cut in halves of consecutive samples while there are fewer pieces than clients.
// A partition that cannot give every client `min_samples` is kInvalidArgument with one line
// naming the partition, the clients, the minimum and what to change.
//
// ClientEpochOrder: the shard shuffled with the stream (seed, client, local_epoch,
// "fedavg/client-epoch"), where local_epoch counts the client's local epochs over the run
// (round x local epochs per round + e): reproducible, whichever rank plays the client.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "frugal/status.h"
#include "frugal_torch/data.h"

namespace frugal_torch {

inline constexpr int kMaxPartitionAttempts = 100;

struct ClientPartition {
  PartitionSpec spec;
  uint64_t seed = 0;
  int64_t min_samples = 0;
  int attempts = 1;  // draws made (dirichlet); the last one is the partition
  std::vector<std::vector<int64_t>> shards;  // by client: sample indices, ascending

  int64_t clients() const { return static_cast<int64_t>(shards.size()); }
  // Samples per client, and per client and class (classes 0..9 of Fashion-MNIST).
  std::vector<int64_t> Counts() const;
  std::vector<std::vector<int64_t>> ClassCounts(const std::vector<uint8_t>& labels) const;
};

frugal::StatusOr<ClientPartition> PartitionClients(const std::vector<uint8_t>& labels,
                                                   int64_t clients, PartitionSpec spec,
                                                   uint64_t seed, int64_t min_samples);

std::vector<int64_t> ClientEpochOrder(const std::vector<int64_t>& shard, uint64_t seed,
                                      int64_t client, int64_t local_epoch);

}  // namespace frugal_torch
