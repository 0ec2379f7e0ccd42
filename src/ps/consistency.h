// The consistency models of the parameter server as pure rules (internal): what a server does
// with a push, when it applies what it accumulated, and when a pull may be answered. key_state.cc
// keeps the state and follows these rules; tests check them alone.
//
// Terms, per key: `version` counts the updates the server applied; a worker's `clock` counts the
// pushes the server received from it (skips and dropped pushes included); `progress` the pushes
// from all workers. A push carries the version of the parameters its gradient was computed on; a
// pull is made together with a push and waits for what PullNeed says. A worker "rests" while it
// evaluates at the end of an epoch (it sent a pause and has not pushed since) and once it is done:
// a resting worker does not push, so nothing waits for it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frugal/parameter_server.h"

namespace frugal::ps_internal {

enum class PushAction {
  kAccumulate,  // kept until Complete() says the version's pushes are in, then applied at once
  kApply,       // applied alone, now (ssp, asp)
  kDrop,        // not applied (backup: late or stale; ssp/asp with drop:T: too stale)
};

// What a pull waits for: the key's version to reach min_version and, under ssp, the clocks of
// the workers that are not resting to reach min_clock.
struct PullNeed {
  uint64_t min_version = 0;
  uint64_t min_clock = 0;
};

class ConsistencyRules {
 public:
  explicit ConsistencyRules(const ParameterServerConfig& config);

  PsConsistency kind() const { return kind_; }
  bool accumulates() const {
    return kind_ == PsConsistency::kBsp || kind_ == PsConsistency::kBackup ||
           kind_ == PsConsistency::kLag;
  }

  // What to do with a push computed on `pushed_version` at a key now at `version`. `error` is set
  // (and the push must fail the job) when the push breaks the model: under bsp and lag a push of
  // another version than the key's; under every model a push of a version the key has not
  // reached.
  PushAction OnPush(uint64_t version, uint64_t pushed_version, std::string& error) const;

  // Whether the pushes of the current version are complete: `have` of them are in, and every
  // worker not resting has pushed (`all_active_in`). bsp and lag: all W; backup: W - B, or at
  // least one when every worker that may still push has (the others rest).
  bool Complete(int have, bool all_active_in) const;
  // The divisor of the sum of the pushes applied together (`have` of them): W, or have (backup).
  int Divisor(int have) const;

  // The learning-rate scale of a push applied alone with `staleness` (the staleness policy):
  // 1, or 1 / max(1, staleness).
  double Scale(uint64_t staleness) const;

  // The need of the pull made with a push computed on `pushed_version`, after which the puller's
  // clock is `clock`.
  PullNeed NeedOf(uint64_t pushed_version, uint64_t clock) const;
  // `min_active_clock`: the smallest clock of the workers not resting (UINT64_MAX when all rest).
  bool Ready(const PullNeed& need, uint64_t version, uint64_t min_active_clock) const;
  // The workers a held pull waits for (world ranks are the caller's business): under ssp those
  // not resting whose clock is below need.min_clock, otherwise those that have not pushed the
  // current version (`have`, by worker).
  std::vector<int> Blocking(const PullNeed& need, std::span<const uint64_t> clocks,
                            std::span<const char> resting, std::span<const char> have) const;

  // The step of the learning-rate schedule for an update made when the key has received
  // `progress` pushes (the one that triggers it included): (progress - 1) / W, the key's version
  // under bsp.
  int64_t ScheduleStep(uint64_t progress) const;

 private:
  PsConsistency kind_;
  int workers_;
  int staleness_;
  int backup_;
  StalenessPolicy policy_;
  uint64_t drop_above_;
};

}  // namespace frugal::ps_internal
