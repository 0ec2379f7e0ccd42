// The tree and double-tree all-reduces on one machine from kReadingTreeBytes (on 2 ranks from
// 512 KiB and 4 MiB) read each other's segments in place (ReadingTreePipeline): the serial
// reference's sums, the same bits on every rank, and exactly the messages the protocol names — a
// region message to each tree neighbour, "ready" per segment up, "final" per segment to each
// child, "done" up at the end — and no values. Below the bounds or across hosts they send their
// segments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "collectives/internal.h"
#include "collectives/tree.h"
#include "frugal/collectives.h"
#include "frugal/inproc_transport.h"
#include "test_util.h"

namespace frugal::testing {
namespace {

using coll::ChunkCount;
using coll::DoubleTree;
using coll::HeapTree;
using coll::TreeNode;

struct TreeMessages {
  uint64_t bytes = 0;
  uint64_t messages = 0;
};

// What one reading pipeline over `count` floats in segments of `seg` floats sends from `node`.
TreeMessages Expected(const TreeNode& node, size_t count, size_t seg) {
  const uint64_t segments = ChunkCount(count, seg);
  const uint64_t children = (node.children[0] >= 0) + (node.children[1] >= 0);
  const uint64_t neighbours = children + (node.parent >= 0);
  TreeMessages m;
  m.bytes = neighbours * kDirectRegionBytes;
  m.messages = neighbours + segments * children + (node.parent >= 0 ? segments + 1 : 0);
  return m;
}

class TreeReading : public OverEachProtocol {};
INSTANTIATE_TEST_SUITE_P(Protocols, TreeReading, ::testing::ValuesIn(testing::AllProtocols()),
                         ProtocolParamName);

TEST_P(TreeReading, TreesReadTheirNeighboursSegmentsInPlace) {
  const size_t seg_bytes = 64 * 1024;
  const size_t seg = seg_bytes / sizeof(float);
  const size_t big = coll::kReadingTreeBytes / sizeof(float) * 3 + 5;  // 384 KiB and 20 bytes
  struct Layout {
    int n;
    size_t length;
    int per_host;
    bool reads;
  };
  const size_t two_ranks_tree = (size_t{512} << 10) / sizeof(float);
  const size_t two_ranks_dbtree = (size_t{4} << 20) / sizeof(float);
  for (const AllreduceAlgorithm a :
       {AllreduceAlgorithm::kBinaryTree, AllreduceAlgorithm::kDoubleBinaryTree}) {
    const bool tree = a == AllreduceAlgorithm::kBinaryTree;
    for (const Layout& l :
         {Layout{2, big, 0, false}, Layout{2, tree ? two_ranks_tree : two_ranks_dbtree, 0, true},
          Layout{2, tree ? two_ranks_tree - 1 : two_ranks_dbtree - 1, 0, false},
          Layout{3, big, 0, true}, Layout{4, big, 0, true}, Layout{5, big, 0, true},
          Layout{7, big, 0, true}, Layout{8, big, 0, true},
          Layout{4, coll::kReadingTreeBytes / sizeof(float), 0, true},
          Layout{4, coll::kReadingTreeBytes / sizeof(float) - 1, 0, false},
          Layout{4, big, 2, false}}) {
      for (const bool shared : {false, true}) {
        const ReduceOp op = l.n % 2 == 0 ? ReduceOp::kSum : ReduceOp::kAverage;
        SCOPED_TRACE(fmt::format("{} n {} length {} per host {} shared {}",
                                 AllreduceAlgorithmName(a), l.n, l.length, l.per_host, shared));
        InProcOptions world;
        world.ranks_per_host = l.per_host;
        AllreduceOptions options;
        options.algorithm = a;
        options.op = op;
        options.check_lengths = false;
        options.segment_bytes = seg_bytes;
        const AllreduceRun run =
            RunAllreduce(l.n, l.length, options, Over(protocol(), world), shared);
        const auto& results = run.outputs;
        ExpectAllOk(run.statuses);
        const std::vector<double> expected = Reference(l.n, l.length, op);
        for (int r = 0; r < l.n; ++r) {
          EXPECT_EQ(FirstMismatch(results[r], expected, Tolerance(l.n, op)), -1) << "rank " << r;
          EXPECT_TRUE(BitIdentical(results[r], results[0])) << "rank " << r;
          if (!l.reads) {
            EXPECT_GT(run.bytes[r], l.length * sizeof(float) / 4) << "rank " << r;
            continue;
          }
          TreeMessages want;
          if (tree) {
            want = Expected(HeapTree(l.n, r, 0), l.length, seg);
          } else {
            const auto trees = DoubleTree(l.n, r);
            const size_t half = (l.length + 1) / 2;
            const TreeMessages first = Expected(trees[0], half, seg);
            const TreeMessages second = Expected(trees[1], l.length - half, seg);
            want = {first.bytes + second.bytes, first.messages + second.messages};
          }
          EXPECT_EQ(run.bytes[r], want.bytes) << "rank " << r;
          EXPECT_EQ(run.messages[r], want.messages) << "rank " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace frugal::testing
