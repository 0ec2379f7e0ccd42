// Binary-tree all-reduce: reduce to the root along a binary tree, broadcast back along the same
// tree, both pipelined in segments of `segment_bytes`.
//
// The tree is HeapTree(n, rank, 0): rank 0 is the root, the parent of r is (r - 1) / 2, its
// children 2r + 1 and 2r + 2, so it has floor(log2 n) levels below the root. A TreePipeline runs
// the segments through it: each rank adds its children's segment s into its own (own + child 0
// + child 1) and sends it up; the root scales the finished segment (by 1/n for kAverage) and sends
// it down at once, so the broadcast of segment s overlaps the reduction of segment s + 1, and the
// whole all-reduce takes about (2 levels + segments) segment times instead of
// 2 levels x whole-buffer times. The root computes every sum and the others copy it, so all
// ranks end with bit-identical results. On one machine, from kReadingTreeBytes, the ranks read
// each other's segments in place instead (ReadingTreePipeline).
#include "collectives/tree.h"

namespace frugal::coll {

Status BinaryTreeAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const int n = t.size();
  const float scale = options.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(n) : 1.0f;
  const TreeNode node = HeapTree(n, t.rank(), 0);
  const size_t seg = SegmentElems(SegmentBytes(options));
  if (TreeReads(t, data.size() * sizeof(float), /*two_ranks_bytes=*/size_t{512} << 10)) {
    ReadingTreePipeline pipeline(t, node, data, seg, kTagTree, options.timeout, scale,
                                 options.data_owner != nullptr);
    return RunPipeline(pipeline);
  }
  TreePipeline pipeline(t, node, data, seg, kTagTree, options.timeout, scale, /*broadcast=*/true,
                        DataIo{options.data_owner});
  return RunPipeline(pipeline);
}

}  // namespace frugal::coll
