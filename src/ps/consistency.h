// The consistency models of the parameter server as pure rules (internal): what a server does
// with a push, when it applies what it accumulated, and when a pull may be answered. server.cc
// keeps the state and follows these rules; tests check them alone.
//
// Terms, per key: `version` counts the updates the server applied; a worker's `clock` counts the
// pushes the server received from it. A push carries the version of the parameters its gradient
// was computed on; a pull is made together with a push and waits for what PullNeed says.
#pragma once

#include <cstdint>
#include <string>

#include "frugal/parameter_server.h"

namespace frugal::ps_internal {

enum class PushAction {
  kAccumulate,  // kept until quorum() pushes of the current version are in, then applied at once
};

// What a pull waits for.
struct PullNeed {
  uint64_t min_version = 0;  // the key's version must reach this
};

class ConsistencyRules {
 public:
  ConsistencyRules(PsConsistency kind, int workers) : kind_(kind), workers_(workers) {}

  PsConsistency kind() const { return kind_; }
  // What to do with a push computed on `pushed_version` at a key now at `version`; an empty
  // `error` unless the push breaks the model (a BSP push of another version).
  PushAction OnPush(uint64_t version, uint64_t pushed_version, std::string& error) const;
  // Pushes of one version applied together.
  int quorum() const { return workers_; }
  // The divisor of the sum of the pushes applied together.
  int divisor() const { return workers_; }
  // The need of a pull made with a push computed on `pushed_version`.
  PullNeed NeedOf(uint64_t pushed_version) const;
  bool Ready(const PullNeed& need, uint64_t version) const { return version >= need.min_version; }

 private:
  PsConsistency kind_;
  int workers_;
};

}  // namespace frugal::ps_internal
