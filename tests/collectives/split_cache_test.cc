// The sub-transports of hierarchical and 2D-torus all-reduces are split once per transport and
// layout and then reused: repeated calls keep matching the serial reference, reuse the very same
// sub-transports, split again for a new layout, send no split traffic on a hit, and go away with
// the transport (Transport attachments).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/internal.h"
#include "frugal/collectives.h"
#include "frugal/inproc_transport.h"
#include "test_util.h"

namespace frugal {
namespace {

using testing::BitIdentical;
using testing::ExpectAllOk;
using testing::FirstMismatch;
using testing::MakeInput;
using testing::Reference;
using testing::Tolerance;

// Checks one all-reduce of step `step`'s inputs against the serial reference.
Status CheckedAllreduce(Transport& t, size_t length, uint64_t step,
                        const AllreduceOptions& options) {
  std::vector<float> data = MakeInput(t.rank(), length, step);
  FRUGAL_RETURN_IF_ERROR(Allreduce(t, data, options));
  const std::vector<double> want = Reference(t.size(), length, options.op, step);
  const int64_t bad = FirstMismatch(data, want, Tolerance(t.size(), options.op));
  if (bad >= 0) return InternalError("element " + std::to_string(bad) + " differs");
  return Status::Ok();
}

// The sub-transports cached on `t` under `key` (nullptr entries when absent).
std::vector<const Transport*> Groups(Transport& t, const std::string& key) {
  std::vector<const Transport*> out;
  const coll::SplitCache::Entry* entry = coll::SplitCacheOf(t).Find(key);
  if (entry == nullptr) return out;
  for (const auto& g : entry->groups) out.push_back(g.get());
  return out;
}

struct CacheCase {
  AllreduceAlgorithm algorithm;
  int ranks;
  int layout;  // ranks_per_host (hier) or torus_rows (torus)
  std::string key;
};

class SplitCacheTest : public ::testing::TestWithParam<CacheCase> {};

TEST_P(SplitCacheTest, SplitsOnceAndReusesTheGroups) {
  const CacheCase& c = GetParam();
  AllreduceOptions options;
  options.algorithm = c.algorithm;
  options.segment_bytes = 1000;
  if (c.algorithm == AllreduceAlgorithm::kHierarchical) {
    options.ranks_per_host = c.layout;
  } else {
    options.torus_rows = c.layout;
  }
  ExpectAllOk(RunRanks(c.ranks, [&c, shared = options](Transport& t) -> Status {
    AllreduceOptions options = shared;  // each rank changes its own copy of the op
    EXPECT_EQ(coll::SplitCacheOf(t).Find(c.key), nullptr);
    FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 3001, 0, options));
    const std::vector<const Transport*> first = Groups(t, c.key);
    EXPECT_EQ(first.size(), 2u) << c.key;
    for (uint64_t step = 1; step < 4; ++step) {
      options.op = step % 2 == 0 ? ReduceOp::kSum : ReduceOp::kAverage;
      // A hit sends exactly what the all-reduce itself sends: the same count every call.
      const uint64_t before = t.messages_sent();
      FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 3001, step, options));
      const uint64_t during = t.messages_sent() - before;
      FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 3001, step, options));
      EXPECT_EQ(t.messages_sent() - before, 2 * during) << "step " << step;
      EXPECT_EQ(Groups(t, c.key), first) << "step " << step;
    }
    EXPECT_EQ(coll::SplitCacheOf(t).size(), 1u);
    return Status::Ok();
  }));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, SplitCacheTest,
    ::testing::Values(CacheCase{AllreduceAlgorithm::kHierarchical, 6, 2, "hier/2"},
                      CacheCase{AllreduceAlgorithm::kHierarchical, 7, 3, "hier/3"},
                      CacheCase{AllreduceAlgorithm::kTorus2D, 6, 2, "torus/2"},
                      CacheCase{AllreduceAlgorithm::kTorus2D, 8, 4, "torus/4"}),
    [](const ::testing::TestParamInfo<CacheCase>& info) {
      std::string name = info.param.key;
      for (char& ch : name) {
        if (ch == '/') ch = '_';
      }
      return name + "_n" + std::to_string(info.param.ranks);
    });

