// What a parameter-server worker keeps per key (internal): the key's clock (its pushes so far),
// the version of the parameters it last pulled, the servers' progress on it (the key's pushes
// from all workers), LAG's rule under lag, and since when its pull is awaited.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "frugal/state_visitor.h"
#include "frugal/transport.h"
#include "ps/lag_rule.h"
#include "ps/sharding.h"

namespace frugal::ps_internal {

struct ClientKey {
  uint64_t clock = 0;
  uint64_t version = 0;
  uint64_t progress = 0;
  std::optional<LagKeyRule> lag;
  std::optional<Clock::time_point> pull_since;  // set from the push until its answer
};

class ClientKeys {
 public:
  // One entry per key of `plan`; with `lag`, each with its rule.
  void Start(size_t keys, const std::optional<LagOptions>& lag);
  ClientKey& operator[](uint32_t key) { return keys_[key]; }
  const ClientKey& operator[](uint32_t key) const { return keys_[key]; }
  // The least progress over the keys (0 without keys).
  uint64_t LeastProgress() const;
  // The clock, version, progress and lag rule of every key, by the key's name (a checkpoint).
  void VisitState(const ShardPlan& plan, StateVisitor& v);

 private:
  std::vector<ClientKey> keys_;
};

}  // namespace frugal::ps_internal
