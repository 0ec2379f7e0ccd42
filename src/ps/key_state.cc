// One key on its server (see key_state.h).
//
// A push first advances the worker's clock and the key's progress (the step it carries must be
// the worker's clock: pushes of a key arrive in order), then the rules decide:
//  - kAccumulate (bsp, backup, lag): the gradient goes into the worker's slot (a lag skip keeps
//    the worker's last upload); once the version's pushes are complete (ConsistencyRules::
//    Complete) the slots are added in worker order - so a run repeats bit for bit whatever the
//    arrival order - divided (Divisor) and applied: x -= lr(step) * d(gbar), the version advances
//    and the slots of bsp and backup are emptied. lag keeps them: gbar averages every worker's last
//    upload;
//  - kApply (ssp, asp): x -= lr(step) * Scale(staleness) * d(g / W) at once, weight decay / W,
//    the version advances;
//  - kDrop: nothing is applied; counted.
// Weighted pushes (bsp): each push carries a weight (0 for an empty push); the update divides the
// sum of the version's pushes by the sum of their weights (added in worker order) instead of by
// W, and applies it with the optimizer as it is (FedAvg: plain SGD at rate 1).
// The staleness of an applied push is the version at apply minus the version it was computed on
// (0 for the accumulating models, whose pushes are of the current version).
// Then the held pulls whose need is met are answered: by version (bsp, backup, lag) or by the
// smallest clock of the workers not resting (ssp).
#include "ps/key_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace frugal::ps_internal {

KeyState::KeyState(const KeyPart& part, const ParameterServerConfig& config,
                   const ConsistencyRules& rules, const ServerOptimizer& optimizer)
    : part_(part), config_(config), rules_(rules), optimizer_(optimizer), scaled_(optimizer) {
  const size_t w = static_cast<size_t>(config.workers());
  scaled_.weight_decay = optimizer.weight_decay / static_cast<double>(config.workers());
  clock_.assign(w, 0);
  slots_.resize(w);
  have_.assign(w, 0);
  uploaded_.assign(w, 0);
  weights_.assign(w, 0.0);
}

void KeyState::Initialize(std::vector<float> values) {
  x_ = std::move(values);
  initialized_ = true;
}

Status KeyState::Push(PushIn push, std::span<const char> resting,
                      std::vector<WorkerPushStats>& stats) {
  const int w = push.worker;
  const size_t i = static_cast<size_t>(w);
  if (push.step != clock_[i]) {
    return MalformedError(fmt::format("push of key '{}' for step {}, expected step {}", part_.name,
                                      push.step, clock_[i]));
  }
  if (push.skip && rules_.kind() != PsConsistency::kLag && !config_.weighted) {
    return MalformedError(fmt::format("a skipped push of key '{}' outside lag", part_.name));
  }
  if (config_.weighted &&
      (!std::isfinite(push.weight) || push.weight < 0 || (push.weight == 0) != push.skip)) {
    return MalformedError(fmt::format("push of key '{}' with weight {}{}", part_.name, push.weight,
                                      push.skip ? " and no values" : ""));
  }
  std::string error;
  const PushAction action = rules_.OnPush(version_, push.version, error);
  if (!error.empty()) {
    return MalformedError(fmt::format("push of key '{}': {}", part_.name, error));
  }
  ++clock_[i];
  ++progress_;
  if (push.pull_after) Hold(w, rules_.NeedOf(push.version, clock_[i]));
  switch (action) {
    case PushAction::kDrop:
      ++stats[i].dropped;
      break;
    case PushAction::kApply: {
      const uint64_t staleness = version_ - push.version;
      stats[i].Count(staleness);
      const float inverse = 1.0f / static_cast<float>(config_.workers());
      for (float& g : push.gradient) g *= inverse;
      const double lr = optimizer_.lr ? optimizer_.lr(rules_.ScheduleStep(progress_)) : 0.0;
      Apply(push.gradient, lr * rules_.Scale(staleness), scaled_);
      break;
    }
    case PushAction::kAccumulate:
      if (have_[i] != 0) {
        return MalformedError(
            fmt::format("a second push of key '{}' for version {}", part_.name, version_));
      }
      if (push.skip && !config_.weighted && uploaded_[i] == 0) {
        return MalformedError(
            fmt::format("a skipped push of key '{}' before any upload", part_.name));
      }
      Accumulate(push, stats);
      if (rules_.Complete(have_count_, AllActiveIn(resting))) UpdateFromSlots();
      break;
  }
  return Status::Ok();
}

void KeyState::Accumulate(const PushIn& push, std::vector<WorkerPushStats>& stats) {
  const size_t i = static_cast<size_t>(push.worker);
  have_[i] = 1;
  ++have_count_;
  if (push.skip) {
    ++stats[i].skipped;
    return;
  }
  slots_[i] = std::move(push.gradient);
  weights_[i] = push.weight;
  uploaded_[i] = 1;
  stats[i].Count(0);
}

