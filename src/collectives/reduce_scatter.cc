// Ring reduce-scatter (the first half of the ring all-reduce; Patarasuk and Yuan 2009).
//
// The n ranks form a ring: rank r sends to right = r + 1 and receives from left = r - 1 (mod n).
// `blocks` cuts the buffer into n blocks; each block is cut into the same number C of chunks of at
// most `seg` elements (BlockPartition of the block into C parts). There are n - 1 steps. At step
// s rank r sends block send_block(s) = r - 1 - s and receives block recv_block(s) = r - 2 - s
// (mod n) from left, adding each received chunk into its own copy of that block. Because
// recv_block(s) == send_block(s + 1), a chunk that has just been reduced is the chunk sent next:
// the steps form one stream of items i = s * C + c, and the send of item i + C is posted as soon
// as item i has been reduced, so chunk c of step s+1 travels while chunk c+1 of step s is still
// being received (pipelining). Receives go into kWindow scratch slots posted ahead, in memory
// shared with the transport (no staging copy); all sends are non-blocking. A chunk reduced before
// the last step is only sent on, so its sum is written straight into a buffer shared with the
// transport (AddTo) and sent from there, not into `data`: the blocks other than blocks[r] keep
// this rank's own values. Only the sends of step 0 (this rank's own values of block r - 1) go
// from `data`, copied by the transport unless `data` is shared with it (DataIo). After the last
// step (s = n - 2) rank r has reduced block r - n = r for the last time, into `data`: blocks[r]
// holds the sum over all ranks. Each block is summed along one fixed chain of ranks, so the result
// does not depend on timing. Ranks exchange (n-1)/n of the buffer.
#include <fmt/format.h>

#include "collectives/internal.h"

namespace frugal {
namespace coll {

Status RingReduceScatter(Transport& t, std::span<float> data, std::span<const Block> blocks,
                         int tag, size_t seg, Duration timeout, const DataIo& io) {
  const int n = t.size();
  const int r = t.rank();
  FRUGAL_INTERNAL_ASSERT(static_cast<int>(blocks.size()) == n);
  if (n == 1) return Status::Ok();
  size_t chunks_per_block = 0;
  size_t largest = 0;
  for (const Block& b : blocks) {
    chunks_per_block = std::max(chunks_per_block, ChunkCount(b.count, seg));
    largest = std::max(largest, b.count);
  }
  if (chunks_per_block == 0) return Status::Ok();
  const size_t C = chunks_per_block;
  const size_t items = static_cast<size_t>(n - 1) * C;
  const int left = Mod(r - 1, n);
  const int right = Mod(r + 1, n);
  auto chunk = [&](int block, size_t c) {
    const Block& b = blocks[static_cast<size_t>(block)];
    const Block part = BlockPartition(b.count, static_cast<int>(C), static_cast<int>(c));
    return Block{b.offset + part.offset, part.count};
  };
  auto send_block = [&](size_t s) { return Mod(r - 1 - static_cast<int64_t>(s), n); };
  auto recv_block = [&](size_t s) { return Mod(r - 2 - static_cast<int64_t>(s), n); };

  const size_t window = std::min(kWindow, items);
  const size_t slot_elems = 1 + (largest - 1) / C;  // the largest chunk
  Scratch scratch;
  float* slots = scratch.Get(t, window * slot_elems);
  std::vector<std::unique_ptr<Work>> recvs(items);
  std::vector<std::unique_ptr<Work>> sends(items);
  auto post_recv = [&](size_t i) {
    const Block k = chunk(recv_block(i / C), i % C);
    if (k.count == 0) return;
    float* slot = slots + (i % window) * slot_elems;
    recvs[i] = scratch.Recv(t, left, tag, slot, k.count);
  };
  for (size_t i = 0; i < window; ++i) post_recv(i);
  for (size_t i = 0; i < C; ++i) {
    const Block k = chunk(send_block(0), i);
    if (k.count > 0) sends[i] = io.Send(t, right, tag, FloatBytes(data.subspan(k.offset, k.count)));
  }
  size_t sent = 0;  // sends before this one have completed and been released
  for (size_t i = 0; i < items; ++i) {
    const Block k = chunk(recv_block(i / C), i % C);
    if (k.count > 0) {
      FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[i], k.count * sizeof(float), timeout));
      recvs[i].reset();
      const float* slot = slots + (i % window) * slot_elems;
      if (i + C < items) {
        SharedFloats sum = NewSharedFloats(t, k.count);
        AddTo(sum.data(), data.data() + k.offset, slot, k.count);
        sends[i + C] = SendShared(t, right, tag, std::move(sum));
      } else {
        AddInto(data.data() + k.offset, slot, k.count);
      }
    }
    if (i + window < items) post_recv(i + window);
    FRUGAL_RETURN_IF_ERROR(ReleaseCompleted(sends, sent, i + C + 1, timeout));
  }
  return WaitAll(sends, timeout);
}

}  // namespace coll

Status ReduceScatter(Transport& t, std::span<float> data, ReduceOp op,
                     const CollectiveOptions& options) {
  if (options.check_lengths) {
    FRUGAL_RETURN_IF_ERROR(CheckSameLength(t, data.size(), "reduce-scatter", options.timeout));
  }
  const int n = t.size();
  if (n == 1 || data.empty()) return Status::Ok();
  const std::vector<Block> blocks = coll::BlockPartitionAll(data.size(), n);
  Status status =
      coll::RingReduceScatter(t, data, blocks, coll::kTagReduceScatter,
                              coll::SegmentElems(coll::kDefaultSegmentBytes), options.timeout);
  if (!status.ok()) return status.Annotate("reduce-scatter");
  if (op == ReduceOp::kAverage) {
    const Block& own = blocks[static_cast<size_t>(t.rank())];
    coll::ScaleForAverage(data.subspan(own.offset, own.count), n);
  }
  return Status::Ok();
}

}  // namespace frugal
