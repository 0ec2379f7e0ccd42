// FNV-1a against published test vectors, and the one back-off policy.
#include "frugal/hash.h"

#include <gtest/gtest.h>

#include <chrono>

#include "frugal/backoff.h"
#include "frugal/random.h"

namespace frugal {
namespace {

using std::chrono::milliseconds;

TEST(Fnv1a, MatchesTheReferenceVectors) {
  // From the FNV reference (draft-eastlake-fnv): 64-bit FNV-1a.
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(TensorId("foobar"), Fnv1a64("foobar"));
}

TEST(Fnv1a, AddingPiecesEqualsHashingTheirConcatenation) {
  EXPECT_EQ(Fnv1a().Add("foo").Add("bar").value(), Fnv1a64("foobar"));
  const uint64_t v = 0x0706050403020100ULL;  // bytes 00 01 ... 07 in memory order
  const std::string bytes("\x00\x01\x02\x03\x04\x05\x06\x07", 8);
  EXPECT_EQ(Fnv1a().AddU64(v).value(), Fnv1a64(bytes));
}

double MillisecondsOf(const BackOffPolicy& policy, Clock::duration waited) {
  const auto start = Clock::now();
  BackOff(policy, waited);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST(BackOff, SleepsASixteenthOfTheWaitUpToTheCap) {
  const BackOffPolicy policy{
      .spin = milliseconds(1), .yield = milliseconds(2), .max_sleep = milliseconds(40)};
  EXPECT_GE(MillisecondsOf(policy, milliseconds(320)), 20.0);  // 320 / 16
  const double capped = MillisecondsOf(policy, std::chrono::seconds(100));
  EXPECT_GE(capped, 40.0);
  EXPECT_LT(capped, 1000.0) << "the cap of 40 ms was not applied (100 s / 16 = 6.25 s)";
}

TEST(BackOff, DoesNotSleepWhileSpinningOrYielding) {
  const BackOffPolicy policy{.spin = std::chrono::seconds(10),
                             .yield = std::chrono::seconds(20),
                             .max_sleep = std::chrono::seconds(5)};
  // 9 s or 15 s waited would sleep over 0.5 s if these phases slept.
  EXPECT_LT(MillisecondsOf(policy, std::chrono::seconds(9)), 500.0);
  EXPECT_LT(MillisecondsOf(policy, std::chrono::seconds(15)), 500.0);
}

}  // namespace
}  // namespace frugal
