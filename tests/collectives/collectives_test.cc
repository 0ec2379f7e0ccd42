// Broadcast, barrier, allgather(v), reduce-scatter, CheckSameLength, BlockPartition and the
// algorithm names, against serial references over world sizes and lengths.
#include "frugal/collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "frugal/inproc_transport.h"
#include "test_util.h"

namespace frugal {
namespace {

using testing::BitIdentical;
using testing::ExpectAllOk;
using testing::FirstMismatch;
using ::testing::HasSubstr;
using testing::MakeInput;
using testing::OverEachProtocol;
using testing::Reference;
using testing::Tolerance;

// Suites that run once per protocol of the in-process transport.
class BroadcastTest : public OverEachProtocol {};
class BarrierTest : public OverEachProtocol {};
class AllgatherTest : public OverEachProtocol {};
class AllgathervTest : public OverEachProtocol {};
class ReduceScatterTest : public OverEachProtocol {};
class CheckSameLengthTest : public OverEachProtocol {};

INSTANTIATE_TEST_SUITE_P(Protocols, BroadcastTest, ::testing::ValuesIn(testing::AllProtocols()),
                         testing::ProtocolParamName);
INSTANTIATE_TEST_SUITE_P(Protocols, BarrierTest, ::testing::ValuesIn(testing::AllProtocols()),
                         testing::ProtocolParamName);
INSTANTIATE_TEST_SUITE_P(Protocols, AllgatherTest, ::testing::ValuesIn(testing::AllProtocols()),
                         testing::ProtocolParamName);
INSTANTIATE_TEST_SUITE_P(Protocols, AllgathervTest, ::testing::ValuesIn(testing::AllProtocols()),
                         testing::ProtocolParamName);
INSTANTIATE_TEST_SUITE_P(Protocols, ReduceScatterTest, ::testing::ValuesIn(testing::AllProtocols()),
                         testing::ProtocolParamName);
INSTANTIATE_TEST_SUITE_P(Protocols, CheckSameLengthTest,
                         ::testing::ValuesIn(testing::AllProtocols()), testing::ProtocolParamName);

const std::vector<int> kWorldSizes = {1, 2, 3, 4, 5, 7, 8};

std::vector<size_t> Lengths(int n) {
  const size_t un = static_cast<size_t>(n);
  std::vector<size_t> lengths = {0, 1, un + 1, 100003};
  if (n > 2) lengths.push_back(un - 1);
  return lengths;
}

TEST(BlockPartition, CoversTheBufferWithNearlyEqualBlocks) {
  for (size_t count : {0, 1, 7, 8, 9, 100, 100003}) {
    for (int parts : {1, 2, 3, 7, 8, 13}) {
      size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Block b = BlockPartition(count, parts, i);
        EXPECT_EQ(b.offset, next);
        const size_t expected = count / parts + (static_cast<size_t>(i) < count % parts ? 1 : 0);
        EXPECT_EQ(b.count, expected);
        next += b.count;
      }
      EXPECT_EQ(next, count);
    }
  }
  EXPECT_THROW(BlockPartition(10, 0, 0), CheckError);
  EXPECT_THROW(BlockPartition(10, 3, 3), CheckError);
}

TEST(AllreduceAlgorithmNames, RoundTrip) {
  const std::vector<std::string> expected = {"ring",   "rd",   "rabenseifner", "tree",
                                             "dbtree", "hier", "torus",        "direct"};
  std::vector<std::string> names;
  for (AllreduceAlgorithm a : AllAllreduceAlgorithms()) {
    names.emplace_back(AllreduceAlgorithmName(a));
    auto parsed = ParseAllreduceAlgorithm(AllreduceAlgorithmName(a));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, a);
  }
  EXPECT_EQ(names, expected);
  auto bad = ParseAllreduceAlgorithm("rign");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'rign'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("ring, rd, rabenseifner, tree, dbtree, hier"));
}

TEST_P(BroadcastTest, EveryRootEveryLength) {
  for (int n : kWorldSizes) {
    for (size_t length : {size_t{0}, size_t{1}, size_t{13}, size_t{(3 << 20) / 4 + 5}}) {
      for (int root = 0; root < n; ++root) {
        if (length > 100 && root != n - 1) continue;  // large buffers: one root per size
        std::vector<std::vector<float>> outputs(static_cast<size_t>(n));
        auto statuses = Run(n, [&](Transport& t) -> Status {
          std::vector<float> data = MakeInput(t.rank(), length);
          FRUGAL_RETURN_IF_ERROR(Broadcast(t, data, root, CollectiveOptions{}));
          outputs[static_cast<size_t>(t.rank())] = std::move(data);
          return Status::Ok();
        });
        ExpectAllOk(statuses);
        const std::vector<float> want = MakeInput(root, length);
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(BitIdentical(outputs[static_cast<size_t>(r)], want))
              << "n " << n << " root " << root << " length " << length << " rank " << r;
        }
      }
    }
  }
}

