// Building blocks of the collectives: waits that check sizes and the two chunked pairwise
// exchanges that recursive doubling and Rabenseifner are made of.
//
// Exchange(peer, send, recv) cuts both buffers into chunks of seg_bytes, posts every receive
// straight into `recv` first, then every send, and waits for all of them. ExchangeReduce(peer,
// send, inout) keeps kWindow receives posted ahead into scratch slots (memory shared with the
// transport, so a chunk lands there without a staging copy); for each chunk i in order it waits
// for the chunk, adds the slot into inout (AddInto: inout + received, element-wise) and
// reposts the slot for chunk i + kWindow, so that receiving chunk i+1.. overlaps the reduction of
// chunk i while scratch stays at kWindow chunks whatever the buffer size. When `send` is `inout`
// itself (recursive doubling sends the whole buffer and reduces into it) chunk i is modified only
// after the send of chunk i has completed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "collectives/internal.h"

namespace frugal::coll {

size_t SegmentElems(size_t segment_bytes) {
  if (segment_bytes == 0) return SIZE_MAX;
  return std::max<size_t>(1, segment_bytes / sizeof(float));
}

uint64_t RingModelBytes(size_t count, int size, int rank) {
  if (size <= 1) return 0;
  const size_t skip_rs = BlockPartition(count, size, (rank + 1) % size).count;
  const size_t skip_ag = BlockPartition(count, size, (rank + 2) % size).count;
  return (2 * count - skip_rs - skip_ag) * sizeof(float);
}

Status WaitRecv(Work& work, size_t expected_bytes, Duration timeout) {
  FRUGAL_RETURN_IF_ERROR(work.Wait(timeout));
  if (work.bytes() != expected_bytes) {
    return MalformedError(fmt::format("rank {} sent {} bytes where {} were expected", work.peer(),
                                      work.bytes(), expected_bytes));
  }
  return Status::Ok();
}

Status ReleaseCompleted(std::vector<std::unique_ptr<Work>>& works, size_t& next, size_t end,
                        Duration timeout) {
  for (; next < std::min(end, works.size()); ++next) {
    std::unique_ptr<Work>& w = works[next];
    if (!w) continue;
    if (!w->IsCompleted()) break;
    FRUGAL_RETURN_IF_ERROR(w->Wait(timeout));
    w.reset();
  }
  return Status::Ok();
}

Status WaitAll(std::vector<std::unique_ptr<Work>>& works, Duration timeout) {
  for (auto& w : works) {
    if (w) {
      FRUGAL_RETURN_IF_ERROR(w->Wait(timeout));
      w.reset();
    }
  }
  return Status::Ok();
}

std::span<const std::byte> FloatBytes(std::span<const float> s) { return std::as_bytes(s); }
std::span<std::byte> FloatBytes(std::span<float> s) { return std::as_writable_bytes(s); }

Status Exchange(Transport& t, int peer, int tag, std::span<const std::byte> send,
                std::span<std::byte> recv, size_t seg_bytes, Duration timeout, const DataIo& io) {
  const size_t seg = std::max<size_t>(1, seg_bytes);
  const size_t recv_chunks = ChunkCount(recv.size(), seg);
  const size_t send_chunks = ChunkCount(send.size(), seg);
  std::vector<std::unique_ptr<Work>> recvs(recv_chunks);
  std::vector<std::unique_ptr<Work>> sends(send_chunks);
  for (size_t i = 0; i < recv_chunks; ++i) {
    const Block c = FixedChunk(recv.size(), seg, i);
    recvs[i] = io.Recv(t, peer, tag, recv.subspan(c.offset, c.count));
  }
  for (size_t i = 0; i < send_chunks; ++i) {
    const Block c = FixedChunk(send.size(), seg, i);
    sends[i] = io.Send(t, peer, tag, send.subspan(c.offset, c.count));
  }
  for (size_t i = 0; i < recv_chunks; ++i) {
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[i], FixedChunk(recv.size(), seg, i).count, timeout));
    recvs[i].reset();
  }
  return WaitAll(sends, timeout);
}

