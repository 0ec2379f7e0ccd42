// How a thread waits between the polls of a wait that has no event to block on (MPI_Test,
// IProbe, waitpid, flock): the one back-off policy of frugal. Thread safe (stateless).
#pragma once

#include "frugal/timer.h"

namespace frugal {

// Phases by the time already waited: poll without pause until `spin`, yield the core between
// polls until `yield`, then sleep 1/16 of the time waited, at most `max_sleep`. A long wait then
// costs little CPU and adds at most about 1/16 to its latency.
struct BackOffPolicy {
  Clock::duration spin{0};
  Clock::duration yield{0};
  Clock::duration max_sleep = std::chrono::microseconds(500);
};

// Pauses as `policy` says for a wait that started `waited` ago; returns at once while spinning.
void BackOff(const BackOffPolicy& policy, Clock::duration waited);

}  // namespace frugal