TEST(SplitCache, EachLayoutHasItsOwnEntry) {
  ExpectAllOk(RunRanks(8, [](Transport& t) -> Status {
    AllreduceOptions options;
    options.algorithm = AllreduceAlgorithm::kTorus2D;
    for (int round = 0; round < 2; ++round) {
      for (int rows : {2, 4}) {
        options.torus_rows = rows;
        FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 777, static_cast<uint64_t>(rows), options));
      }
    }
    options.algorithm = AllreduceAlgorithm::kHierarchical;
    options.ranks_per_host = 4;
    FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 777, 9, options));
    // 2 x 4 torus and 4 x 2 torus have different groups; hier/4 is a third layout.
    const coll::SplitCache& cache = coll::SplitCacheOf(t);
    EXPECT_EQ(cache.size(), 3u);
    const std::vector<const Transport*> wide = Groups(t, "torus/2");
    const std::vector<const Transport*> tall = Groups(t, "torus/4");
    if (wide.size() != 2 || tall.size() != 2) return InternalError("a torus layout is missing");
    EXPECT_EQ(wide[0]->size(), 4);  // a row of the 2 x 4 grid
    EXPECT_EQ(wide[1]->size(), 2);  // a column of the 2 x 4 grid
    EXPECT_EQ(tall[0]->size(), 2);
    EXPECT_EQ(tall[1]->size(), 4);
    return Status::Ok();
  }));
}

TEST(SplitCache, HostnameLayoutGathersNamesOnce) {
  InProcOptions world;
  world.ranks_per_host = 3;
  ExpectAllOk(RunRanks(
      7,
      [](Transport& t) -> Status {
        AllreduceOptions options;
        options.algorithm = AllreduceAlgorithm::kHierarchical;
        FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 100, 0, options));
        const coll::SplitCache::Entry* entry = coll::SplitCacheOf(t).Find("hier/hostname");
        EXPECT_NE(entry, nullptr);
        if (entry != nullptr) {
          EXPECT_EQ(entry->host, (std::vector<int>{0, 0, 0, 3, 3, 3, 6}));
        }
        const uint64_t before = t.messages_sent();
        FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 100, 1, options));
        const uint64_t second = t.messages_sent() - before;
        FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 100, 2, options));
        EXPECT_EQ(t.messages_sent() - before, 2 * second);
        return Status::Ok();
      },
      world));
}

// Nested layouts: a torus inside hierarchical caches its groups on the (cached) leaders' group.
TEST(SplitCache, NestedTorusCachesOnTheLeadersGroup) {
  ExpectAllOk(RunRanks(8, [](Transport& t) -> Status {
    AllreduceOptions options;
    options.algorithm = AllreduceAlgorithm::kHierarchical;
    options.ranks_per_host = 2;
    options.inner_algorithm = AllreduceAlgorithm::kTorus2D;
    for (uint64_t step = 0; step < 3; ++step) {
      FRUGAL_RETURN_IF_ERROR(CheckedAllreduce(t, 999, step, options));
    }
    const coll::SplitCache::Entry* entry = coll::SplitCacheOf(t).Find("hier/2");
    EXPECT_NE(entry, nullptr);
    if (entry != nullptr && t.rank() % 2 == 0) {
      Transport& leaders = *entry->groups[1];
      EXPECT_EQ(leaders.size(), 4);
      EXPECT_NE(coll::SplitCacheOf(leaders).Find("torus/2"), nullptr);
    }
    return Status::Ok();
  }));
}

class Flag : public Transport::Attachment {
 public:
  explicit Flag(bool* destroyed) : destroyed_(destroyed) {}
  ~Flag() override { *destroyed_ = true; }

 private:
  bool* destroyed_;
};

TEST(TransportAttachment, FoundByKeyReplacedAndDestroyedWithTheTransport) {
  bool first_destroyed = false;
  bool second_destroyed = false;
  ExpectAllOk(RunRanks(2, [&](Transport& t) -> Status {
    if (t.rank() != 0) return Status::Ok();
    EXPECT_EQ(t.FindAttachment("x"), nullptr);
    Transport::Attachment& a = t.SetAttachment("x", std::make_unique<Flag>(&first_destroyed));
    EXPECT_EQ(t.FindAttachment("x"), &a);
    EXPECT_EQ(t.FindAttachment("y"), nullptr);
    Transport::Attachment& b = t.SetAttachment("x", std::make_unique<Flag>(&second_destroyed));
    EXPECT_TRUE(first_destroyed);
    EXPECT_EQ(t.FindAttachment("x"), &b);
    EXPECT_FALSE(second_destroyed);
    return Status::Ok();
  }));
  EXPECT_TRUE(second_destroyed);  // RunRanks destroys its transports before returning
}

}  // namespace
}  // namespace frugal
