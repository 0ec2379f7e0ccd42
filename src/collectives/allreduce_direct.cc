// The direct all-reduce of ranks on one machine: every rank reads its peers' buffers where they
// lie (Transport::MapPeerRegion) instead of receiving them in messages, as NCCL's and MPI
// libraries' shared-memory collectives do. Messages carry only where the buffers are and when a
// phase is done.
//
// Rank r owns block r of BlockPartition(count, n) (or of AllreduceOptions::block_counts):
//  1. Every rank sends every other rank the region of its buffer (RegionOf: the buffer itself when
//     the caller gave memory from NewShared, AllreduceOptions::data_owner; otherwise a copy of it
//     in such memory) and maps the regions it receives. The message also says "my buffer is
//     ready": nobody reads a peer before that.
//  2. Rank r adds block r of every peer's buffer, in rank order, into its own block r, piece by
//     piece (segment_bytes, default 256 KiB, so that a piece stays in the cache across the n - 1
//     additions), and scales it for kAverage. It writes only its own block r; the peers read only
//     their own blocks of it, so nobody reads what is being written.
//  3. Rank r tells every peer that block r is done, and copies block j from peer j as soon as j
//     says block j is done (starting with the next rank, so that the ranks do not all read one
//     peer at once). It writes block j of its own buffer, which no peer reads any more.
//  4. Rank r tells every peer it has read what it needed, and returns once every peer has said so:
//     then no peer reads its buffer after the call (the caller may write it again).
// Memory traffic per rank for b bytes: (n - 1)/n b read from peers twice and b/n of its own block
// read and written in step 2, against three passes of (n - 1)/n b per copy through a message
// transport (copy in, copy across, copy out). Messages: 3 (n - 1) per rank, of 40 bytes in step 1
// and none in steps 3 and 4 (kDirectRegionBytes).
//
// Determinism: block j is summed only on rank j, in one fixed order (its own values, then the
// peers' in rank order), and copied by the others: every rank ends with the same bits.
// Failure: waits are bounded by the timeout and name the peer. A rank that fails after step 1 may
// leave peers reading its buffer after it returned (they only read it; their call then fails or
// times out in a later step, or, if the rank failed in step 4, completed already).
// Ranks that cannot map each other's memory (other machines, emulated hosts, see
// Transport::SharesMemoryWithPeers) get kFailedPrecondition, every rank alike.
#include <fmt/format.h>

#include <cstring>

#include "collectives/internal.h"

namespace frugal::coll {
namespace {

std::span<const std::byte> NoBytes() { return {}; }

}  // namespace

Status DirectAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const int n = t.size();
  const int r = t.rank();
  if (!t.SharesMemoryWithPeers()) {
    return FailedPreconditionError(
        fmt::format("the direct all-reduce {}; use another algorithm", kDirectNeedsOneMachine));
  }
  const Duration timeout = options.timeout;
  const int tag = kTagDirect;
  const size_t bytes = data.size() * sizeof(float);

  // Where this rank's values lie for its peers: the caller's buffer or a copy of it.
  const ReadableBuffer placed = PlaceForPeers(t, data, options.data_owner != nullptr);
  const std::span<float> work = placed.values;

  // 1. Regions.
  const RegionMessage mine = RegionMessageOf(placed.region);
  std::vector<RegionMessage> theirs(static_cast<size_t>(n));
  std::vector<std::unique_ptr<Work>> recvs(static_cast<size_t>(n));
  std::vector<std::unique_ptr<Work>> sends;
  for (int j = 0; j < n; ++j) {
    if (j != r) recvs[j] = t.IRecv(j, tag, std::as_writable_bytes(std::span(&theirs[j], 1)));
  }
  for (int j = 0; j < n; ++j) {
    if (j != r) sends.push_back(t.ISend(j, tag, std::as_bytes(std::span(&mine, 1))));
  }
  std::vector<const float*> peer(static_cast<size_t>(n), nullptr);  // this rank's stays null
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[j], sizeof(RegionMessage), timeout));
  }
  FRUGAL_RETURN_IF_ERROR(WaitAll(sends, timeout));
  if (!placed.region) return NoMemoryForPeers(r, bytes);
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    FRUGAL_ASSIGN_OR_RETURN(peer[j], MapRegionMessage(t, j, theirs[j], bytes));
  }

  // 2. Block r, piece by piece.
  const std::vector<Block> blocks = BlocksOf(data.size(), n, options);
  const Block own = blocks[static_cast<size_t>(r)];
  size_t seg = SegmentElems(SegmentBytes(options));
  if (seg == 0) seg = own.count;
  for (size_t begin = 0; begin < own.count; begin += seg) {
    const size_t offset = own.offset + begin;
    const size_t count = std::min(seg, own.count - begin);
    for (int j = 0; j < n; ++j) {
      if (j != r) AddInto(work.data() + offset, peer[j] + offset, count);
    }
  }
  if (options.op == ReduceOp::kAverage) ScaleForAverage(work.subspan(own.offset, own.count), n);

  // 3. "Block done" both ways; copy the peers' blocks as they are done.
  auto notify_all = [&] {
    for (int j = 0; j < n; ++j) {
      if (j != r) sends.push_back(t.ISend(j, tag, NoBytes()));
    }
  };
  auto post_all = [&] {
    for (int j = 0; j < n; ++j) {
      if (j != r) recvs[j] = t.IRecv(j, tag, {});
    }
  };
  sends.clear();
  post_all();
  notify_all();
  for (int k = 1; k < n; ++k) {
    const int j = (r + k) % n;
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[j], 0, timeout));
    const Block b = blocks[static_cast<size_t>(j)];
    std::memcpy(work.data() + b.offset, peer[j] + b.offset, b.count * sizeof(float));
  }
  FRUGAL_RETURN_IF_ERROR(WaitAll(sends, timeout));

  // 4. Nobody reads this rank's buffer any more once every peer has said so.
  sends.clear();
  post_all();
  notify_all();
  for (int k = 1; k < n; ++k) {
    FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[(r + k) % n], 0, timeout));
  }
  FRUGAL_RETURN_IF_ERROR(WaitAll(sends, timeout));
  if (work.data() != data.data()) std::memcpy(data.data(), work.data(), bytes);
  return Status::Ok();
}

}  // namespace frugal::coll
