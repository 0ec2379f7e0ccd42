// Tier 2: frugal's collectives over the MPI transport across real processes, against a serial
// reference computed from every rank's (deterministic) input. The world of 4 ranks is also split
// into groups of 3 + 1 and 2 + 2, so sizes 1, 2, 3 and 4 are covered in one job.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/timer.h"
#include "mpi_test_main.h"

namespace frugal {
namespace {

using mpitest::TestWorld;

using mpitest::kTimeout;

// Input of `rank` at index i: small integers, so that sums are exact in float.
float CollectivesInput(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 5 + static_cast<size_t>(rank) * 11) % 23) - 9);
}

// Runs `body` on groups of several sizes: the whole world, then splits into the first `k` ranks
// and the rest, for k = n-1 and k = n/2. Every rank runs the same sequence.
template <typename Body>
void ForEachGroup(Transport& world, Body body) {
  body(world);
  std::vector<int> cuts = {world.size() - 1};
  if (world.size() / 2 != world.size() - 1 && world.size() / 2 > 0)
    cuts.push_back(world.size() / 2);
  for (int k : cuts) {
    auto group = world.Split(world.rank() < k ? 0 : 1, world.rank(), kTimeout);
    ASSERT_TRUE(group.ok()) << group.status().ToString();
    body(**group);
  }
}

class MpiAllreduceTest : public ::testing::TestWithParam<AllreduceAlgorithm> {};

TEST_P(MpiAllreduceTest, SumAndAverageMatchTheSerialReference) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  ForEachGroup(*world, [&](Transport& t) {
    const int n = t.size();
    for (size_t count :
         {size_t{1}, size_t{7}, size_t{1000}, size_t{65536 + 13},
          size_t{(1 << 18) + 3}}) {  // 1 MiB + 12 bytes: rd and the trees read in place
      // Sum and average on the caller's own memory; the sum also on memory shared with the
      // transport (AllreduceOptions::data_owner: sent and received without staging).
      for (int variant = 0; variant < 3; ++variant) {
        const ReduceOp op = variant == 1 ? ReduceOp::kAverage : ReduceOp::kSum;
        const bool shared = variant == 2;
        std::vector<float> own(shared ? 0 : count);
        const SharedBytes memory = t.NewShared(shared ? count * sizeof(float) : 0);
        const std::span<float> data =
            shared ? std::span<float>(reinterpret_cast<float*>(memory.bytes.data()), count)
                   : std::span<float>(own);
        for (size_t i = 0; i < count; ++i) data[i] = CollectivesInput(t.rank(), i);
        AllreduceOptions options;
        if (shared) options.data_owner = memory.owner;
        options.algorithm = GetParam();
        options.op = op;
        options.timeout = kTimeout;
        options.segment_bytes = 16 << 10;  // several segments for the pipelined algorithms
        if (GetParam() == AllreduceAlgorithm::kHierarchical && n % 2 == 0) {
          options.ranks_per_host = 2;  // two "hosts" although all ranks share one
        }
        Status s = Allreduce(t, data, options);
        ASSERT_TRUE(s.ok()) << AllreduceAlgorithmName(GetParam()) << " n=" << n
                            << " count=" << count << ": " << s.ToString();
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          float expected = 0;
          for (int r = 0; r < n; ++r) expected += CollectivesInput(r, i);
          if (op == ReduceOp::kSum) {
            wrong += data[i] != expected ? 1 : 0;
          } else {
            wrong += std::fabs(data[i] - expected / n) > 1e-5f * (1 + std::fabs(expected)) ? 1 : 0;
          }
        }
        EXPECT_EQ(wrong, 0u) << AllreduceAlgorithmName(GetParam()) << " n=" << n
                             << " count=" << count << (op == ReduceOp::kSum ? " sum" : " average")
                             << (shared ? " on shared memory" : "");
      }
    }
  });
}