TEST_P(BroadcastTest, BytesAndBadRoot) {
  auto statuses = Run(3, [](Transport& t) -> Status {
    std::string text = t.rank() == 1 ? "hello, ranks" : "????????????";
    FRUGAL_RETURN_IF_ERROR(Broadcast(t, std::as_writable_bytes(std::span<char>(text)), 1, {}));
    if (text != "hello, ranks") return InternalError("got " + text);
    std::vector<float> x(3);
    try {
      (void)Broadcast(t, x, 3, {});
      return InternalError("root 3 of 3 accepted");
    } catch (const CheckError&) {
    }
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST_P(BroadcastTest, LengthMismatchFailsOnEveryRank) {
  auto statuses = Run(4, [](Transport& t) -> Status {
    std::vector<float> data(t.rank() == 3 ? 9 : 8);
    return Broadcast(t, data, 0, {});
  });
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("broadcast: ranks disagree on the length"));
  }
}

TEST_P(BarrierTest, NoRankLeavesBeforeAllEntered) {
  for (int n : kWorldSizes) {
    constexpr int kRounds = 20;
    std::vector<std::atomic<int>> entered(kRounds);
    for (auto& e : entered) e = 0;
    auto statuses = Run(n, [&](Transport& t) -> Status {
      for (int round = 0; round < kRounds; ++round) {
        // A different straggler every round.
        if (round % n == t.rank()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        entered[round].fetch_add(1);
        FRUGAL_RETURN_IF_ERROR(Barrier(t, CollectiveOptions{}));
        if (entered[round].load() != n) {
          return InternalError("left barrier " + std::to_string(round) + " after only " +
                               std::to_string(entered[round].load()) + " entered");
        }
      }
      return Status::Ok();
    });
    ExpectAllOk(statuses);
  }
}

TEST_P(BarrierTest, AbsentRankTimesOut) {
  auto statuses = Run(4, [](Transport& t) -> Status {
    if (t.rank() == 2) return Status::Ok();
    CollectiveOptions options;
    options.timeout = std::chrono::milliseconds(50);
    return Barrier(t, options);
  });
  EXPECT_EQ(statuses[3].code(), StatusCode::kTimeout);
  EXPECT_THAT(statuses[3].message(), HasSubstr("barrier: no message from rank 2 within 50 ms"));
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimeout);
  EXPECT_EQ(statuses[1].code(), StatusCode::kTimeout);
}

TEST_P(AllgatherTest, ConcatenatesInRankOrder) {
  for (int n : kWorldSizes) {
    for (size_t length : {size_t{0}, size_t{1}, size_t{5}, size_t{300001}}) {
      std::vector<std::vector<float>> outputs(static_cast<size_t>(n));
      auto statuses = Run(n, [&](Transport& t) -> Status {
        const std::vector<float> in = MakeInput(t.rank(), length);
        std::vector<float> out(length * static_cast<size_t>(n), -7.0f);
        FRUGAL_RETURN_IF_ERROR(Allgather(t, in, out, CollectiveOptions{}));
        outputs[static_cast<size_t>(t.rank())] = std::move(out);
        return Status::Ok();
      });
      ExpectAllOk(statuses);
      std::vector<float> want;
      for (int r = 0; r < n; ++r) {
        const auto in = MakeInput(r, length);
        want.insert(want.end(), in.begin(), in.end());
      }
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(BitIdentical(outputs[static_cast<size_t>(r)], want))
            << "n " << n << " length " << length << " rank " << r;
      }
    }
  }
}

TEST_P(AllgatherTest, WrongOutputSizeThrowsAndMismatchIsInvalid) {
  auto statuses = Run(3, [](Transport& t) -> Status {
    std::vector<float> in(4), out(11);
    try {
      (void)Allgather(t, in, out, {});
      return InternalError("wrong output size accepted");
    } catch (const CheckError&) {
    }
    std::vector<float> in2(t.rank() == 0 ? 2 : 3);
    std::vector<float> out2(in2.size() * 3);
    return Allgather(t, in2, out2, {});
  });
  for (const Status& s : statuses) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST_P(AllgathervTest, VariableSizesIncludingEmpty) {
  for (int n : kWorldSizes) {
    auto size_of = [](int r) { return static_cast<size_t>((r * 37) % 11) * (r == 3 ? 100000 : 1); };
    auto contribution = [&](int r) {
      std::vector<std::byte> v(size_of(r));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>((r * 131 + i * 7) & 0xff);
      return v;
    };
    std::vector<std::vector<std::byte>> outputs(static_cast<size_t>(n));
    std::vector<std::vector<size_t>> all_sizes(static_cast<size_t>(n));
    auto statuses = Run(n, [&](Transport& t) -> Status {
      const auto in = contribution(t.rank());
      std::vector<std::byte> out(3);  // resized by the call
      std::vector<size_t> sizes;
      FRUGAL_RETURN_IF_ERROR(Allgatherv(t, in, out, sizes, CollectiveOptions{}));
      outputs[static_cast<size_t>(t.rank())] = std::move(out);
      all_sizes[static_cast<size_t>(t.rank())] = std::move(sizes);
      return Status::Ok();
    });
    ExpectAllOk(statuses);
    std::vector<std::byte> want;
    std::vector<size_t> want_sizes;
    for (int r = 0; r < n; ++r) {
      const auto c = contribution(r);
      want.insert(want.end(), c.begin(), c.end());
      want_sizes.push_back(c.size());
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(outputs[static_cast<size_t>(r)], want) << "n " << n << " rank " << r;
      EXPECT_EQ(all_sizes[static_cast<size_t>(r)], want_sizes) << "n " << n << " rank " << r;
    }
  }
}

TEST_P(ReduceScatterTest, OwnBlockHoldsTheReduction) {
  for (int n : kWorldSizes) {
    for (size_t length : Lengths(n)) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        std::vector<std::vector<float>> outputs(static_cast<size_t>(n));
        auto statuses = Run(n, [&](Transport& t) -> Status {
          std::vector<float> data = MakeInput(t.rank(), length);
          FRUGAL_RETURN_IF_ERROR(ReduceScatter(t, data, op, CollectiveOptions{}));
          outputs[static_cast<size_t>(t.rank())] = std::move(data);
          return Status::Ok();
        });
        ExpectAllOk(statuses);
        const auto want = Reference(n, length, op);
        for (int r = 0; r < n; ++r) {
          const Block b = BlockPartition(length, n, r);
          const auto& got = outputs[static_cast<size_t>(r)];
          std::vector<float> block(got.begin() + b.offset, got.begin() + b.offset + b.count);
          std::vector<double> want_block(want.begin() + b.offset,
                                         want.begin() + b.offset + b.count);
          EXPECT_EQ(FirstMismatch(block, want_block, Tolerance(n, op)), -1)
              << "n " << n << " length " << length << " rank " << r;
        }
      }
    }
  }
}

