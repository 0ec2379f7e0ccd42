#include "frugal/backoff.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace frugal {

void BackOff(const BackOffPolicy& policy, Clock::duration waited) {
  if (waited < policy.spin) return;
  if (waited < policy.yield) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(std::min<Clock::duration>(waited / 16, policy.max_sleep));
}

}  // namespace frugal
