// Broadcast: a binomial tree, pipelined in segments.
//
// Ranks are renumbered relative to the root, vr = (rank - root) mod n. A non-root vr receives
// from its parent vr - mask, where mask is the lowest set bit of vr, and sends to the children
// vr + m for every power of two m < mask (m < n for the root) with vr + m < n, largest subtree
// first (MPICH's binomial broadcast). The buffer is cut into segments of seg_bytes; every receive
// is posted up front straight into `data`, and a segment is forwarded to the children as soon as
// it has arrived, so segment s + 1 comes down from the parent while segment s goes on to the
// children. The tree has ceil(log2 n) levels; every rank receives the buffer once.
#include <fmt/format.h>

#include "collectives/internal.h"

namespace frugal {
namespace coll {

Status BinomialBroadcast(Transport& t, std::span<std::byte> data, int root, int tag,
                         size_t seg_bytes, Duration timeout) {
  const int n = t.size();
  if (n == 1 || data.empty()) return Status::Ok();
  const int vr = Mod(t.rank() - root, n);
  int parent = -1;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      parent = Mod(vr - mask + root, n);
      break;
    }
    mask <<= 1;
  }
  std::vector<int> children;
  for (int m = mask >> 1; m > 0; m >>= 1) {
    if (vr + m < n) children.push_back(Mod(vr + m + root, n));
  }
  const size_t seg = std::max<size_t>(1, seg_bytes);
  const size_t segments = ChunkCount(data.size(), seg);
  std::vector<std::unique_ptr<Work>> recvs(segments);
  std::vector<std::unique_ptr<Work>> sends;
  sends.reserve(segments * children.size());
  if (parent >= 0) {
    for (size_t s = 0; s < segments; ++s) {
      const Block c = FixedChunk(data.size(), seg, s);
      recvs[s] = t.IRecv(parent, tag, data.subspan(c.offset, c.count));
    }
  }
  for (size_t s = 0; s < segments; ++s) {
    const Block c = FixedChunk(data.size(), seg, s);
    if (parent >= 0) {
      FRUGAL_RETURN_IF_ERROR(WaitRecv(*recvs[s], c.count, timeout));
      recvs[s].reset();
    }
    for (int child : children)
      sends.push_back(t.ISend(child, tag, data.subspan(c.offset, c.count)));
  }
  return WaitAll(sends, timeout);
}

}  // namespace coll

Status Broadcast(Transport& t, std::span<std::byte> data, int root,
                 const CollectiveOptions& options) {
  FRUGAL_CHECK(root >= 0 && root < t.size(), "broadcast root ", root, " of ", t.size());
  if (options.check_lengths) {
    FRUGAL_RETURN_IF_ERROR(CheckSameLength(t, data.size(), "broadcast", options.timeout));
  }
  return coll::BinomialBroadcast(t, data, root, coll::kTagBroadcast, coll::kDefaultSegmentBytes,
                                 options.timeout)
      .Annotate("broadcast");
}

Status Broadcast(Transport& t, std::span<float> data, int root, const CollectiveOptions& options) {
  FRUGAL_CHECK(root >= 0 && root < t.size(), "broadcast root ", root, " of ", t.size());
  if (options.check_lengths) {
    FRUGAL_RETURN_IF_ERROR(CheckSameLength(t, data.size(), "broadcast", options.timeout));
  }
  return coll::BinomialBroadcast(t, coll::FloatBytes(data), root, coll::kTagBroadcast,
                                 coll::kDefaultSegmentBytes, options.timeout)
      .Annotate("broadcast");
}

}  // namespace frugal
