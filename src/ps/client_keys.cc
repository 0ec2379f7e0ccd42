#include "ps/client_keys.h"

#include <algorithm>

namespace frugal::ps_internal {

void ClientKeys::Start(size_t keys, const std::optional<LagOptions>& lag) {
  keys_.assign(keys, ClientKey{});
  if (!lag) return;
  for (ClientKey& k : keys_) k.lag.emplace(*lag);
}

uint64_t ClientKeys::LeastProgress() const {
  if (keys_.empty()) return 0;
  return std::min_element(
             keys_.begin(), keys_.end(),
             [](const ClientKey& a, const ClientKey& b) { return a.progress < b.progress; })
      ->progress;
}

void ClientKeys::VisitState(const ShardPlan& plan, StateVisitor& v) {
  for (const KeyPart& part : plan.parts) {
    ClientKey& k = keys_[part.key];
    StateVisitor::Scope key(v, part.name);
    v.U64("clock", k.clock);
    v.U64("version", k.version);
    v.U64("progress", k.progress);
    if (k.lag) {
      StateVisitor::Scope lag(v, "lag");
      k.lag->VisitState(v);
    }
  }
}

}  // namespace frugal::ps_internal
