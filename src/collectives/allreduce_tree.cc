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
// ranks end with bit-identical results.
#include "collectives/tree.h"

namespace frugal::coll {

Status BinaryTreeAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const int n = t.size();
  const float scale = options.op == ReduceOp::kAverage ? 1.0f / static_cast<float>(n) : 1.0f;
  TreePipeline pipeline(t, HeapTree(n, t.rank(), 0), data, SegmentElems(SegmentBytes(options)),
                        kTagTree, options.timeout, scale, /*broadcast=*/true,
                        DataIo{options.data_owner});
  FRUGAL_RETURN_IF_ERROR(pipeline.Start());
  for (size_t s = 0; s < pipeline.segments(); ++s) FRUGAL_RETURN_IF_ERROR(pipeline.Step(s));
  return pipeline.Finish();
}

}  // namespace frugal::coll
