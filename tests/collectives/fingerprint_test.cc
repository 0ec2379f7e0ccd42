// RanksDifferingFromRankZero: every rank learns the same list of ranks whose fingerprint differs
// from rank 0's, over world sizes 1 to 5; a rank that does not take part is named on timeout.
#include "frugal/fingerprint.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>

#include "frugal/inproc_transport.h"

namespace frugal {
namespace {

TEST(RanksDifferingFromRankZero, EveryRankGetsTheSameList) {
  for (int n = 1; n <= 5; ++n) {
    // Ranks 2 and 4 hold another fingerprint; rank 3 holds rank 0's.
    std::vector<int> expected;
    for (int r : {2, 4}) {
      if (r < n) expected.push_back(r);
    }
    std::mutex mu;
    std::vector<std::vector<int>> seen(static_cast<size_t>(n));
    std::vector<Status> statuses = RunRanks(n, [&](Transport& t) -> Status {
      const uint64_t mine = t.rank() == 2 || t.rank() == 4 ? 0xbad : 0x600d;
      FRUGAL_ASSIGN_OR_RETURN(std::vector<int> differing,
                              RanksDifferingFromRankZero(t, mine, CollectiveOptions{}));
      std::lock_guard lock(mu);
      seen[static_cast<size_t>(t.rank())] = differing;
      return Status::Ok();
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(statuses[static_cast<size_t>(r)].ok())
          << statuses[static_cast<size_t>(r)].ToString();
      EXPECT_EQ(seen[static_cast<size_t>(r)], expected) << "n = " << n << ", rank " << r;
    }
  }
}

TEST(RanksDifferingFromRankZero, AnAbsentRankIsNamedOnTimeout) {
  std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
    if (t.rank() == 1) return Status::Ok();
    CollectiveOptions options;
    options.timeout = std::chrono::milliseconds(300);
    return RanksDifferingFromRankZero(t, 1, options).status();
  });
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimeout) << statuses[0].ToString();
  EXPECT_NE(statuses[0].message().find("rank 1"), std::string::npos) << statuses[0].ToString();
}

}  // namespace
}  // namespace frugal
