// FedAvg's partition of the training set over clients, against the real labels: disjoint shards
// that cover the set, the retries of the Dirichlet draw, the error when no draw gives every client
// its minimum, and the clients' local epoch orders.
#include "frugal_torch/client_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace frugal_torch {
namespace {

const std::vector<uint8_t>& Labels() {
  static const std::vector<uint8_t>* labels = [] {
    auto file = ReadIdxFile(std::string(kFashionMnistDir) + "/train-labels-idx1-ubyte.gz");
    if (!file.ok()) throw std::runtime_error(file.status().ToString());
    return new std::vector<uint8_t>(std::move(file->data));
  }();
  return *labels;
}

// Every sample in exactly one shard, and every shard sorted.
void ExpectDisjointCover(const ClientPartition& p, size_t total) {
  std::vector<int> seen(total, 0);
  for (const auto& shard : p.shards) {
    EXPECT_TRUE(std::is_sorted(shard.begin(), shard.end()));
    for (int64_t i : shard) {
      ASSERT_GE(i, 0);
      ASSERT_LT(static_cast<size_t>(i), total);
      ++seen[static_cast<size_t>(i)];
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(total));
}

TEST(ClientPartition, IidShardsAreTheFirstEpochOfRanksAndDifferByAtMostOne) {
  const std::vector<uint8_t>& labels = Labels();
  const ClientPartition p =
      PartitionClients(labels, 7, PartitionSpec{}, /*seed=*/4, /*min_samples=*/64).value();
  ASSERT_EQ(p.clients(), 7);
  ExpectDisjointCover(p, labels.size());
  const std::vector<int64_t> counts = p.Counts();
  EXPECT_LE(*std::max_element(counts.begin(), counts.end()) -
                *std::min_element(counts.begin(), counts.end()),
            1);
  // 60000 = 4 x 15000: client k holds what rank k of 4 uses in the first BSP epoch.
  const ClientPartition four = PartitionClients(labels, 4, PartitionSpec{}, 4, 64).value();
  for (int k = 0; k < 4; ++k) {
    std::vector<int64_t> rank_epoch0 =
        ShardSampler(labels, k, 4, 64, PartitionSpec{}, 4).EpochOrder(0);
    std::sort(rank_epoch0.begin(), rank_epoch0.end());
    EXPECT_EQ(four.shards[static_cast<size_t>(k)], rank_epoch0) << "client " << k;
  }
}

TEST(ClientPartition, DirichletOverClientsIsDisjointCoversTheSetAndIsSkewed) {
  const std::vector<uint8_t>& labels = Labels();
  const PartitionSpec dirichlet{PartitionKind::kDirichlet, 0.5};
  const ClientPartition p = PartitionClients(labels, 32, dirichlet, 1, 64).value();
  ASSERT_EQ(p.clients(), 32);
  ExpectDisjointCover(p, labels.size());
  for (int64_t n : p.Counts()) EXPECT_GE(n, 64);
  // Non-IID: some client holds more than half of its samples in one class.
  int skewed = 0;
  for (const auto& row : p.ClassCounts(labels)) {
    int64_t total = 0;
    for (int64_t c : row) total += c;
    if (*std::max_element(row.begin(), row.end()) * 2 > total) ++skewed;
  }
  EXPECT_GT(skewed, 0);
  // The same seed gives the same partition; another seed another one.
  EXPECT_EQ(PartitionClients(labels, 32, dirichlet, 1, 64).value().shards, p.shards);
  EXPECT_NE(PartitionClients(labels, 32, dirichlet, 2, 64).value().shards, p.shards);
}

TEST(ClientPartition, RetriesTheDrawUntilEveryClientHasItsMinimum) {
  const std::vector<uint8_t>& labels = Labels();
  const PartitionSpec dirichlet{PartitionKind::kDirichlet, 0.3};
  // A minimum just above the first draw's smallest shard forces a retry.
  size_t smallest = labels.size();
  for (const auto& shard : DirichletSplit(labels, 16, 0.3, 5, 0)) {
    smallest = std::min(smallest, shard.size());
  }
  const int64_t minimum = static_cast<int64_t>(smallest) + 1;
  const ClientPartition p = PartitionClients(labels, 16, dirichlet, 5, minimum).value();
  EXPECT_GT(p.attempts, 1);
  EXPECT_LE(p.attempts, kMaxPartitionAttempts);
  for (int64_t n : p.Counts()) EXPECT_GE(n, minimum);
  std::vector<std::vector<int64_t>> kept =
      DirichletSplit(labels, 16, 0.3, 5, static_cast<uint64_t>(p.attempts - 1));
  for (auto& shard : kept) std::sort(shard.begin(), shard.end());
  EXPECT_EQ(p.shards, kept) << "the partition is the draw the record names";
  ExpectDisjointCover(p, labels.size());
}

TEST(ClientPartition, APartitionThatCannotGiveEveryClientItsMinimumFailsInOneLine) {
  const std::vector<uint8_t>& labels = Labels();
  const frugal::Status dirichlet =
      PartitionClients(labels, 32, PartitionSpec{PartitionKind::kDirichlet, 0.01}, 1, 64).status();
  EXPECT_EQ(dirichlet.code(), frugal::StatusCode::kInvalidArgument);
  EXPECT_EQ(dirichlet.message(),
            "--partition dirichlet:0.01 over 32 clients: none of 100 draws (seed 1) gave every "
            "client at least 64 samples (use a larger ALPHA, fewer clients, or a smaller "
            "--batch-size or min-samples=M)");
  const frugal::Status iid = PartitionClients(labels, 1000, PartitionSpec{}, 1, 64).status();
  EXPECT_EQ(iid.code(), frugal::StatusCode::kInvalidArgument);
  EXPECT_NE(iid.message().find("60 samples per client, fewer than the minimum 64"),
            std::string::npos)
      << iid.message();
  EXPECT_EQ(iid.message().find('\n'), std::string::npos);
}

TEST(ClientPartition, LocalEpochOrdersArePermutationsOfTheShardThatChange) {
  const std::vector<int64_t> shard = {3, 8, 9, 15, 21, 40, 41, 57, 60, 99};
  const std::vector<int64_t> e0 = ClientEpochOrder(shard, 1, 2, 0);
  EXPECT_EQ(e0, ClientEpochOrder(shard, 1, 2, 0));
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, shard);
  EXPECT_NE(e0, ClientEpochOrder(shard, 1, 2, 1)) << "another local epoch";
  EXPECT_NE(e0, ClientEpochOrder(shard, 1, 3, 0)) << "another client";
}

}  // namespace
}  // namespace frugal_torch
