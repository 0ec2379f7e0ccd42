// Every all-reduce algorithm against the serial reference, over world sizes, lengths, segment
// sizes and both ops; bit-identical results on all ranks; hierarchical and torus layouts; length
// mismatches; absent ranks; bytes on the wire.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/inproc_transport.h"
#include "test_util.h"

namespace frugal {
namespace {

using testing::AllreduceRun;
using testing::BitIdentical;
using testing::ExpectAllOk;
using testing::FirstMismatch;
using ::testing::HasSubstr;
using testing::MakeInput;
using testing::Over;
using testing::OverEachProtocol;
using testing::Protocol;
using testing::ProtocolName;
using testing::Reference;
using testing::RunAllreduce;
using testing::Tolerance;

// Large enough for every algorithm to cut its messages into many segments of kSmallSegment bytes
// (about 100 over the whole vector, 12 over a block of 8 ranks), a prime so that no rank count
// divides it.
constexpr size_t kLarge = 30011;
constexpr size_t kSmallSegment = 1204;

void ExpectMatchesReference(const AllreduceRun& result, int n, size_t length, ReduceOp op,
                            const std::string& label) {
  ExpectAllOk(result.statuses);
  const std::vector<double> want = Reference(n, length, op);
  const double tolerance = Tolerance(n, op);
  for (int r = 0; r < n; ++r) {
    const auto& got = result.outputs[static_cast<size_t>(r)];
    const int64_t bad = FirstMismatch(got, want, tolerance);
    EXPECT_EQ(bad, -1) << label << " rank " << r << " element " << bad << ": got "
                       << (bad >= 0 && static_cast<size_t>(bad) < got.size() ? got[bad] : 0.0f)
                       << " want " << (bad >= 0 ? want[bad] : 0.0);
    EXPECT_TRUE(BitIdentical(got, result.outputs[0]))
        << label << " rank " << r << " differs from rank 0";
  }
}

struct Case {
  AllreduceAlgorithm algorithm;
  int ranks;
  size_t length;
  size_t segment_bytes;
  ReduceOp op;
};

std::string CaseName(const Case& c) {
  return fmt::format("{}_n{}_len{}_seg{}_{}", AllreduceAlgorithmName(c.algorithm), c.ranks,
                     c.length, c.segment_bytes, c.op == ReduceOp::kSum ? "sum" : "avg");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (AllreduceAlgorithm a : AllAllreduceAlgorithms()) {
    for (int n : {1, 2, 3, 4, 5, 7, 8}) {
      const size_t un = static_cast<size_t>(n);
      const std::vector<std::pair<size_t, size_t>> shapes = {
          {0, 1 << 20},      {1, 1 << 20},      {un - 1, 1 << 20},
          {un, 1 << 20},     {un + 1, 1 << 20}, {kLarge, kSmallSegment},
          {kLarge, 1 << 20}, {un + 1, 4},       {kLarge, 0},
          {3 * un + 2, 8}};
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto [length, seg] = shapes[i];
        if (std::find(shapes.begin(), shapes.begin() + static_cast<ptrdiff_t>(i), shapes[i]) !=
            shapes.begin() + static_cast<ptrdiff_t>(i)) {
          continue;  // n - 1 == 0 or n == 1 repeat a shape
        }
        // The first seven shapes with both ops; the segment-size variants with one op each.
        if (i < 7) {
          cases.push_back({a, n, length, seg, ReduceOp::kSum});
          cases.push_back({a, n, length, seg, ReduceOp::kAverage});
        } else {
          cases.push_back({a, n, length, seg, i % 2 == 0 ? ReduceOp::kAverage : ReduceOp::kSum});
        }
      }
    }
  }
  return cases;
}

class AllreduceTest : public ::testing::TestWithParam<std::tuple<Case, Protocol>> {};

TEST_P(AllreduceTest, MatchesSerialReferenceOnEveryRank) {
  const auto& [c, protocol] = GetParam();
  AllreduceOptions options;
  options.algorithm = c.algorithm;
  options.op = c.op;
  options.segment_bytes = c.segment_bytes;
  options.timeout = std::chrono::seconds(30);
  const AllreduceRun result = RunAllreduce(c.ranks, c.length, options, Over(protocol));
  ExpectMatchesReference(result, c.ranks, c.length, c.op, CaseName(c));
  if (c.length == kLarge) {
    const AllreduceRun on_shared = RunAllreduce(c.ranks, c.length, options, Over(protocol), true);
    ExpectMatchesReference(on_shared, c.ranks, c.length, c.op, CaseName(c) + " on shared memory");
    EXPECT_TRUE(BitIdentical(on_shared.outputs[0], result.outputs[0])) << CaseName(c);
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, AllreduceTest,
                         ::testing::Combine(::testing::ValuesIn(AllCases()),
                                            ::testing::ValuesIn(testing::AllProtocols())),
                         [](const ::testing::TestParamInfo<std::tuple<Case, Protocol>>& info) {
                           return CaseName(std::get<0>(info.param)) + "_" +
                                  ProtocolName(std::get<1>(info.param));
                         });

// Tests of all-reduce options and accounting, once per protocol.
class AllreduceOver : public OverEachProtocol {};
INSTANTIATE_TEST_SUITE_P(Protocols, AllreduceOver, ::testing::ValuesIn(testing::AllProtocols()),
                         testing::ProtocolParamName);

TEST_P(AllreduceOver, RepeatedCallsOnOneTransport) {
  // Calls of different algorithms follow each other on the same transport without mixing.
  const int n = 5;
  std::vector<std::vector<float>> outputs(n);
  auto statuses = Run(n, [&](Transport& t) -> Status {
    std::vector<float> last;
    for (int iter = 0; iter < 3; ++iter) {
      for (AllreduceAlgorithm a : AllAllreduceAlgorithms()) {
        std::vector<float> data = MakeInput(t.rank(), 1001);
        AllreduceOptions options;
        options.algorithm = a;
        options.segment_bytes = 512;
        FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, options));
        if (!last.empty() && !BitIdentical(last, data) && a == AllreduceAlgorithm::kRing) {
          return InternalError("ring gave different bits on a repeated call");
        }
        if (a == AllreduceAlgorithm::kRing) last = data;
        const auto want = Reference(n, 1001, ReduceOp::kSum);
        if (FirstMismatch(data, want, Tolerance(n, ReduceOp::kSum)) != -1) {
          return InternalError(std::string(AllreduceAlgorithmName(a)) + " wrong");
        }
      }
    }
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

// Hierarchical: hosts given by ranks_per_host, or found from (fake) host names.
struct HierCase {
  int ranks;
  int ranks_per_host;
  bool by_hostname;
  AllreduceAlgorithm inner;
};

class HierarchicalTest : public ::testing::TestWithParam<std::tuple<HierCase, Protocol>> {};

TEST_P(HierarchicalTest, MatchesReference) {
  const auto& [c, protocol] = GetParam();
  AllreduceOptions options;
  options.algorithm = AllreduceAlgorithm::kHierarchical;
  options.inner_algorithm = c.inner;
  options.segment_bytes = 2000;
  InProcOptions world;
  if (c.by_hostname) {
    world.ranks_per_host = c.ranks_per_host;
  } else {
    options.ranks_per_host = c.ranks_per_host;
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    options.op = op;
    for (size_t length : {size_t{1}, size_t{7}, size_t{20011}}) {
      const AllreduceRun result = RunAllreduce(c.ranks, length, options, Over(protocol, world));
      ExpectMatchesReference(result, c.ranks, length, op, "len " + std::to_string(length));
    }
  }
}

TEST(Hierarchical, RefusesDirectInner) {
  AllreduceOptions options;
  options.algorithm = AllreduceAlgorithm::kHierarchical;
  options.inner_algorithm = AllreduceAlgorithm::kDirect;
  options.ranks_per_host = 2;
  const AllreduceRun result = RunAllreduce(4, 100, options, {});
  for (const Status& s : result.statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("cannot run between hosts"));
  }
}

std::vector<HierCase> HierCases() {
  std::vector<HierCase> cases;
  for (int n : {2, 3, 5, 7, 8}) {
    for (int per_host : {1, 2, 3}) {
      for (bool by_name : {false, true}) {
        cases.push_back({n, per_host, by_name, AllreduceAlgorithm::kRing});
      }
    }
  }
  for (AllreduceAlgorithm inner : AllAllreduceAlgorithms()) {
    // Ring is covered above; direct cannot run between hosts (HierarchicalRefusesDirectInner).
    if (inner == AllreduceAlgorithm::kRing || inner == AllreduceAlgorithm::kDirect) continue;
    cases.push_back({7, 2, true, inner});
    cases.push_back({8, 3, false, inner});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalTest,
                         ::testing::Combine(::testing::ValuesIn(HierCases()),
                                            ::testing::ValuesIn(testing::AllProtocols())),
                         [](const ::testing::TestParamInfo<std::tuple<HierCase, Protocol>>& info) {
                           const HierCase& c = std::get<0>(info.param);
                           return fmt::format("n{}_perhost{}_{}_{}_{}", c.ranks, c.ranks_per_host,
                                              c.by_hostname ? "byname" : "byoption",
                                              AllreduceAlgorithmName(c.inner),
                                              ProtocolName(std::get<1>(info.param)));
                         });

TEST_P(AllreduceOver, HierarchicalPutsAllRanksOnOneHostByDefault) {
  AllreduceOptions options;
  options.algorithm = AllreduceAlgorithm::kHierarchical;
  const AllreduceRun result = RunAllreduce(6, 5003, options, Over(protocol()));
  ExpectMatchesReference(result, 6, 5003, ReduceOp::kSum, "one host");
}

TEST_P(AllreduceOver, HierarchicalNegativeRanksPerHostIsInvalidOnEveryRank) {
  AllreduceOptions options;
  options.algorithm = AllreduceAlgorithm::kHierarchical;
  options.ranks_per_host = -1;
  const AllreduceRun result = RunAllreduce(3, 10, options, Over(protocol()));
  for (const Status& s : result.statuses) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

struct TorusCase {
  int ranks;
  int rows;
  AllreduceAlgorithm inner;
};

class TorusTest : public ::testing::TestWithParam<std::tuple<TorusCase, Protocol>> {};

TEST_P(TorusTest, MatchesReference) {
  const auto& [c, protocol] = GetParam();
  AllreduceOptions options;
  options.algorithm = AllreduceAlgorithm::kTorus2D;
  options.torus_rows = c.rows;
  options.inner_algorithm = c.inner;
  options.segment_bytes = 3000;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    options.op = op;
    for (size_t length : {size_t{1}, size_t{5}, size_t{12345}}) {
      const AllreduceRun result = RunAllreduce(c.ranks, length, options, Over(protocol));
      ExpectMatchesReference(result, c.ranks, length, op, "len " + std::to_string(length));
    }
  }
}

std::vector<TorusCase> TorusCases() {
  std::vector<TorusCase> cases;
  for (int rows : {1, 2, 4, 8}) cases.push_back({8, rows, AllreduceAlgorithm::kRing});
  for (int rows : {2, 3}) cases.push_back({6, rows, AllreduceAlgorithm::kRing});
  cases.push_back({9, 3, AllreduceAlgorithm::kRing});
  cases.push_back({7, 0, AllreduceAlgorithm::kRing});
  cases.push_back({12, 0, AllreduceAlgorithm::kRing});
  for (AllreduceAlgorithm inner : AllAllreduceAlgorithms()) {
    if (inner != AllreduceAlgorithm::kRing) cases.push_back({6, 3, inner});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Grids, TorusTest,
                         ::testing::Combine(::testing::ValuesIn(TorusCases()),
                                            ::testing::ValuesIn(testing::AllProtocols())),
                         [](const ::testing::TestParamInfo<std::tuple<TorusCase, Protocol>>& info) {
                           const TorusCase& c = std::get<0>(info.param);
                           return fmt::format("n{}_rows{}_{}_{}", c.ranks, c.rows,
                                              AllreduceAlgorithmName(c.inner),
                                              ProtocolName(std::get<1>(info.param)));
                         });

TEST_P(AllreduceOver, TorusRowsThatDoNotDivideAreInvalidOnEveryRank) {
  for (int rows : {3, -1, 9}) {
    AllreduceOptions options;
    options.algorithm = AllreduceAlgorithm::kTorus2D;
    options.torus_rows = rows;
    const AllreduceRun result = RunAllreduce(8, 100, options, Over(protocol()));
    for (const Status& s : result.statuses) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << rows << ": " << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr("torus_rows"));
    }
  }
}

class PerAlgorithmTest : public ::testing::TestWithParam<std::tuple<AllreduceAlgorithm, Protocol>> {
 protected:
  AllreduceAlgorithm algorithm() const { return std::get<0>(GetParam()); }
  std::vector<Status> Run(int size, const std::function<Status(Transport&)>& fn) const {
    return RunRanks(size, fn, Over(std::get<1>(GetParam())));
  }
};

TEST_P(PerAlgorithmTest, LengthMismatchFailsOnEveryRank) {
  for (int n : {2, 3, 5, 8}) {
    for (int odd_rank : {0, n - 1}) {
      std::vector<Status> statuses = Run(n, [&](Transport& t) -> Status {
        std::vector<float> data(t.rank() == odd_rank ? 101 : 100, 1.0f);
        AllreduceOptions options;
        options.algorithm = algorithm();
        options.timeout = std::chrono::seconds(10);
        return Allreduce(t, data, options);
      });
      for (int r = 0; r < n; ++r) {
        const Status& s = statuses[static_cast<size_t>(r)];
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument)
            << "n " << n << " rank " << r << ": " << s.ToString();
        EXPECT_THAT(s.message(), HasSubstr("smallest 100, largest 101"));
        EXPECT_THAT(s.message(), HasSubstr(AllreduceAlgorithmName(algorithm())));
      }
    }
  }
}

TEST_P(PerAlgorithmTest, LengthMismatchWithoutCheckIsMalformedNotAHang) {
  const int n = 4;
  std::vector<Status> statuses = Run(n, [&](Transport& t) -> Status {
    std::vector<float> data(t.rank() == 2 ? 5000 : 4000, 1.0f);
    AllreduceOptions options;
    options.algorithm = algorithm();
    options.check_lengths = false;
    options.segment_bytes = 1 << 20;
    options.timeout = std::chrono::milliseconds(1000);
    return Allreduce(t, data, options);
  });
  int malformed = 0;
  for (const Status& s : statuses) {
    EXPECT_TRUE(s.ok() || s.code() == StatusCode::kMalformed || s.code() == StatusCode::kTimeout)
        << s.ToString();
    malformed += s.code() == StatusCode::kMalformed;
  }
  EXPECT_GE(malformed, 1);
}

TEST_P(PerAlgorithmTest, AbsentRankMakesOthersTimeOutNamingIt) {
  for (int n : {3, 4, 5}) {
    for (bool check : {true, false}) {
      const int absent = n - 2;
      std::vector<Status> statuses = Run(n, [&](Transport& t) -> Status {
        if (t.rank() == absent) return Status::Ok();
        std::vector<float> data(1000, 1.0f);
        AllreduceOptions options;
        options.algorithm = algorithm();
        options.check_lengths = check;
        options.timeout = std::chrono::milliseconds(100);
        return Allreduce(t, data, options);
      });
      int naming = 0;
      for (int r = 0; r < n; ++r) {
        if (r == absent) continue;
        const Status& s = statuses[static_cast<size_t>(r)];
        EXPECT_EQ(s.code(), StatusCode::kTimeout) << "rank " << r << ": " << s.ToString();
        // Either the rank waited on the absent one (or on one that gave up) itself, to receive
        // or (synchronous sends) to send, or it got the length check's notice of who did not
        // answer.
        EXPECT_THAT(s.message(),
                    ::testing::AnyOf(HasSubstr("no message from"), HasSubstr("did not answer"),
                                     HasSubstr("did not take a message")));
        EXPECT_THAT(s.message(), HasSubstr("within 100 ms"));
        const std::string name = "rank " + std::to_string(absent);
        if (s.message().find(name + " ") != std::string::npos ||
            s.message().find("world rank " + std::to_string(absent) + ")") != std::string::npos) {
          ++naming;
        }
      }
      EXPECT_GE(naming, 1) << "n " << n << " check " << check;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, PerAlgorithmTest,
    ::testing::Combine(::testing::ValuesIn(AllAllreduceAlgorithms()),
                       ::testing::ValuesIn(testing::AllProtocols())),
    [](const ::testing::TestParamInfo<std::tuple<AllreduceAlgorithm, Protocol>>& info) {
      return std::string(AllreduceAlgorithmName(std::get<0>(info.param))) + "_" +
             ProtocolName(std::get<1>(info.param));
    });

// Bytes on the wire, counted by the transport, match what each algorithm must send.
TEST_P(AllreduceOver, BytesSentMatchTheAlgorithms) {
  const int n = 4;
  const size_t length = 4000;  // divisible by 4: equal blocks
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                               AllreduceAlgorithm::kRabenseifner, AllreduceAlgorithm::kDirect}) {
    std::vector<uint64_t> sent(n);
    auto statuses = Run(n, [&](Transport& t) -> Status {
      std::vector<float> data = MakeInput(t.rank(), length);
      AllreduceOptions options;
      options.algorithm = a;
      options.check_lengths = false;
      options.segment_bytes = 1000;
      const uint64_t before = t.bytes_sent();
      FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, options));
      sent[static_cast<size_t>(t.rank())] = t.bytes_sent() - before;
      return Status::Ok();
    });
    ExpectAllOk(statuses);
    const uint64_t bytes = length * sizeof(float);
    for (int r = 0; r < n; ++r) {
      switch (a) {
        case AllreduceAlgorithm::kRing:
        case AllreduceAlgorithm::kRabenseifner:
          EXPECT_EQ(sent[r], 2 * (n - 1) * bytes / n) << AllreduceAlgorithmName(a);
          break;
        case AllreduceAlgorithm::kDirect:  // where its buffer lies, to each peer; values are read
          EXPECT_EQ(sent[r], (n - 1) * kDirectRegionBytes) << AllreduceAlgorithmName(a);
          break;
        default:
          EXPECT_EQ(sent[r], 2 * bytes) << AllreduceAlgorithmName(a);  // log2(4) full buffers
      }
    }
  }
}

