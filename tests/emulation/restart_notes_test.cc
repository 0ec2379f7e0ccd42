// The notes ranks leave for the launcher's restarts (restart_notes.h): the cause of a failed
// attempt, the ranks' progress, and their removal.
#include "restart_notes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace frugal::apps {
namespace {

namespace fs = std::filesystem;

class RestartNotesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("frugal-restart-notes-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Rank `rank` notes `line` as its failure, with the modification time `seconds`.
  void Fail(int rank, const std::string& line, time_t seconds) {
    RestartNotes(dir_.string(), rank).Failure(line);
    const fs::path path = dir_ / (".failure-rank-" + std::to_string(rank));
    const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  }

  fs::path dir_;
};

TEST(RelaysAnotherFailure, TellsPassedOnFailuresFromOwnOnes) {
  EXPECT_TRUE(RelaysAnotherFailure(
      "rank 1: train: Timeout: rank 0 failed: negotiation: no answer from rank 1 within 5000 ms"));
  EXPECT_TRUE(RelaysAnotherFailure("rank 0: train: PeerLost: worker rank 2 failed: killed"));
  EXPECT_FALSE(RelaysAnotherFailure(
      "rank 0: train: Timeout: negotiation: no answer from rank 1 within 5000 ms"));
  EXPECT_FALSE(RelaysAnotherFailure("rank 1: --inject kill:rank=1,step=5: killing this rank"));
  // "failed:" must follow a rank's number.
  EXPECT_FALSE(RelaysAnotherFailure("rank 0: train: IoError: 'gnuplot x' failed: no such file"));
}

TEST_F(RestartNotesTest, NoFailureNoCause) {
  RestartNotes(dir_.string(), 0).Progress(3);
  EXPECT_FALSE(FailureCause(dir_.string()).has_value());
}

TEST_F(RestartNotesTest, TheEarliestFailureIsTheCause) {
  Fail(2, "rank 2: train: Timeout: no message from rank 0", 200);
  Fail(1, "rank 1: train: Timeout: no message from rank 2", 100);
  EXPECT_EQ(FailureCause(dir_.string()), "rank 1: train: Timeout: no message from rank 2");
}

TEST_F(RestartNotesTest, AFailureOfItsOwnComesBeforeEarlierRelays) {
  // The rank that timed out wrote its note after the rank it told.
  Fail(1, "rank 1: train: Timeout: rank 0 failed: negotiation: no answer from rank 1", 100);
  Fail(2, "rank 2: train: Timeout: rank 0 failed: negotiation: no answer from rank 1", 100);
  Fail(0, "rank 0: train: Timeout: negotiation: no answer from rank 1", 101);
  EXPECT_EQ(FailureCause(dir_.string()),
            "rank 0: train: Timeout: negotiation: no answer from rank 1");
}

TEST_F(RestartNotesTest, OnlyRelaysGiveTheEarliestRelayAsTheFailingRanksLine) {
  // The rank that timed out was ended by the others' abort before it wrote its note.
  Fail(2, "rank 2: train: Timeout: rank 0 failed: x", 300);
  Fail(1, "rank 1: train: Timeout: rank 0 failed: y", 200);
  EXPECT_EQ(FailureCause(dir_.string()), "rank 0: train: Timeout: y (passed on by rank 1)");
}

TEST(OriginOfRelay, NamesTheRankThatFailed) {
  EXPECT_EQ(OriginOfRelay("rank 1: train: Timeout: rank 0 failed: negotiation: no answer from "
                          "rank 1 within 5000 ms"),
            "rank 0: train: Timeout: negotiation: no answer from rank 1 within 5000 ms (passed on "
            "by rank 1)");
  EXPECT_EQ(OriginOfRelay("rank 0: train: PeerLost: worker rank 12 failed: killed"),
            "rank 12: train: PeerLost: killed (passed on by rank 0)");
  EXPECT_EQ(OriginOfRelay("rank 0: train: Timeout: no message from rank 2"),
            "rank 0: train: Timeout: no message from rank 2");
}

TEST_F(RestartNotesTest, EqualTimesGoToTheLowerRank) {
  Fail(3, "rank 3: train: Timeout: a", 100);
  Fail(1, "rank 1: train: Timeout: b", 100);
  Fail(2, "rank 2: train: Timeout: c", 100);
  EXPECT_EQ(FailureCause(dir_.string()), "rank 1: train: Timeout: b");
}

TEST_F(RestartNotesTest, ProgressByRankKeepsTheLastNoteOfEachRank) {
  RestartNotes(dir_.string(), 0).Progress(4);
  RestartNotes(dir_.string(), 0).Progress(7);
  RestartNotes(dir_.string(), 12).Progress(5);
  std::ofstream(dir_ / ".progress-rank-x") << "9\n";   // not a rank
  std::ofstream(dir_ / ".progress-rank-3") << "-1\n";  // not a count
  const std::map<int, int64_t> expected = {{0, 7}, {12, 5}};
  EXPECT_EQ(ProgressByRank(dir_.string()), expected);
}

TEST_F(RestartNotesTest, RemoveLeavesOtherFiles) {
  RestartNotes(dir_.string(), 0).Progress(4);
  Fail(0, "rank 0: train: Timeout: a", 100);
  std::ofstream(dir_ / "ckpt-manifest") << "x\n";
  RemoveRestartNotes(dir_.string());
  EXPECT_TRUE(ProgressByRank(dir_.string()).empty());
  EXPECT_FALSE(FailureCause(dir_.string()).has_value());
  EXPECT_TRUE(fs::exists(dir_ / "ckpt-manifest"));
}

TEST(RestartNotes, InactiveWithoutTheEnvironment) {
  ::unsetenv(kRestartNotesEnv);
  EXPECT_FALSE(RestartNotes::FromEnvironment(0).active());
}

}  // namespace
}  // namespace frugal::apps
