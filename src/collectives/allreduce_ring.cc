// Ring all-reduce: ring reduce-scatter followed by ring allgather (Patarasuk and Yuan 2009; the
// algorithm of Baidu's ring all-reduce and Horovod).
//
// The buffer is cut into n blocks by BlockPartition (or AllreduceOptions::block_counts, a fused
// bucket's layout: allreduce_fused.cc). RingReduceScatter (reduce_scatter.cc) leaves
// on rank r the sum of block r after n - 1 steps; for kAverage rank r then scales its own block
// by 1/n; RingAllgather (allgather.cc) circulates the finished blocks in n - 1 more steps. Both
// phases are cut into chunks of `segment_bytes` and pipelined: a chunk received at one step is
// sent on at the next while the following chunk is still arriving, receives are posted before
// sends and all sends are non-blocking. Each rank sends and receives 2 (n-1)/n of the buffer,
// which is bandwidth-optimal. Every block is reduced along one fixed chain of ranks and then
// copied, so all ranks end with bit-identical results.
#include "collectives/internal.h"

namespace frugal::coll {

Status RingAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const int n = t.size();
  const size_t seg = SegmentElems(SegmentBytes(options));
  const std::vector<Block> blocks = BlocksOf(data.size(), n, options);
  const DataIo io{options.data_owner};
  FRUGAL_RETURN_IF_ERROR(
      RingReduceScatter(t, data, blocks, kTagRingReduceScatter, seg, options.timeout, io));
  if (options.op == ReduceOp::kAverage) {
    const Block& own = blocks[static_cast<size_t>(t.rank())];
    ScaleForAverage(data.subspan(own.offset, own.count), n);
  }
  const std::vector<Block> byte_blocks = ToBytes(blocks, sizeof(float));
  return RingAllgather(t, FloatBytes(data), byte_blocks, kTagRingAllgather, SegmentBytesOf(seg),
                       options.timeout, io);
}

}  // namespace frugal::coll
