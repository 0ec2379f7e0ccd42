// Ring allgather, and Allgather / Allgatherv built on it.
//
// RingAllgather: rank r sends to right = r + 1 and receives from left = r - 1 (mod n). Every
// block is cut into the same number C of chunks of at most `seg_bytes`. At step s (0..n-2) rank
// r sends block r - s and receives block r - 1 - s. The block received at step s is the one sent
// at step s + 1, so, as in the reduce-scatter, the steps form one stream of items i = s * C + c:
// every receive is posted up front, the sends of step 0 (this rank's own block) start at once,
// and the send of item i + C starts as soon as item i has arrived. A chunk that is sent on is
// received into memory shared with the transport (Transport::NewShared), copied into its place in
// `data` and sent on from that same memory, so the transport copies neither the receive nor the
// send; a chunk of the last step is received into `data` itself. When `data` is itself shared
// with the transport (DataIo), every chunk is received into place and sent on from there. Ranks
// exchange (n-1)/n of the buffer.
//
// Allgather copies `in` into block rank() of `out` and runs the ring over n equal blocks.
// Allgatherv first runs the ring over the 8-byte sizes (every rank learns every contribution's
// size), then sizes `out` and runs the ring over the variable blocks.
#include <fmt/format.h>

#include <cstring>

#include "collectives/internal.h"

namespace frugal {
namespace coll {

Status RingAllgather(Transport& t, std::span<std::byte> data, std::span<const Block> blocks,
                     int tag, size_t seg_bytes, Duration timeout, const DataIo& io) {
  const int n = t.size();
  const int r = t.rank();
  FRUGAL_INTERNAL_ASSERT(static_cast<int>(blocks.size()) == n);
  if (n == 1) return Status::Ok();
  size_t C = 0;
  for (const Block& b : blocks)
    C = std::max(C, ChunkCount(b.count, std::max<size_t>(1, seg_bytes)));
  if (C == 0) return Status::Ok();
  const size_t items = static_cast<size_t>(n - 1) * C;
  const int left = Mod(r - 1, n);
  const int right = Mod(r + 1, n);
  auto chunk = [&](int block, size_t c) {
    const Block& b = blocks[static_cast<size_t>(block)];
    const Block part = BlockPartition(b.count, static_cast<int>(C), static_cast<int>(c));
    return Block{b.offset + part.offset, part.count};
  };
  auto send_block = [&](size_t s) { return Mod(r - static_cast<int64_t>(s), n); };
  auto recv_block = [&](size_t s) { return Mod(r - 1 - static_cast<int64_t>(s), n); };
  std::vector<std::unique_ptr<Work>> recvs(items);
  std::vector<SharedBytes> relayed(items);  // chunks received to be sent on
  std::vector<std::unique_ptr<Work>> sends(items);
  for (size_t i = 0; i < items; ++i) {
    const Block k = chunk(recv_block(i / C), i % C);
    if (k.count == 0) continue;
    if (i + C < items && !io.shared()) {
      relayed[i] = t.NewShared(k.count);
      recvs[i] = t.IRecvShared(left, tag, relayed[i].owner, relayed[i].bytes);
    } else {
      recvs[i] = io.Recv(t, left, tag, data.subspan(k.offset, k.count));
    }
  }
  for (size_t i = 0; i < C; ++i) {
    const Block k = chunk(send_block(0), i);
    if (k.count > 0) sends[i] = io.Send(t, right, tag, data.subspan(k.offset, k.count));
  }
  size_t sent = 0;  // sends before this one have completed and been released
  for (size_t i = 0; i < items; ++i) {
    if (recvs[i]) {
      const Block k = chunk(recv_block(i / C), i % C);
      FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[i], k.count, timeout));
      recvs[i].reset();
      if (i + C < items && io.shared()) {
        sends[i + C] = io.Send(t, right, tag, data.subspan(k.offset, k.count));
      } else if (i + C < items) {
        SharedBytes chunk_bytes = std::move(relayed[i]);
        std::memcpy(data.data() + k.offset, chunk_bytes.bytes.data(), k.count);
        sends[i + C] = t.ISendShared(right, tag, std::move(chunk_bytes.owner), chunk_bytes.bytes);
      }
    }
    FRUGAL_RETURN_IF_ERROR(ReleaseCompleted(sends, sent, i + C + 1, timeout));
  }
  return WaitAll(sends, timeout);
}

}  // namespace coll

Status Allgather(Transport& t, std::span<const float> in, std::span<float> out,
                 const CollectiveOptions& options) {
  const int n = t.size();
  FRUGAL_CHECK_EQ(out.size(), in.size() * static_cast<size_t>(n), "allgather output size");
  if (options.check_lengths) {
    FRUGAL_RETURN_IF_ERROR(CheckSameLength(t, in.size(), "allgather", options.timeout));
  }
  const size_t bytes = in.size() * sizeof(float);
  if (!in.empty()) {
    std::memcpy(out.data() + in.size() * static_cast<size_t>(t.rank()), in.data(), bytes);
  }
  std::vector<Block> blocks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    blocks[static_cast<size_t>(i)] = {bytes * static_cast<size_t>(i), bytes};
  return coll::RingAllgather(t, coll::FloatBytes(out), blocks, coll::kTagAllgather,
                             coll::kDefaultSegmentBytes, options.timeout)
      .Annotate("allgather");
}

Status Allgatherv(Transport& t, std::span<const std::byte> in, std::vector<std::byte>& out,
                  std::vector<size_t>& sizes, const CollectiveOptions& options) {
  const int n = t.size();
  const size_t r = static_cast<size_t>(t.rank());
  std::vector<uint64_t> wire_sizes(static_cast<size_t>(n), 0);
  wire_sizes[r] = in.size();
  std::vector<Block> size_blocks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    size_blocks[static_cast<size_t>(i)] = {sizeof(uint64_t) * static_cast<size_t>(i),
                                           sizeof(uint64_t)};
  }
  Status status =
      coll::RingAllgather(t, std::as_writable_bytes(std::span<uint64_t>(wire_sizes)), size_blocks,
                          coll::kTagAllgathervSizes, coll::kDefaultSegmentBytes, options.timeout);
  if (!status.ok()) return status.Annotate("allgatherv: sizes");
  if (wire_sizes[r] != in.size()) return InternalError("allgatherv: own size changed in transit");
  std::vector<Block> blocks(static_cast<size_t>(n));
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t size = wire_sizes[static_cast<size_t>(i)];
    if (size > (uint64_t{1} << 48) || total + size < total) {
      return MalformedError(fmt::format("allgatherv: rank {} announced {} bytes", i, size));
    }
    blocks[static_cast<size_t>(i)] = {total, static_cast<size_t>(size)};
    total += size;
  }
  out.resize(total);
  if (!in.empty()) std::memcpy(out.data() + blocks[r].offset, in.data(), in.size());
  sizes.assign(wire_sizes.begin(), wire_sizes.end());
  return coll::RingAllgather(t, out, blocks, coll::kTagAllgatherv, coll::kDefaultSegmentBytes,
                             options.timeout)
      .Annotate("allgatherv");
}

}  // namespace frugal
