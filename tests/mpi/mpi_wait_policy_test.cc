// The MPI transport's wait policy: how long a wait polls, yields and sleeps, by how many ranks
// share the machine's cores.
#include <gtest/gtest.h>

#include <chrono>

#include "frugal/timer.h"
#include "transport/mpi/mpi_work.h"

namespace frugal::mpi_internal {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(MpiWaitPolicy, ARankWithACoreOfItsOwnPollsWithoutYielding) {
  for (const auto& [ranks, cores] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{4, 0}}) {
    const WaitPolicy policy = WaitPolicyFor(ranks, cores);
    EXPECT_GE(policy.spin, milliseconds(1)) << ranks << " ranks on " << cores << " cores";
    EXPECT_EQ(policy.yield, policy.spin) << ranks << " ranks on " << cores << " cores";
  }
}

TEST(MpiWaitPolicy, OversubscribedRanksYieldBrieflyThenSleep) {
  const WaitPolicy policy = WaitPolicyFor(4, 2);
  EXPECT_LT(policy.spin, policy.yield);
  EXPECT_LE(policy.yield, milliseconds(1));
  EXPECT_EQ(WaitPolicyFor(3, 2).yield, policy.yield);
  // Two milliseconds into a wait, the rank sleeps a sixteenth of that instead of yielding.
  const auto start = Clock::now();
  BackOff(policy, milliseconds(2));
  EXPECT_GE(Clock::now() - start, microseconds(125));
}

}  // namespace
}  // namespace frugal::mpi_internal
