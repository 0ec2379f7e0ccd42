// The parameter server's sharding: parts of at most the given size that cover every tensor once,
// placed size-balanced, the same plan for the same input.
#include "ps/sharding.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace frugal::ps_internal {
namespace {

std::vector<TensorSpec> Specs(const std::vector<size_t>& counts) {
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < counts.size(); ++i) specs.push_back({fmt::format("t{}", i), counts[i]});
  return specs;
}

TEST(Sharding, PartsCoverEveryTensorOnceWithinTheLimit) {
  const std::vector<TensorSpec> specs = Specs({1000, 7, 0, 4096, 1, 333});
  for (int servers : {1, 2, 3, 4, 7}) {
    for (size_t max_bytes : {4u, 40u, 400u, 4096u, 1u << 20}) {
      const ShardPlan plan = PlanShards(specs, servers, max_bytes);
      for (size_t t = 0; t < specs.size(); ++t) {
        size_t next = 0;
        for (uint32_t key : plan.by_tensor[t]) {
          const KeyPart& part = plan.parts[key];
          EXPECT_EQ(part.key, key);
          EXPECT_EQ(part.tensor, t);
          EXPECT_EQ(part.offset, next);
          EXPECT_GT(part.count, 0u);
          EXPECT_LE(part.count * sizeof(float), max_bytes);
          EXPECT_GE(part.server, 0);
          EXPECT_LT(part.server, servers);
          next += part.count;
        }
        EXPECT_EQ(next, specs[t].count) << "tensor " << t;
      }
      uint64_t total = 0;
      for (int s = 0; s < servers; ++s) {
        uint64_t bytes = 0;
        for (uint32_t key : plan.by_server[s]) {
          EXPECT_EQ(plan.parts[key].server, s);
          bytes += plan.parts[key].count * sizeof(float);
        }
        EXPECT_EQ(bytes, plan.server_bytes[s]);
        total += bytes;
      }
      EXPECT_EQ(total, (1000 + 7 + 4096 + 1 + 333) * sizeof(float));
    }
  }
}

TEST(Sharding, NamesPartsOfCutTensors) {
  const ShardPlan plan = PlanShards(Specs({10, 3}), 2, 16);
  ASSERT_EQ(plan.parts.size(), 4u);
  EXPECT_EQ(plan.parts[0].name, "t0#0");
  EXPECT_EQ(plan.parts[1].name, "t0#1");
  EXPECT_EQ(plan.parts[2].name, "t0#2");
  EXPECT_EQ(plan.parts[3].name, "t1");
  // 10 elements in parts of at most 4: 4, 3, 3 (sizes differ by at most one).
  EXPECT_EQ(plan.parts[0].count, 4u);
  EXPECT_EQ(plan.parts[1].count, 3u);
  EXPECT_EQ(plan.parts[2].count, 3u);
}

// Largest part first onto the lightest server: parts 8, 5, 4, 3, 2 over 2 servers go
// 8 -> s0, 5 -> s1, 4 -> s1 (9), 3 -> s0 (11), 2 -> s1 (11).
TEST(Sharding, PlacesLargestFirstOnTheLightestServer) {
  const ShardPlan plan = PlanShards(Specs({3, 8, 2, 5, 4}), 2, 1 << 20);
  ASSERT_EQ(plan.parts.size(), 5u);
  EXPECT_EQ(plan.parts[1].server, 0);  // 8
  EXPECT_EQ(plan.parts[3].server, 1);  // 5
  EXPECT_EQ(plan.parts[4].server, 1);  // 4
  EXPECT_EQ(plan.parts[0].server, 0);  // 3
  EXPECT_EQ(plan.parts[2].server, 1);  // 2
  EXPECT_EQ(plan.server_bytes[0], 11u * 4);
  EXPECT_EQ(plan.server_bytes[1], 11u * 4);
}

TEST(Sharding, BalancesWithinTheGreedyBound) {
  std::vector<size_t> counts;
  for (size_t i = 1; i <= 40; ++i) counts.push_back((i * 7919) % 1000 + 1);
  const std::vector<TensorSpec> specs = Specs(counts);
  const uint64_t total = 4 * std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  for (int servers : {2, 3, 4, 5}) {
    const ShardPlan plan = PlanShards(specs, servers, 1 << 20);
    const uint64_t largest = *std::max_element(plan.server_bytes.begin(), plan.server_bytes.end());
    const uint64_t biggest_part = 4 * *std::max_element(counts.begin(), counts.end());
    // Greedy placement: the fullest server exceeds the mean by less than one part.
    EXPECT_LT(largest, total / servers + biggest_part) << servers << " servers";
  }
}

TEST(Sharding, SameInputSamePlanAndFingerprint) {
  const std::vector<TensorSpec> specs = Specs({100, 200, 50, 50});
  const ShardPlan a = PlanShards(specs, 3, 128);
  const ShardPlan b = PlanShards(specs, 3, 128);
  EXPECT_EQ(ShardPlanFingerprint(a), ShardPlanFingerprint(b));
  EXPECT_NE(ShardPlanFingerprint(a), ShardPlanFingerprint(PlanShards(specs, 2, 128)));
  EXPECT_NE(ShardPlanFingerprint(a), ShardPlanFingerprint(PlanShards(specs, 3, 256)));
}

TEST(Sharding, RefusesNoServers) { EXPECT_THROW(PlanShards(Specs({4}), 0, 16), CheckError); }

}  // namespace
}  // namespace frugal::ps_internal
