// Buffers that ranks on one machine read in each other's memory (the direct all-reduce, recursive
// doubling's reading rounds): placing a buffer where peers can map it, the message that says where
// it lies, and mapping what a peer said.
#include <fmt/format.h>

#include <cstring>

#include "collectives/internal.h"

namespace frugal::coll {

static_assert(sizeof(RegionMessage) == kDirectRegionBytes);

ReadableBuffer PlaceForPeers(Transport& t, std::span<float> data, bool data_owner) {
  ReadableBuffer out;
  out.values = data;
  if (data_owner) out.region = t.RegionOf(FloatBytes(data));
  if (!out.region) {
    const size_t bytes = data.size() * sizeof(float);
    out.copy = t.NewShared(bytes);
    if (bytes > 0) std::memcpy(out.copy.bytes.data(), data.data(), bytes);
    out.values = std::span<float>(reinterpret_cast<float*>(out.copy.bytes.data()), data.size());
    out.region = t.RegionOf(out.copy.bytes);
  }
  return out;
}

RegionMessage RegionMessageOf(const std::optional<PeerRegion>& region) {
  return RegionMessage{region.has_value(), region.value_or(PeerRegion{})};
}

Status NoMemoryForPeers(int rank, size_t bytes) {
  return FailedPreconditionError(
      fmt::format("rank {} has no memory its peers can map for {} bytes", rank, bytes));
}

StatusOr<const float*> MapRegionMessage(Transport& t, int peer, const RegionMessage& m,
                                        size_t bytes) {
  if (m.ok == 0) return NoMemoryForPeers(peer, bytes);
  if (m.region.bytes != bytes) {
    return MalformedError(
        fmt::format("rank {} offers {} bytes where this rank has {}", peer, m.region.bytes, bytes));
  }
  FRUGAL_ASSIGN_OR_RETURN(const std::byte* p, t.MapPeerRegion(peer, m.region));
  return reinterpret_cast<const float*>(p);
}

}  // namespace frugal::coll
