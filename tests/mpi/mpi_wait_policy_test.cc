// The MPI transport's wait policy: how long a wait polls, yields and sleeps, by how many ranks
// share the machine's cores.
#include <gtest/gtest.h>

#include <chrono>
#include <tuple>

#include "frugal/timer.h"
#include "transport/mpi/mpi_work.h"

namespace frugal::mpi_internal {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(MpiWaitPolicy, ARankWithTwoCoresOfItsOwnPollsWithoutYielding) {
  // (ranks on the machine, cores of the machine, cores of this rank's mask; 0: unknown)
  for (const auto& [ranks, cores, own] :
       {std::tuple{1, 2, 2}, std::tuple{2, 4, 4}, std::tuple{4, 0, 0}, std::tuple{2, 4, 0}}) {
    const WaitPolicy policy = WaitPolicyFor(ranks, cores, own);
    EXPECT_GE(policy.spin, milliseconds(1)) << ranks << " ranks on " << cores << " cores";
    EXPECT_EQ(policy.yield, policy.spin) << ranks << " ranks on " << cores << " cores";
  }
}

TEST(MpiWaitPolicy, OversubscribedRanksYieldBrieflyThenSleep) {
  const WaitPolicy policy = WaitPolicyFor(4, 2, 2);
  EXPECT_LT(policy.spin, policy.yield);
  EXPECT_LE(policy.yield, milliseconds(1));
  EXPECT_EQ(WaitPolicyFor(3, 2, 2).yield, policy.yield);
  // One core per rank, or a rank bound to one core: the engine's waits share it with the
  // training thread's compute, so the rank polls as if oversubscribed.
  EXPECT_EQ(WaitPolicyFor(2, 2, 2).spin, policy.spin);
  EXPECT_EQ(WaitPolicyFor(2, 2, 2).yield, policy.yield);
  EXPECT_EQ(WaitPolicyFor(3, 5, 5).yield, policy.yield);
  EXPECT_EQ(WaitPolicyFor(1, 8, 1).yield, policy.yield);
  // Two milliseconds into a wait, the rank sleeps a sixteenth of that instead of yielding.
  const auto start = Clock::now();
  BackOff(policy, milliseconds(2));
  EXPECT_GE(Clock::now() - start, microseconds(125));
}

}  // namespace
}  // namespace frugal::mpi_internal
