// The fault rules of an in-process world (InProcOptions::faults) and what they decide for each
// message. Internal to src/transport/inproc.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "frugal/inproc_transport.h"

namespace frugal::inproc {

// What happens to one message.
struct FaultDecision {
  bool drop = false;
  bool kill = false;  // the sender dies instead of sending it
  Duration delay{0};
  std::optional<uint64_t> flip_bit;  // reduced modulo the message's bits by Fill
  uint64_t index = 0;                // the message's number among its sender's matching ones
};

// Counts, per rule and sender, the messages that match the rule; thread safe (each counter is
// advanced by its sender only, so the numbering follows the sender's own order).
class FaultPlan {
 public:
  FaultPlan(std::vector<InProcFault> rules, int world_size);

  // For a message from world rank `src` to world rank `dst` with `tag`.
  FaultDecision Decide(int src, int dst, int tag);
  uint64_t applied() const { return applied_.load(std::memory_order_relaxed); }

 private:
  std::vector<InProcFault> rules_;
  int world_size_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // [rule * world_size + src]
  std::atomic<uint64_t> applied_{0};
};

}  // namespace frugal::inproc