bool KeyState::AllActiveIn(std::span<const char> resting) const {
  for (size_t w = 0; w < have_.size(); ++w) {
    if (have_[w] == 0 && resting[w] == 0) return false;
  }
  return true;
}

void KeyState::Recheck(std::span<const char> resting) {
  if (rules_.accumulates() && have_count_ > 0 &&
      rules_.Complete(have_count_, AllActiveIn(resting))) {
    UpdateFromSlots();
  }
}

void KeyState::UpdateFromSlots() {
  const bool lag = rules_.kind() == PsConsistency::kLag;
  std::vector<float> sum;
  double weight = 0;
  for (size_t w = 0; w < slots_.size(); ++w) {
    const bool counts = lag ? uploaded_[w] != 0 : have_[w] != 0 && !slots_[w].empty();
    if (!counts) continue;
    weight += weights_[w];
    const std::vector<float>& g = slots_[w];
    if (sum.empty()) {
      sum = g;
    } else {
      for (size_t j = 0; j < g.size(); ++j) sum[j] += g[j];
    }
  }
  const float divisor = config_.weighted ? static_cast<float>(weight > 0 ? weight : 1.0)
                                         : static_cast<float>(rules_.Divisor(have_count_));
  for (float& v : sum) v /= divisor;
  const double lr = optimizer_.lr ? optimizer_.lr(rules_.ScheduleStep(progress_)) : 0.0;
  if (sum.empty()) sum.assign(x_.size(), 0.0f);
  Apply(sum, lr, optimizer_);
  std::fill(have_.begin(), have_.end(), 0);
  have_count_ = 0;
  if (!lag) {
    for (std::vector<float>& slot : slots_) std::vector<float>().swap(slot);
  }
}

void KeyState::Apply(std::span<float> gradient, double lr, const ServerOptimizer& optimizer) {
  double norm = 0;
  for (float g : gradient) norm += static_cast<double>(g) * g;
  last_norm_ = norm;
  ApplySgd(optimizer, lr, x_, gradient, state_);
  ++version_;
  ++updates_;
}

uint64_t KeyState::MinActiveClock(std::span<const char> resting) const {
  uint64_t min = std::numeric_limits<uint64_t>::max();
  for (size_t w = 0; w < clock_.size(); ++w) {
    if (resting[w] == 0) min = std::min(min, clock_[w]);
  }
  return min;
}

void KeyState::Hold(int worker, PullNeed need) { held_.push_back({worker, need, Clock::now()}); }

std::vector<int> KeyState::TakeReady(std::span<const char> resting) {
  std::vector<int> ready;
  if (held_.empty()) return ready;
  const uint64_t min_clock = MinActiveClock(resting);
  auto is_ready = [&](const HeldPull& pull) {
    return rules_.Ready(pull.need, version_, min_clock);
  };
  for (const HeldPull& pull : held_) {
    if (is_ready(pull)) ready.push_back(pull.worker);
  }
  std::erase_if(held_, is_ready);
  return ready;
}

std::vector<int> KeyState::Blocking(const HeldPull& pull, std::span<const char> resting) const {
  return rules_.Blocking(pull.need, clock_, resting, have_);
}

void KeyState::VisitState(StateVisitor& v) {
  const size_t w = clock_.size();
  v.FloatVector("x", x_);
  if (v.loading() && v.ok() && x_.size() != part_.count) {
    v.Reject(fmt::format("{} values, the key has {}", x_.size(), part_.count));
  }
  v.FloatVector("momentum", state_.momentum);
  v.U64("version", version_);
  v.U64("progress", progress_);
  v.U64("updates", updates_);
  v.F64("last_norm", last_norm_);
  std::vector<std::byte> flags(2 * w);
  for (size_t i = 0; i < w; ++i) {
    flags[i] = std::byte(have_[i] != 0);
    flags[w + i] = std::byte(uploaded_[i] != 0);
  }
  v.Bytes("have_uploaded", flags);
  if (v.loading() && v.ok() && flags.size() != 2 * w) {
    v.Reject(fmt::format("{} workers, this run has {}", flags.size() / 2, w));
  }
  if (!v.ok()) return;
  for (size_t i = 0; i < w; ++i) {
    StateVisitor::Scope worker(v, std::to_string(i));
    v.U64("clock", clock_[i]);
    v.FloatVector("slot", slots_[i]);
  }
  if (!v.loading()) return;
  have_count_ = 0;
  for (size_t i = 0; i < w; ++i) {
    have_[i] = static_cast<char>(flags[i] != std::byte{0});
    uploaded_[i] = static_cast<char>(flags[w + i] != std::byte{0});
    have_count_ += have_[i];
  }
  initialized_ = v.ok();
}

}  // namespace frugal::ps_internal
