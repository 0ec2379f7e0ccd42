// FedAvg's partition of the training set over its clients (see client_partition.h).
#include "frugal_torch/client_partition.h"

#include <fmt/format.h>

#include <algorithm>

#include "frugal/random.h"

namespace frugal_torch {
namespace {

int64_t SmallestShard(const std::vector<std::vector<int64_t>>& shards) {
  int64_t smallest = static_cast<int64_t>(shards.front().size());
  for (const auto& shard : shards)
    smallest = std::min(smallest, static_cast<int64_t>(shard.size()));
  return smallest;
}

}  // namespace

std::vector<int64_t> ClientPartition::Counts() const {
  std::vector<int64_t> counts;
  for (const auto& shard : shards) counts.push_back(static_cast<int64_t>(shard.size()));
  return counts;
}

std::vector<std::vector<int64_t>> ClientPartition::ClassCounts(
    const std::vector<uint8_t>& labels) const {
  std::vector<std::vector<int64_t>> counts;
  for (const auto& shard : shards) {
    std::vector<int64_t> row(10, 0);
    for (int64_t i : shard) {
      const size_t label = labels[static_cast<size_t>(i)];
      if (label >= row.size()) row.resize(label + 1, 0);
      ++row[label];
    }
    counts.push_back(std::move(row));
  }
  return counts;
}

frugal::StatusOr<ClientPartition> PartitionClients(const std::vector<uint8_t>& labels,
                                                   int64_t clients, PartitionSpec spec,
                                                   uint64_t seed, int64_t min_samples) {
  const int64_t total = static_cast<int64_t>(labels.size());
  const std::string what =
      fmt::format("--partition {} over {} clients", PartitionName(spec), clients);
  if (clients < 1 || clients > total) {
    return frugal::InvalidArgumentError(
        fmt::format("{}: needs 1 to {} clients (one sample each at least)", what, total));
  }
  ClientPartition partition;
  partition.spec = spec;
  partition.seed = seed;
  partition.min_samples = min_samples;
  if (spec.kind == PartitionKind::kIid) {
    const std::vector<int64_t> permutation = IidPermutation(total, seed, 0);
    partition.shards.resize(static_cast<size_t>(clients));
    for (int64_t i = 0; i < total; ++i) {
      partition.shards[static_cast<size_t>(i % clients)].push_back(
          permutation[static_cast<size_t>(i)]);
    }
    if (SmallestShard(partition.shards) < min_samples) {
      return frugal::InvalidArgumentError(fmt::format(
          "{}: {} samples per client, fewer than the minimum {} (use fewer clients or a smaller "
          "--batch-size or min-samples=M)",
          what, total / clients, min_samples));
    }
  } else if (spec.kind == PartitionKind::kSource) {
    partition.shards = SourceSplit(labels, static_cast<int>(clients));
    if (SmallestShard(partition.shards) < min_samples) {
      return frugal::InvalidArgumentError(fmt::format(
          "{}: the smallest client gets {} samples, fewer than the minimum {} (use fewer "
          "clients or a smaller --batch-size or min-samples=M)",
          what, SmallestShard(partition.shards), min_samples));
    }
  } else {
    for (int attempt = 0;; ++attempt) {
      partition.shards = DirichletSplit(labels, static_cast<int>(clients), spec.alpha, seed,
                                        static_cast<uint64_t>(attempt));
      partition.attempts = attempt + 1;
      if (SmallestShard(partition.shards) >= min_samples) break;
      if (attempt + 1 == kMaxPartitionAttempts) {
        return frugal::InvalidArgumentError(fmt::format(
            "{}: none of {} draws (seed {}) gave every client at least {} samples (use a larger "
            "ALPHA, fewer clients, or a smaller --batch-size or min-samples=M)",
            what, kMaxPartitionAttempts, seed, min_samples));
      }
    }
  }
  for (auto& shard : partition.shards) std::sort(shard.begin(), shard.end());
  return partition;
}

std::vector<int64_t> ClientEpochOrder(const std::vector<int64_t>& shard, uint64_t seed,
                                      int64_t client, int64_t local_epoch) {
  std::vector<int64_t> order = shard;
  frugal::RngStream rng(frugal::RngKey{seed, client, static_cast<uint64_t>(local_epoch),
                                       frugal::TensorId("fedavg/client-epoch")});
  ShuffleIndices(order, rng);
  return order;
}

}  // namespace frugal_torch