Status ExchangeReduce(Transport& t, int peer, int tag, std::span<const float> send,
                      std::span<float> inout, size_t seg, Duration timeout, Scratch& scratch,
                      const DataIo& io) {
  // An empty `inout` (a block a piece of a tensor has no share of) overlaps nothing.
  const bool aliased = !send.empty() && !inout.empty() && send.data() == inout.data();
  FRUGAL_INTERNAL_ASSERT(!aliased || send.size() == inout.size());
  const size_t recv_chunks = ChunkCount(inout.size(), seg);
  const size_t send_chunks = ChunkCount(send.size(), seg);
  const size_t window = std::min(kWindow, recv_chunks);
  const size_t slot_elems = std::min(seg, inout.size());
  float* slots = scratch.Get(t, window * slot_elems);
  std::vector<std::unique_ptr<Work>> recvs(recv_chunks);
  std::vector<std::unique_ptr<Work>> sends(send_chunks);
  auto post_recv = [&](size_t i) {
    const Block c = FixedChunk(inout.size(), seg, i);
    float* slot = slots + (i % window) * slot_elems;
    recvs[i] = scratch.Recv(t, peer, tag, slot, c.count);
  };
  for (size_t i = 0; i < window; ++i) post_recv(i);
  for (size_t i = 0; i < send_chunks; ++i) {
    const Block c = FixedChunk(send.size(), seg, i);
    sends[i] = io.Send(t, peer, tag, FloatBytes(send.subspan(c.offset, c.count)));
  }
  for (size_t i = 0; i < recv_chunks; ++i) {
    const Block c = FixedChunk(inout.size(), seg, i);
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[i], c.count * sizeof(float), timeout));
    recvs[i].reset();
    if (aliased) {
      FRUGAL_RETURN_IF_ERROR(sends[i]->Wait(timeout));
      sends[i].reset();
    }
    AddInto(inout.data() + c.offset, slots + (i % window) * slot_elems, c.count);
    if (i + window < recv_chunks) post_recv(i + window);
  }
  return WaitAll(sends, timeout);
}

std::vector<Block> BlockPartitionAll(size_t count, int parts) {
  std::vector<Block> blocks(static_cast<size_t>(parts));
  for (int i = 0; i < parts; ++i) blocks[static_cast<size_t>(i)] = BlockPartition(count, parts, i);
  return blocks;
}

std::vector<Block> BlocksOf(size_t count, int parts, const AllreduceOptions& options) {
  if (options.block_counts.empty()) return BlockPartitionAll(count, parts);
  FRUGAL_CHECK_EQ(options.block_counts.size(), static_cast<size_t>(parts), "block counts");
  std::vector<Block> blocks(static_cast<size_t>(parts));
  size_t at = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    blocks[i] = Block{at, options.block_counts[i]};
    at += options.block_counts[i];
  }
  FRUGAL_CHECK_EQ(at, count, "sum of the block counts");
  return blocks;
}

std::vector<Block> ToBytes(std::span<const Block> blocks, size_t element_size) {
  std::vector<Block> out;
  out.reserve(blocks.size());
  for (const Block& b : blocks) out.push_back({b.offset * element_size, b.count * element_size});
  return out;
}

std::string DescribeRanks(std::span<const int> ranks) {
  return fmt::format("ranks {}", fmt::join(ranks, ", "));
}

AllreduceOptions InnerOptions(const AllreduceOptions& options) {
  AllreduceOptions inner = options;
  inner.algorithm = options.inner_algorithm;
  inner.inner_algorithm = AllreduceAlgorithm::kRing;
  inner.op = ReduceOp::kSum;
  inner.check_lengths = false;
  inner.block_counts.clear();
  return inner;
}

}  // namespace frugal::coll