// Every rank passes a different length from rank 1: every rank gets kInvalidArgument.
TEST_P(MpiAllreduceTest, LengthMismatchFailsOnEveryRank) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  std::vector<float> data(world->rank() == 1 ? 10 : 12, 1.0f);
  AllreduceOptions options;
  options.algorithm = GetParam();
  options.timeout = kTimeout;
  Status s = Allreduce(*world, data, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("10"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("12"), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Algorithms, MpiAllreduceTest,
                         ::testing::ValuesIn(AllAllreduceAlgorithms()),
                         [](const ::testing::TestParamInfo<AllreduceAlgorithm>& info) {
                           return std::string(AllreduceAlgorithmName(info.param));
                         });

// Ranks started by mpirun on one machine map each other's memory; the direct all-reduce then reads
// each call's buffer where it lies, also when every call brings blocks of new sizes (new memfds,
// file descriptor numbers of freed ones reused, new generations) and over split transports.
TEST(MpiCollectives, DirectReadsEachCallsBuffersWhereTheyLie) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  EXPECT_TRUE(world->SharesMemoryWithPeers());
  ForEachGroup(*world, [&](Transport& t) {
    EXPECT_TRUE(t.SharesMemoryWithPeers());
    for (int call = 0; call < 24; ++call) {
      const size_t count = (size_t{1} << (4 + call % 12)) + static_cast<size_t>(call);
      const SharedBytes memory = t.NewShared(count * sizeof(float));
      ASSERT_TRUE(t.RegionOf(memory.bytes).has_value());
      const std::span<float> data(reinterpret_cast<float*>(memory.bytes.data()), count);
      for (size_t i = 0; i < count; ++i) data[i] = CollectivesInput(t.rank(), i + call);
      AllreduceOptions options;
      options.algorithm = AllreduceAlgorithm::kDirect;
      options.timeout = kTimeout;
      options.data_owner = memory.owner;
      const uint64_t before = t.bytes_sent();
      ASSERT_TRUE(Allreduce(t, data, options).ok());
      // Only where the buffers lie was sent (and the length check's 16 bytes per step).
      EXPECT_LT(t.bytes_sent() - before, 64u * static_cast<uint64_t>(t.size()));
      for (size_t i = 0; i < count; ++i) {
        float expected = 0;
        for (int r = 0; r < t.size(); ++r) expected += CollectivesInput(r, i + call);
        ASSERT_EQ(data[i], expected) << "call " << call << " element " << i;
      }
    }
  });
}

TEST(MpiCollectives, TorusWithExplicitRows) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  if (world->size() % 2 != 0) GTEST_SKIP() << "needs an even world";
  std::vector<float> data(777);
  for (size_t i = 0; i < data.size(); ++i) data[i] = CollectivesInput(world->rank(), i);
  AllreduceOptions options;
  options.algorithm = AllreduceAlgorithm::kTorus2D;
  options.torus_rows = 2;
  options.inner_algorithm = AllreduceAlgorithm::kRecursiveDoubling;
  options.timeout = kTimeout;
  ASSERT_TRUE(Allreduce(*world, data, options).ok());
  for (size_t i = 0; i < data.size(); ++i) {
    float expected = 0;
    for (int r = 0; r < world->size(); ++r) expected += CollectivesInput(r, i);
    ASSERT_EQ(data[i], expected) << i;
  }
}

TEST(MpiCollectives, BroadcastFromEveryRoot) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  ForEachGroup(*world, [&](Transport& t) {
    for (int root = 0; root < t.size(); ++root) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{(1 << 18) + 3}}) {
        std::vector<float> data(count, -1.0f);
        if (t.rank() == root) {
          for (size_t i = 0; i < count; ++i) data[i] = CollectivesInput(root, i);
        }
        ASSERT_TRUE(Broadcast(t, std::span<float>(data), root, {kTimeout}).ok());
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], CollectivesInput(root, i)) << i;
      }
      std::vector<std::byte> bytes(101, std::byte{0});
      if (t.rank() == root) bytes.assign(101, std::byte{static_cast<unsigned char>(root + 1)});
      ASSERT_TRUE(Broadcast(t, std::span<std::byte>(bytes), root, {kTimeout}).ok());
      EXPECT_EQ(bytes[100], std::byte{static_cast<unsigned char>(root + 1)});
    }
  });
}

