// Cache of the sub-transports that hierarchical and 2D-torus all-reduces split off a transport.
//
// Transport::Split is collective and, over MPI, costs a timed exchange of (color, key) plus two
// MPI_Comm_splits (about 0.1-0.2 ms on 4 ranks), which used to dominate hier and torus for small
// buffers because they split twice on every call. SplitCacheOf(t) returns the SplitCache kept as
// t's "collectives" attachment (Transport::SetAttachment), so it lives exactly as long as t and
// is no process-wide state. An algorithm looks its layout up under a key that every rank computes
// identically from the options it was called with ("hier/2", "hier/hostname", "torus/3"); because
// all ranks call the same collectives in the same order with the same options, the caches of all
// ranks hold the same keys at every call, so either every rank hits (nobody splits) or every rank
// misses (all split together): Split's collective semantics are kept. An entry is inserted only
// after every split of the layout succeeded on this rank; a split that failed leaves the
// transport in the failed state every collective error leaves it in.
#include "collectives/internal.h"

namespace frugal::coll {

SplitCache::Entry* SplitCache::Find(const std::string& key) {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

SplitCache::Entry& SplitCache::Insert(const std::string& key, Entry entry) {
  return entries_.insert_or_assign(key, std::move(entry)).first->second;
}

SplitCache& SplitCacheOf(Transport& t) {
  constexpr std::string_view kKey = "collectives";
  if (Transport::Attachment* found = t.FindAttachment(kKey)) {
    auto* cache = dynamic_cast<SplitCache*>(found);
    FRUGAL_INTERNAL_ASSERT(cache != nullptr, "transport attachment '", kKey,
                           "' is not a SplitCache");
    return *cache;
  }
  return static_cast<SplitCache&>(
      t.SetAttachment(std::string(kKey), std::make_unique<SplitCache>()));
}

}  // namespace frugal::coll
