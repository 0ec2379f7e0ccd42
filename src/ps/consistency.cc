// The consistency rules (see consistency.h).
//
// bsp: every push must be computed on the key's current version (a worker cannot have seen any
// other, since the server answers its pull only after the update); the server keeps the W pushes
// of the version and applies their average; a pull made with the push of version v waits for
// version v + 1, so each worker's pull is answered exactly once per update.
#include "ps/consistency.h"

#include <fmt/format.h>

namespace frugal::ps_internal {

PushAction ConsistencyRules::OnPush(uint64_t version, uint64_t pushed_version,
                                    std::string& error) const {
  error.clear();
  if (pushed_version != version) {
    error = fmt::format("computed on version {}, but the key is at version {}", pushed_version,
                        version);
  }
  return PushAction::kAccumulate;
}

PullNeed ConsistencyRules::NeedOf(uint64_t pushed_version) const {
  return PullNeed{pushed_version + 1};
}

}  // namespace frugal::ps_internal
