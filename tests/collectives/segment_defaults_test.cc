// The segment each all-reduce algorithm uses: its own default when AllreduceOptions leaves the
// segment unset, the caller's when set (0: unsegmented). Checked on the number of messages the
// ranks send, which the segment size fixes exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/inproc_transport.h"
#include "test_util.h"

namespace frugal::testing {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

// Messages all ranks together send in one sum all-reduce of `bytes` (no length check, whose own
// message would be counted too); the result is checked against the serial reference.
uint64_t MessagesSent(AllreduceAlgorithm algorithm, int n, size_t bytes,
                      std::optional<size_t> segment_bytes) {
  const size_t count = bytes / sizeof(float);
  std::atomic<uint64_t> total{0};
  // Recursive doubling and the trees on one host read each other's buffers from 128 KiB and send
  // no values; their ranks here are on hosts of their own.
  InProcOptions world;
  if (algorithm == AllreduceAlgorithm::kRecursiveDoubling ||
      algorithm == AllreduceAlgorithm::kBinaryTree ||
      algorithm == AllreduceAlgorithm::kDoubleBinaryTree) {
    world.ranks_per_host = 1;
  }
  std::vector<Status> statuses = RunRanks(
      n,
      [&](Transport& t) -> Status {
        std::vector<float> data = MakeInput(t.rank(), count);
        AllreduceOptions options;
        options.algorithm = algorithm;
        options.check_lengths = false;
        options.segment_bytes = segment_bytes;
        options.timeout = std::chrono::seconds(30);
        // On one host whose ranks share memory the hierarchical all-reduce is the direct one, which
        // sends no values; on two hosts its segments pipeline the broadcast inside each host.
        if (algorithm == AllreduceAlgorithm::kHierarchical) options.ranks_per_host = n / 2;
        const uint64_t before = t.messages_sent();
        FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, options));
        total += t.messages_sent() - before;
        const int64_t wrong =
            FirstMismatch(data, Reference(n, count, ReduceOp::kSum), Tolerance(n, ReduceOp::kSum));
        if (wrong >= 0) return InternalError("wrong element " + std::to_string(wrong));
        return Status::Ok();
      },
      world);
  ExpectAllOk(statuses);
  return total;
}

// The defaults, as docs/performance.md records the measurements that chose them.
struct Default {
  AllreduceAlgorithm algorithm;
  size_t bytes;
};
const std::vector<Default>& Defaults() {
  static const std::vector<Default> defaults = {
      {AllreduceAlgorithm::kRing, 512 * kKiB},
      {AllreduceAlgorithm::kRecursiveDoubling, 512 * kKiB},
      {AllreduceAlgorithm::kRabenseifner, 512 * kKiB},
      {AllreduceAlgorithm::kBinaryTree, 512 * kKiB},
      {AllreduceAlgorithm::kDoubleBinaryTree, 512 * kKiB},
      {AllreduceAlgorithm::kHierarchical, 512 * kKiB},
      {AllreduceAlgorithm::kTorus2D, 512 * kKiB},
      {AllreduceAlgorithm::kDirect, 256 * kKiB},
  };
  return defaults;
}

TEST(SegmentDefaults, EachAlgorithmHasItsOwnAndAnExplicitSegmentOverridesIt) {
  ASSERT_EQ(Defaults().size(), AllAllreduceAlgorithms().size());
  for (const Default& d : Defaults()) {
    EXPECT_EQ(DefaultSegmentBytes(d.algorithm), d.bytes) << AllreduceAlgorithmName(d.algorithm);
    AllreduceOptions options;
    options.algorithm = d.algorithm;
    EXPECT_EQ(SegmentBytes(options), d.bytes);
    options.segment_bytes = 64 * kKiB;
    EXPECT_EQ(SegmentBytes(options), 64 * kKiB);
    options.segment_bytes = 0;
    EXPECT_EQ(SegmentBytes(options), 0u);
  }
}

// Ring on 4 ranks over 4 MiB: 2 (n - 1) = 6 steps per rank, each sending a 1 MiB block in
// ceil(1 MiB / segment) messages.
TEST(SegmentDefaults, RingSendsItsBlocksInSegmentsOfItsDefault) {
  const auto ring = AllreduceAlgorithm::kRing;
  const uint64_t per_block = (1 * kMiB + DefaultSegmentBytes(ring) - 1) / DefaultSegmentBytes(ring);
  EXPECT_EQ(MessagesSent(ring, 4, 4 * kMiB, std::nullopt), 4 * 6 * per_block);
  EXPECT_EQ(MessagesSent(ring, 4, 4 * kMiB, 256 * kKiB), 4 * 6 * 4u);
  EXPECT_EQ(MessagesSent(ring, 4, 4 * kMiB, 0), 4 * 6 * 1u);
}

// Binary tree over 1 MiB in S segments: on 2 ranks one sends S up, the other S down (2 S); on 4
// ranks (heap tree 0 <- 1, 2; 1 <- 3) the root sends S to each child, rank 1 S up and S down, the
// leaves S up each (6 S). The default 512 KiB gives S = 2, 1 MiB S = 1.
TEST(SegmentDefaults, BinaryTreePipelinesInItsDefaultSegments) {
  const auto tree = AllreduceAlgorithm::kBinaryTree;
  EXPECT_EQ(MessagesSent(tree, 2, 1 * kMiB, std::nullopt), 2 * 2u);
  EXPECT_EQ(MessagesSent(tree, 4, 1 * kMiB, std::nullopt), 6 * 2u);
  EXPECT_EQ(MessagesSent(tree, 4, 1 * kMiB, 1 * kMiB), 6 * 1u);
  EXPECT_EQ(MessagesSent(tree, 4, 1 * kMiB, 64 * kKiB), 6 * 16u);
}

// Every algorithm sends, with its segment unset, exactly what it sends with its default given
// explicitly, and a different count with a segment 4 times smaller (2 MiB on 4 ranks is large
// enough for each to cut its messages by either: a ring block is 512 KiB).
TEST(SegmentDefaults, UnsetMeansTheAlgorithmsDefaultForEveryAlgorithm) {
  for (const Default& d : Defaults()) {
    // The direct all-reduce's segment is the piece it sums in the cache; it sends no values.
    if (d.algorithm == AllreduceAlgorithm::kDirect) continue;
    SCOPED_TRACE(AllreduceAlgorithmName(d.algorithm));
    const size_t bytes = 2 * kMiB;
    const uint64_t unset = MessagesSent(d.algorithm, 4, bytes, std::nullopt);
    EXPECT_EQ(unset, MessagesSent(d.algorithm, 4, bytes, d.bytes));
    EXPECT_LT(unset, MessagesSent(d.algorithm, 4, bytes, d.bytes / 4));
  }
}

}  // namespace
}  // namespace frugal::testing
