#include "transport/inproc/faults.h"

#include <algorithm>

namespace frugal::inproc {
namespace {

// SplitMix64: a well-mixed 64-bit function of the rule's seed, the sender and the message number.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool Selects(int want, int value) { return want == InProcFault::kAny || want == value; }

}  // namespace

FaultPlan::FaultPlan(std::vector<InProcFault> rules, int world_size)
    : rules_(std::move(rules)),
      world_size_(world_size),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(rules_.size() *
                                                        static_cast<size_t>(world_size))) {
  for (const InProcFault& rule : rules_) {
    FRUGAL_CHECK(rule.src == InProcFault::kAny || (rule.src >= 0 && rule.src < world_size),
                 "fault rule: sender ", rule.src, " of a world of ", world_size);
    FRUGAL_CHECK(rule.dst == InProcFault::kAny || (rule.dst >= 0 && rule.dst < world_size),
                 "fault rule: receiver ", rule.dst, " of a world of ", world_size);
    FRUGAL_CHECK(rule.tag == InProcFault::kAny || (rule.tag >= 0 && rule.tag <= kMaxTag),
                 "fault rule: tag ", rule.tag);
    FRUGAL_CHECK(rule.delay >= Duration::zero(), "fault rule: negative delay");
  }
}

FaultDecision FaultPlan::Decide(int src, int dst, int tag) {
  FaultDecision decision;
  bool applied = false;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const InProcFault& rule = rules_[i];
    if (!Selects(rule.src, src) || !Selects(rule.dst, dst) || !Selects(rule.tag, tag)) continue;
    std::atomic<uint64_t>& count =
        counts_[i * static_cast<size_t>(world_size_) + static_cast<size_t>(src)];
    const uint64_t index = count.fetch_add(1, std::memory_order_relaxed);
    if (index < rule.first || index - rule.first >= rule.count) continue;
    applied = true;
    decision.index = index;
    switch (rule.kind) {
      case InProcFaultKind::kDrop:
        decision.drop = true;
        break;
      case InProcFaultKind::kDelay:
        decision.delay = std::max(decision.delay, rule.delay);
        break;
      case InProcFaultKind::kCorrupt:
        decision.flip_bit = Mix(rule.seed ^ Mix((static_cast<uint64_t>(src) << 40) ^ index));
        break;
      case InProcFaultKind::kKill:
        decision.kill = true;
        break;
    }
  }
  if (applied) applied_.fetch_add(1, std::memory_order_relaxed);
  return decision;
}

}  // namespace frugal::inproc
