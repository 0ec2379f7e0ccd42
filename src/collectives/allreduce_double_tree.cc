// Double-binary-tree all-reduce (Sanders, Speck and Traeff 2009; NCCL 2.4).
//
// A single binary tree wastes half of the bandwidth: its leaves (about half of the ranks) only
// ever send one segment up and receive one segment down. DoubleTree(n, rank) builds two trees:
// tree 0 is NCCL's in-order binary tree (interior nodes = even ranks), tree 1 the same tree
// mirrored (rank -> n-1-rank, n even) or shifted by one (n odd), so that the interior nodes of
// tree 0 are leaves of tree 1 and vice versa (for odd n one rank is interior in both). Tree 0
// reduces and broadcasts the first half of the buffer (or the first of the two
// AllreduceOptions::block_counts), tree 1 the second half, each as a TreePipeline (tree.h) on its
// own tag. The two pipelines are stepped alternately, segment by segment (tree 0 segment s, tree
// 1 segment s, ...), so every rank is busy as an interior node of one tree while it serves as a
// leaf of the other, and both halves stream concurrently. Each tree's root computes the sums of
// its half and the others copy them: results are bit-identical on all ranks. On one machine, from
// kReadingTreeBytes, each tree's ranks read each other's segments in place instead
// (ReadingTreePipeline).
#include "collectives/tree.h"

namespace frugal::coll {

Status DoubleBinaryTreeAllreduce(Transport& t, std::span<float> data,
                                 const AllreduceOptions& options) {
  const int n = t.size();
  const float scale = options.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(n) : 1.0f;
  const size_t seg = SegmentElems(SegmentBytes(options));
  const std::array<TreeNode, 2> trees = DoubleTree(n, t.rank());
  const size_t half = BlocksOf(data.size(), 2, options)[0].count;
  if (TreeReads(t, data.size() * sizeof(float), /*two_ranks_bytes=*/size_t{4} << 20)) {
    const bool owner = options.data_owner != nullptr;
    ReadingTreePipeline first(t, trees[0], data.first(half), seg, kTagDoubleTree0, options.timeout,
                              scale, owner);
    ReadingTreePipeline second(t, trees[1], data.subspan(half), seg, kTagDoubleTree1,
                               options.timeout, scale, owner);
    return RunPipelines(first, second);
  }
  TreePipeline first(t, trees[0], data.first(half), seg, kTagDoubleTree0, options.timeout, scale,
                     /*broadcast=*/true, DataIo{options.data_owner});
  TreePipeline second(t, trees[1], data.subspan(half), seg, kTagDoubleTree1, options.timeout, scale,
                      /*broadcast=*/true, DataIo{options.data_owner});
  return RunPipelines(first, second);
}

}  // namespace frugal::coll