TEST(MpiCollectives, AllgatherInRankOrder) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  ForEachGroup(*world, [&](Transport& t) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}}) {
      std::vector<float> in(count);
      for (size_t i = 0; i < count; ++i) in[i] = CollectivesInput(t.rank(), i);
      std::vector<float> out(count * t.size(), 99.0f);
      ASSERT_TRUE(Allgather(t, in, out, {kTimeout}).ok());
      for (int r = 0; r < t.size(); ++r) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r * count + i], CollectivesInput(r, i));
      }
    }
  });
}

TEST(MpiCollectives, AllgathervWithDifferentSizes) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  ForEachGroup(*world, [&](Transport& t) {
    // Rank r contributes 37 r bytes (rank 0 nothing) of value r + 1.
    std::vector<std::byte> in(37 * static_cast<size_t>(t.rank()),
                              std::byte{static_cast<unsigned char>(t.rank() + 1)});
    std::vector<std::byte> out;
    std::vector<size_t> sizes;
    ASSERT_TRUE(Allgatherv(t, in, out, sizes, {kTimeout}).ok());
    ASSERT_EQ(sizes.size(), static_cast<size_t>(t.size()));
    size_t offset = 0;
    for (int r = 0; r < t.size(); ++r) {
      ASSERT_EQ(sizes[r], 37 * static_cast<size_t>(r));
      for (size_t i = 0; i < sizes[r]; ++i) {
        ASSERT_EQ(out[offset + i], std::byte{static_cast<unsigned char>(r + 1)});
      }
      offset += sizes[r];
    }
    EXPECT_EQ(out.size(), offset);
  });
}

TEST(MpiCollectives, ReduceScatterLeavesTheOwnBlockReduced) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  ForEachGroup(*world, [&](Transport& t) {
    for (size_t count : {size_t{3}, size_t{1001}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = CollectivesInput(t.rank(), i);
        ASSERT_TRUE(ReduceScatter(t, data, op, {kTimeout}).ok());
        Block block = BlockPartition(count, t.size(), t.rank());
        for (size_t i = block.offset; i < block.offset + block.count; ++i) {
          float expected = 0;
          for (int r = 0; r < t.size(); ++r) expected += CollectivesInput(r, i);
          if (op == ReduceOp::kAverage) expected /= t.size();
          ASSERT_NEAR(data[i], expected, 1e-5f * (1 + std::fabs(expected))) << i;
        }
      }
    }
  });
}

TEST(MpiCollectives, BarrierWaitsForTheLastRank) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  ASSERT_TRUE(Barrier(*world, {kTimeout}).ok());
  Stopwatch watch;
  if (world->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(Barrier(*world, {kTimeout}).ok());
  EXPECT_GE(watch.Seconds(), 0.25);
}

// One rank never joins: every other rank's all-reduce times out within the timeout (plus a
// margin), and the absent rank is named by the ranks that wait for it directly.
TEST(MpiCollectives, AbsentRankMakesTheOthersTimeOutNamingIt) {
  auto world = TestWorld();
  ASSERT_NE(world, nullptr);
  const int absent = world->size() - 1;
  std::string message;
  if (world->rank() != absent) {
    std::vector<float> data(1000, 1.0f);
    AllreduceOptions options;
    options.algorithm = AllreduceAlgorithm::kRing;
    options.timeout = std::chrono::milliseconds(500);
    Stopwatch watch;
    Status s = Allreduce(*world, data, options);
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
    EXPECT_LT(watch.Seconds(), 5.0);
    message = s.message();
  }
  // Collect every rank's message on rank 0 over a fresh transport (the old one is broken).
  auto fresh = TestWorld();
  ASSERT_NE(fresh, nullptr);
  const auto text = std::as_bytes(std::span<const char>(message.data(), message.size()));
  std::vector<std::byte> in(text.begin(), text.end());
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  ASSERT_TRUE(Allgatherv(*fresh, in, all, sizes, {kTimeout}).ok());
  std::string joined(reinterpret_cast<const char*>(all.data()), all.size());
  EXPECT_NE(joined.find("rank " + std::to_string(absent)), std::string::npos) << joined;
}

}  // namespace
}  // namespace frugal