TEST_P(CheckSameLengthTest, AgreesOrFailsEverywhere) {
  for (int n : kWorldSizes) {
    auto same =
        Run(n, [](Transport& t) { return CheckSameLength(t, 42, "test", kDefaultTimeout); });
    ExpectAllOk(same);
    if (n == 1) continue;
    for (int odd = 0; odd < n; ++odd) {
      auto statuses = Run(n, [&](Transport& t) {
        return CheckSameLength(t, t.rank() == odd ? 7 : 42, "test op", std::chrono::seconds(10));
      });
      for (int r = 0; r < n; ++r) {
        const Status& s = statuses[static_cast<size_t>(r)];
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
        EXPECT_EQ(s.message(),
                  "test op: ranks disagree on the length: smallest 7, largest 42 elements");
      }
    }
  }
  // Every rank a different length: min and max are found whatever their positions.
  auto statuses = Run(7, [](Transport& t) {
    return CheckSameLength(t, static_cast<uint64_t>((t.rank() * 5) % 7 + 10), "x", kDefaultTimeout);
  });
  for (const Status& s : statuses) EXPECT_THAT(s.message(), HasSubstr("smallest 10, largest 16"));
}

TEST_P(CheckSameLengthTest, AbsentRankTimesOutNamingIt) {
  auto statuses = Run(4, [](Transport& t) -> Status {
    if (t.rank() == 1) return Status::Ok();
    return CheckSameLength(t, 5, "op", std::chrono::milliseconds(50));
  });
  // Rank 0 exchanges with rank 1 first.
  EXPECT_EQ(statuses[0].code(), StatusCode::kTimeout);
  EXPECT_THAT(statuses[0].message(),
              HasSubstr("op: length check: no message from rank 1 within 50 ms"));
  EXPECT_EQ(statuses[2].code(), StatusCode::kTimeout);
  EXPECT_EQ(statuses[3].code(), StatusCode::kTimeout);
}

TEST_P(CheckSameLengthTest, RanksWaitingOnOneThatGaveUpLearnWhoIsAbsent) {
  // Rank 1 never joins. Rank 0 waits for it first (its first partner) and gives up after 300 ms,
  // then sends its notice to rank 2, its next partner. Rank 2 waits on rank 0 with a timeout far
  // longer than rank 0's, so the notice reaches it before its own wait could expire: its error is
  // the notice, naming rank 1 and rank 0 as the reporter. Rank 3 waits on rank 1 directly.
  auto statuses = Run(4, [](Transport& t) -> Status {
    if (t.rank() == 1) return Status::Ok();
    const Duration timeout =
        t.rank() == 2 ? std::chrono::seconds(60) : std::chrono::milliseconds(300);
    return CheckSameLength(t, 5, "op", timeout);
  });
  EXPECT_THAT(statuses[0].message(),
              HasSubstr("op: length check: no message from rank 1 within 300 ms"));
  EXPECT_EQ(statuses[2].code(), StatusCode::kTimeout);
  // The notice carries how long rank 0 waited, not rank 2's own timeout.
  EXPECT_THAT(
      statuses[2].message(),
      HasSubstr("op: length check: rank 1 did not answer within 300 ms (reported by rank 0)"));
  EXPECT_THAT(statuses[3].message(),
              HasSubstr("op: length check: no message from rank 1 within 300 ms"));
}

}  // namespace
}  // namespace frugal
