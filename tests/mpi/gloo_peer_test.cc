// The Gloo peer of the benchmarks, with ranks as threads over the in-process transport (each
// rank's Gloo context talks TCP over loopback): a large all-reduce in the default mode completes
// with the exact sum, and a rank that stops taking part ends its peers' all-reduce within the
// timeout with a status naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "frugal/inproc_transport.h"
#include "peers.h"

namespace frugal::bench {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

float Value(size_t i, int rank) { return static_cast<float>((7 * i + 13 * rank + 1) % 16); }

TEST(DescribeGlooFailure, NamesTheRankWhoseAddressTheMessageHolds) {
  const std::vector<std::vector<std::string>> remote = {
      {}, {"[127.0.0.1]:4123", "[127.0.0.1]:999"}, {"[127.0.0.1]:41234", "[127.0.0.1]:5000"}};
  Status timeout = DescribeGlooFailure("[pair.cc:574] Read timeout [127.0.0.1]:41234", remote,
                                       milliseconds(1500));
  EXPECT_EQ(timeout.code(), StatusCode::kTimeout);
  EXPECT_NE(timeout.message().find("no progress from rank 2 within 1500 ms"), std::string::npos)
      << timeout.message();
  EXPECT_EQ(timeout.message().find("rank 1"), std::string::npos) << timeout.message();

  Status gone = DescribeGlooFailure("writev [127.0.0.1]:999: Connection reset by peer", remote,
                                    milliseconds(1500));
  EXPECT_EQ(gone.code(), StatusCode::kPeerLost);
  EXPECT_NE(gone.message().find("rank 1 is gone"), std::string::npos) << gone.message();

  Status other = DescribeGlooFailure("something else", remote, milliseconds(1500));
  EXPECT_EQ(other.code(), StatusCode::kIoError);
  EXPECT_NE(other.message().find("a peer"), std::string::npos) << other.message();
}

TEST(GlooModeDefault, IsTheIoThread) {
  EXPECT_EQ(GlooPeerOptions{}.mode, GlooMode::kAsync);
  EXPECT_EQ(*ParseGlooMode(GlooModeName(GlooMode::kBusyPoll)), GlooMode::kBusyPoll);
}

// 64 MiB over 2 ranks: every ring chunk (16 MiB) is larger than the loopback socket buffers, so
// ranks that send in their own thread would each wait for the other to read.
TEST(GlooPeer, DefaultModeReducesMoreThanTheSocketBuffersHold) {
  const size_t count = size_t{16} << 20;
  std::vector<Status> statuses = RunRanks(2, [&](Transport& t) -> Status {
    GlooPeerOptions options;
    options.timeout = milliseconds(20000);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<AllreducePeer> peer, MakeGlooPeer(t, options));
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = Value(i, t.rank());
    FRUGAL_RETURN_IF_ERROR(peer->Allreduce(data));
    for (size_t i = 0; i < count; ++i) {
      if (data[i] != Value(i, 0) + Value(i, 1)) {
        return InternalError("element " + std::to_string(i) + " is wrong");
      }
    }
    return Status::Ok();
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

struct StoppedCase {
  GlooMode mode;
  int ranks;
};

class StoppedRank : public ::testing::TestWithParam<StoppedCase> {};

// The last rank connects and then never calls Allreduce (it waits for rank 0 to finish). Rank 0
// must return kTimeout naming it, within the timeout plus a margin.
TEST_P(StoppedRank, EndsRankZerosAllreduceWithinTheTimeoutNamingIt) {
  const StoppedCase c = GetParam();
  const int stopped = c.ranks - 1;
  const milliseconds timeout(1000);
  std::promise<void> rank0_done;
  std::shared_future<void> gate = rank0_done.get_future().share();
  Status rank0 = Status::Ok();
  milliseconds rank0_elapsed{0};
  std::vector<Status> statuses = RunRanks(c.ranks, [&](Transport& t) -> Status {
    GlooPeerOptions options;
    options.mode = c.mode;
    options.timeout = timeout;
    auto peer = MakeGlooPeer(t, options);
    if (!peer.ok() || t.rank() == stopped) {
      if (t.rank() == stopped &&
          gate.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
        return TimeoutError("rank 0 did not finish");
      }
      return peer.status();
    }
    std::vector<float> data(4096, 1.0f);
    const auto start = steady_clock::now();
    Status status = (*peer)->Allreduce(data);
    if (t.rank() == 0) {
      rank0_elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
      rank0 = status;
      rank0_done.set_value();
    }
    return status;
  });
  EXPECT_TRUE(statuses[static_cast<size_t>(stopped)].ok())
      << statuses[static_cast<size_t>(stopped)].ToString();
  ASSERT_EQ(rank0.code(), StatusCode::kTimeout) << rank0.ToString();
  EXPECT_NE(rank0.message().find("no progress from rank " + std::to_string(stopped) + " within"),
            std::string::npos)
      << rank0.message();
  EXPECT_LT(rank0_elapsed, 3 * timeout);
  for (int r = 1; r < stopped; ++r) {
    EXPECT_EQ(statuses[static_cast<size_t>(r)].code(), StatusCode::kTimeout)
        << statuses[static_cast<size_t>(r)].ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, StoppedRank,
    ::testing::Values(StoppedCase{GlooMode::kAsync, 2}, StoppedCase{GlooMode::kSync, 2},
                      StoppedCase{GlooMode::kBusyPoll, 2}, StoppedCase{GlooMode::kAsync, 3}),
    [](const auto& info) {
      return std::string(GlooModeName(info.param.mode)) + std::to_string(info.param.ranks);
    });

}  // namespace
}  // namespace frugal::bench
