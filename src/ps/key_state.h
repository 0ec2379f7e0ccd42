// One key on its server (internal): the parameters, the optimizer state, the version, each
// worker's clock, the pushes kept for the next update and the pulls held, changed only as the
// consistency rules (consistency.h) say. server.cc owns one per key and does the messaging.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frugal/parameter_server.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/timer.h"
#include "ps/consistency.h"
#include "ps/server_optimizer.h"
#include "ps/sharding.h"

namespace frugal::ps_internal {

struct HeldPull {
  int worker = 0;
  PullNeed need;
  Clock::time_point since;
};

// A push as the server received it.
struct PushIn {
  int worker = 0;
  uint64_t step = 0;     // the worker's clock for this key before the push
  uint64_t version = 0;  // the version the gradient was computed on
  bool skip = false;     // lag: no gradient this time; weighted: an empty push (weight 0)
  double weight = 0;     // weighted pushes: the push's weight
  bool pull_after = false;
  std::vector<float> gradient;  // part.count floats, empty for a skip
};

class KeyState {
 public:
  // `part`, `config`, `rules` and `optimizer` must outlive the key.
  KeyState(const KeyPart& part, const ParameterServerConfig& config, const ConsistencyRules& rules,
           const ServerOptimizer& optimizer);

  const KeyPart& part() const { return part_; }
  bool initialized() const { return initialized_; }
  void Initialize(std::vector<float> values);

  uint64_t version() const { return version_; }
  uint64_t progress() const { return progress_; }
  uint64_t updates() const { return updates_; }
  std::span<const float> values() const { return x_; }
  // ||gbar||^2 of the update that made the current version (0 before the first).
  double last_norm() const { return last_norm_; }

  // Follows the rules for `push`, counting it in stats[push.worker]; `resting` by worker. Then
  // the held pulls that became ready can be taken. kMalformed when the push breaks the model.
  Status Push(PushIn push, std::span<const char> resting, std::vector<WorkerPushStats>& stats);
  // A worker started or stopped resting: what waited for it may now proceed.
  void Recheck(std::span<const char> resting);
  void Hold(int worker, PullNeed need);
  // The workers whose held pulls are ready, removed from the held ones.
  std::vector<int> TakeReady(std::span<const char> resting);
  const std::vector<HeldPull>& held() const { return held_; }
  // The workers `pull` waits for.
  std::vector<int> Blocking(const HeldPull& pull, std::span<const char> resting) const;

  // The key's state from one step to the next (a checkpoint): the parameters, the optimizer's
  // momentum, the version, progress and updates, the norm of the last update, every worker's
  // clock, and the gradients kept for the next update with which workers they came from. Held
  // pulls are not state: a checkpoint is taken when every worker rests, with none held. Loading
  // marks the key initialized and refuses a worker count or parameter count other than this
  // key's.
  void VisitState(StateVisitor& v);

 private:
  void Accumulate(const PushIn& push, std::vector<WorkerPushStats>& stats);
  bool AllActiveIn(std::span<const char> resting) const;
  void UpdateFromSlots();
  void Apply(std::span<float> gradient, double lr, const ServerOptimizer& optimizer);
  uint64_t MinActiveClock(std::span<const char> resting) const;

  const KeyPart& part_;
  const ParameterServerConfig& config_;
  const ConsistencyRules& rules_;
  const ServerOptimizer& optimizer_;
  ServerOptimizer scaled_;  // ssp, asp: weight decay / W
  bool initialized_ = false;
  std::vector<float> x_;
  KeyOptimizerState state_;
  uint64_t version_ = 0;
  uint64_t progress_ = 0;
  uint64_t updates_ = 0;
  double last_norm_ = 0;
  std::vector<uint64_t> clock_;  // by worker
  // The gradients kept for the next update: bsp and backup, those of the current version (`have`);
  // lag, every worker's last upload (`uploaded`).
  std::vector<std::vector<float>> slots_;
  std::vector<char> have_;
  std::vector<char> uploaded_;
  std::vector<double> weights_;  // weighted: the weights of the version's pushes, by worker
  int have_count_ = 0;
  std::vector<HeldPull> held_;
};

}  // namespace frugal::ps_internal