// The direct all-reduce reads the peers' buffers where they lie: on memory from NewShared (the
// caller's buffer itself) and on the caller's own memory (a copy) alike, the serial sum on every
// rank, and the caller's buffer is the only one written.
TEST_P(AllreduceOver, DirectReadsThePeersBuffersInPlace) {
  for (const int n : {2, 3, 5}) {
    for (const bool shared : {false, true}) {
      const size_t length = 70001;  // blocks of unequal length, pieces of 256 KiB and a rest
      AllreduceOptions options;
      options.algorithm = AllreduceAlgorithm::kDirect;
      const AllreduceRun run = RunAllreduce(n, length, options, Over(protocol()), shared);
      const auto& results = run.outputs;
      ExpectAllOk(run.statuses);
      const std::vector<double> expected = Reference(n, length, ReduceOp::kSum);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(FirstMismatch(results[r], expected, Tolerance(n, ReduceOp::kSum)), -1)
            << "n " << n << " rank " << r;
        EXPECT_TRUE(BitIdentical(results[r], results[0])) << "n " << n << " rank " << r;
      }
    }
  }
}

// Recursive doubling from 128 KiB on one host reads its partners' buffers: each rank in the main
// loop sends one region message (kDirectRegionBytes) and two empty messages ("summed", "copied")
// per round, the pre- and post-steps of a world that is not a power of two still send whole
// buffers; the sums are the serial reference's and the same bits on every rank, whether the
// buffer lies in memory shared with the transport or not, and whatever its length (the halves
// meet on a cache line). Below 128 KiB or across hosts it exchanges whole buffers (log2(p) per
// rank).
TEST_P(AllreduceOver, RecursiveDoublingReadsItsPartnersFrom128KiB) {
  const size_t big = (size_t{1} << 15) + 3;  // 128 KiB and 12 bytes
  struct Layout {
    int n;
    size_t length;
    int per_host;
    bool reads;
  };
  for (const Layout& l :
       {Layout{2, big, 0, true}, Layout{3, big, 0, true}, Layout{4, big, 0, true},
        Layout{5, big, 0, true}, Layout{6, big, 0, true}, Layout{8, big, 0, true},
        Layout{4, 3 * big + 1, 0, true}, Layout{4, (size_t{1} << 15) - 1, 0, false},
        Layout{2, big, 1, false}, Layout{4, big, 2, false}}) {
    for (const bool shared : {false, true}) {
      const ReduceOp op = l.n % 2 == 0 ? ReduceOp::kSum : ReduceOp::kAverage;
      SCOPED_TRACE(
          fmt::format("n {} length {} per host {} shared {}", l.n, l.length, l.per_host, shared));
      InProcOptions world;
      world.ranks_per_host = l.per_host;
      AllreduceOptions options;
      options.algorithm = AllreduceAlgorithm::kRecursiveDoubling;
      options.op = op;
      options.check_lengths = false;
      const AllreduceRun run =
          RunAllreduce(l.n, l.length, options, Over(protocol(), world), shared);
      const auto& results = run.outputs;
      const auto& sent = run.bytes;
      const auto& messages = run.messages;
      ExpectAllOk(run.statuses);
      const std::vector<double> expected = Reference(l.n, l.length, op);
      int p = 1;
      while (p * 2 <= l.n) p *= 2;
      const int rem = l.n - p;
      int rounds = 0;
      while ((1 << rounds) < p) ++rounds;
      const uint64_t buffer = l.length * sizeof(float);
      const uint64_t per_round = l.reads ? kDirectRegionBytes : buffer;
      for (int r = 0; r < l.n; ++r) {
        EXPECT_EQ(FirstMismatch(results[r], expected, Tolerance(l.n, op)), -1) << "rank " << r;
        EXPECT_TRUE(BitIdentical(results[r], results[0])) << "rank " << r;
        const bool pre_step_sender = r < 2 * rem && r % 2 == 0;
        const uint64_t want = pre_step_sender ? buffer
                              : r < 2 * rem   ? rounds * per_round + buffer
                                              : rounds * per_round;
        EXPECT_EQ(sent[r], want) << "rank " << r;
        if (l.reads && r >= 2 * rem) {
          EXPECT_EQ(messages[r], 3u * rounds) << "rank " << r;
        }
      }
    }
  }
}

// Ranks that cannot map each other's memory (here: two emulated hosts) are refused, every rank
// alike, before anything is read or sent, and their buffers are left as they were.
TEST_P(AllreduceOver, DirectRefusedAcrossHosts) {
  const int n = 4;
  InProcOptions world;
  world.ranks_per_host = 2;
  std::vector<std::vector<float>> after(n);
  std::vector<uint64_t> sent(n);
  auto statuses = Run(
      n,
      [&](Transport& t) -> Status {
        std::vector<float> data = MakeInput(t.rank(), 100);
        AllreduceOptions options;
        options.algorithm = AllreduceAlgorithm::kDirect;
        options.check_lengths = false;
        const uint64_t before = t.bytes_sent();
        Status s = Allreduce(t, data, options);
        sent[static_cast<size_t>(t.rank())] = t.bytes_sent() - before;
        after[static_cast<size_t>(t.rank())] = data;
        return s;
      },
      world);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(statuses[r].code(), StatusCode::kFailedPrecondition) << statuses[r].ToString();
    EXPECT_THAT(statuses[r].message(), HasSubstr("needs every rank on one machine"));
    EXPECT_EQ(sent[r], 0u);
    EXPECT_TRUE(BitIdentical(after[r], MakeInput(r, 100))) << "rank " << r;
  }
  // Within one host the same ranks may use it.
  auto within = Run(
      n,
      [&](Transport& t) -> Status {
        FRUGAL_ASSIGN_OR_RETURN(auto host, t.Split(t.rank() / 2, t.rank(), kDefaultTimeout));
        std::vector<float> data(10, static_cast<float>(t.rank()));
        AllreduceOptions options;
        options.algorithm = AllreduceAlgorithm::kDirect;
        FRUGAL_RETURN_IF_ERROR(Allreduce(*host, data, options));
        const float expected = t.rank() < 2 ? 1.0f : 5.0f;
        if (data[9] != expected) return InternalError(fmt::format("got {}", data[9]));
        return Status::Ok();
      },
      world);
  ExpectAllOk(within);
}

// Inside a host whose ranks share memory the hierarchical all-reduce reads the peers' buffers (the
// direct all-reduce): on the second call (the layout kept from the first), a rank that does not
// lead its host sends only the direct all-reduce's region message (kDirectRegionBytes), where the
// tree's reduce would send it its whole buffer; its leader sends that message, the inner ring's
// bytes (2 leaders: the whole buffer) and the broadcast (the whole buffer) to its one peer. On a
// single host every rank sends what the direct all-reduce sends, (n - 1) region messages. The
// sums are the serial reference's and the same bits on every rank.
TEST_P(AllreduceOver, HierarchicalReadsInsideAHost) {
  const int n = 4;
  const size_t length = 1000;
  const uint64_t buffer = length * sizeof(float);
  for (int per_host : {2, 0}) {
    SCOPED_TRACE(per_host == 0 ? "one host" : "two hosts");
    InProcOptions world;
    world.ranks_per_host = per_host;
    std::vector<std::vector<float>> after(n);
    std::vector<uint64_t> sent(n);
    auto statuses = Run(
        n,
        [&](Transport& t) -> Status {
          AllreduceOptions options;
          options.algorithm = AllreduceAlgorithm::kHierarchical;
          options.check_lengths = false;
          std::vector<float> data = MakeInput(t.rank(), length);
          FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, options));
          data = MakeInput(t.rank(), length);
          const uint64_t before = t.bytes_sent();
          FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, options));
          sent[static_cast<size_t>(t.rank())] = t.bytes_sent() - before;
          after[static_cast<size_t>(t.rank())] = data;
          return Status::Ok();
        },
        world);
    ExpectAllOk(statuses);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(FirstMismatch(after[r], Reference(n, length, ReduceOp::kSum),
                              Tolerance(n, ReduceOp::kSum)),
                -1)
          << "rank " << r;
      EXPECT_TRUE(BitIdentical(after[r], after[0])) << "rank " << r;
      if (per_host == 0) {
        EXPECT_EQ(sent[r], (n - 1) * kDirectRegionBytes) << "rank " << r;
      } else {
        const bool leader = r % per_host == 0;
        EXPECT_EQ(sent[r], kDirectRegionBytes + (leader ? 2 * buffer : 0)) << "rank " << r;
      }
    }
  }
}

TEST_P(AllreduceOver, RingBytesForUnevenBlocks) {
  // Ring rank r sends every block but its own in the reduce-scatter and every block but r + 1's
  // in the allgather.
  const int n = 3;
  const size_t length = 10;  // blocks of 4, 3, 3
  std::vector<uint64_t> sent(n);
  auto statuses = Run(n, [&](Transport& t) -> Status {
    std::vector<float> data(length, 1.0f);
    AllreduceOptions options;
    options.check_lengths = false;
    const uint64_t before = t.bytes_sent();
    FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, options));
    sent[static_cast<size_t>(t.rank())] = t.bytes_sent() - before;
    return Status::Ok();
  });
  ExpectAllOk(statuses);
  const size_t block[3] = {4, 3, 3};
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(sent[r], (2 * length - block[r] - block[(r + 1) % n]) * sizeof(float));
  }
}

}  // namespace
}  // namespace frugal
