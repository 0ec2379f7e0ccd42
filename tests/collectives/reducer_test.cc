// Bucket planning and the dense gradient reducers against a serial average, over world sizes
// 1..5 and every all-reduce algorithm (Gloo's included), with ranks as threads.
#include "frugal/reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/forwarding_transport.h"
#include "frugal/gloo.h"
#include "frugal/inproc_transport.h"
#include "frugal/random.h"

namespace frugal {
namespace {

std::vector<BucketInfo> Plan(const std::vector<TensorSpec>& tensors, size_t cap_bytes) {
  return PlanBuckets(tensors, cap_bytes);
}

TEST(PlanBuckets, FillsBucketsInOrderUpToTheCap) {
  const std::vector<TensorSpec> tensors = {{"a", 10},    {"b", 20}, {"empty", 0}, {"c", 5},
                                           {"big", 100}, {"d", 1},  {"e", 30}};
  const std::vector<BucketInfo> plan = PlanBuckets(tensors, 35 * sizeof(float));
  ASSERT_EQ(plan.size(), 3u);
  // a + b + c = 35 fits exactly; big exceeds the cap alone; d + e = 31.
  EXPECT_EQ(plan[0].count, 35u);
  ASSERT_EQ(plan[0].entries.size(), 3u);
  EXPECT_EQ(plan[0].entries[1].name, "b");
  EXPECT_EQ(plan[0].entries[1].offset, 10u);
  EXPECT_EQ(plan[0].entries[2].name, "c");
  EXPECT_EQ(plan[0].entries[2].offset, 30u);
  EXPECT_EQ(plan[1].entries.size(), 1u);
  EXPECT_EQ(plan[1].entries[0].name, "big");
  EXPECT_EQ(plan[1].count, 100u);
  EXPECT_EQ(plan[2].count, 31u);
  EXPECT_EQ(plan[2].entries[1].offset, 1u);
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].id, static_cast<int>(i));
    EXPECT_EQ(plan[i].name, "bucket" + std::to_string(i));
  }
}

TEST(PlanBuckets, DefaultCapIs25MegabytesAndEmptyInputGivesNoBuckets) {
  EXPECT_EQ(kDefaultBucketCapBytes, 25u * 1024 * 1024);
  EXPECT_TRUE(Plan({}, kDefaultBucketCapBytes).empty());
  const std::vector<TensorSpec> tensors = {{"x", 4 << 20}, {"y", 3 << 20}};  // 16 MB + 12 MB
  const auto plan = PlanBuckets(tensors, kDefaultBucketCapBytes);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_THROW(PlanBuckets(tensors, 0), CheckError);
}

TEST(PlanFingerprint, ChangesWithNamesSizesAndOrder) {
  const std::vector<TensorSpec> base = {{"w", 10}, {"b", 2}};
  const uint64_t h = PlanFingerprint(PlanBuckets(base, 1024));
  EXPECT_EQ(h, PlanFingerprint(PlanBuckets(base, 1024)));
  EXPECT_NE(h, PlanFingerprint(Plan({{"w", 10}, {"c", 2}}, 1024)));
  EXPECT_NE(h, PlanFingerprint(Plan({{"w", 11}, {"b", 2}}, 1024)));
  EXPECT_NE(h, PlanFingerprint(Plan({{"b", 2}, {"w", 10}}, 1024)));
  EXPECT_NE(h, PlanFingerprint(PlanBuckets(base, 40)));
}

TEST(VerifySamePlan, AgreesOrNamesTheRanksThatDiffer) {
  for (int n : {1, 2, 5}) {
    auto statuses = RunRanks(n, [](Transport& t) -> Status {
      return VerifySamePlan(t, Plan({{"w", 7}}, 64), std::chrono::seconds(10));
    });
    for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.ToString();
  }
  auto statuses = RunRanks(5, [](Transport& t) -> Status {
    const size_t count = (t.rank() == 1 || t.rank() == 3) ? 8 : 7;
    return VerifySamePlan(t, Plan({{"w", count}}, 64), std::chrono::seconds(10));
  });
  for (const Status& s : statuses) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("rank(s) 1, 3"), std::string::npos) << s.ToString();
  }
}

std::vector<float> RankValues(int rank, size_t count) {
  RngStream rng(RngKey{42, rank, 0, 7});
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(rng.Normal());
  return v;
}

TEST(DenseReducer, EveryAlgorithmAveragesLikeASerialSum) {
  const size_t count = 1000;
  const BucketInfo bucket = Plan({{"grad", count}}, kDefaultBucketCapBytes)[0];
  for (const std::string& algorithm : DenseReducerAlgorithms()) {
    if (algorithm == "mpi") continue;
    for (int n : {1, 2, 3, 4, 5}) {
      std::vector<double> expected(count, 0.0);
      for (int r = 0; r < n; ++r) {
        const std::vector<float> v = RankValues(r, count);
        for (size_t i = 0; i < count; ++i) expected[i] += v[i];
      }
      std::vector<std::vector<float>> results(static_cast<size_t>(n));
      std::vector<uint64_t> bytes(static_cast<size_t>(n));
      InProcOptions world_options;
      // hier: several hosts; another library's all-reduce connects over the host's names, which
      // the in-process hosts do not have.
      // The direct all-reduce: one host (it refuses several, DirectRefusedAcrossHosts).
      world_options.ranks_per_host = IsLibraryAllreduce(algorithm) || algorithm == "direct" ? 0 : 2;
      auto statuses = RunRanks(
          n,
          [&](Transport& t) -> Status {
            DenseReducerOptions options;
            options.algorithm = algorithm;
            options.timeout = std::chrono::seconds(20);
            FRUGAL_ASSIGN_OR_RETURN(auto reducer, MakeDenseReducer(t, options));
            std::vector<float> data = RankValues(t.rank(), count);
            FRUGAL_RETURN_IF_ERROR(reducer->Reduce(bucket, data));
            results[static_cast<size_t>(t.rank())] = data;
            bytes[static_cast<size_t>(t.rank())] = reducer->bytes_sent();
            const std::string counted_by =
                IsLibraryAllreduce(algorithm) ? "model:ring" : "transport";
            if (reducer->bytes_counted_by() != counted_by) {
              return InternalError("counted by " + reducer->bytes_counted_by());
            }
            return Status::Ok();
          },
          world_options);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(statuses[r].ok()) << algorithm << " n=" << n << ": " << statuses[r].ToString();
        for (size_t i = 0; i < count; ++i) {
          ASSERT_NEAR(results[r][i], expected[i] / n, 1e-5)
              << algorithm << " n=" << n << " rank " << r << " i=" << i;
        }
        // Every algorithm reduces in a fixed order: the same bits on every rank.
        EXPECT_EQ(results[r], results[0]) << algorithm << " n=" << n;
        if (n == 1) {
          EXPECT_EQ(bytes[r], 0u) << algorithm;
        } else {
          EXPECT_GT(bytes[r], 0u) << algorithm << " n=" << n;
        }
      }
    }
  }
}

// Forwards to a transport and counts the sends and receives that were not on shared memory
// (ISend/IRecv, which the MPI transport stages) apart from those that were (ISendShared/
// IRecvShared).
class CountingTransport final : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) override {
    ++own_;
    return inner_.ISend(dst, tag, data);
  }
  std::unique_ptr<Work> IRecv(int src, int tag, std::span<std::byte> data) override {
    ++own_;
    return inner_.IRecv(src, tag, data);
  }
  std::unique_ptr<Work> ISendShared(int dst, int tag, std::shared_ptr<const void> owner,
                                    std::span<const std::byte> data) override {
    ++shared_;
    return inner_.ISendShared(dst, tag, std::move(owner), data);
  }
  std::unique_ptr<Work> IRecvShared(int src, int tag, std::shared_ptr<void> owner,
                                    std::span<std::byte> data) override {
    ++shared_;
    return inner_.IRecvShared(src, tag, std::move(owner), data);
  }
  SharedBytes NewShared(size_t bytes) override { return inner_.NewShared(bytes); }

  int own() const { return own_; }
  int shared() const { return shared_; }

 private:
  int own_ = 0;
  int shared_ = 0;
};

// A bucket in the reducer's bucket memory goes through the transport without a single staged
// send or receive, with the same result and the same bytes as the staged Reduce of the same
// values; a reducer without bucket memory (another library's all-reduce) says so. The one
// exception: recursive doubling stages the sends of its exchanges for buffers of at most 1 MiB
// when the ranks share memory and have a core each (allreduce_recursive_doubling.cc), one send
// per exchange here (a single chunk), log2(p) exchanges on the ranks that take part.
TEST(DenseReducer, BucketMemoryIsReducedWithoutStagedSendsOrReceives) {
  const size_t count = 1000;
  const BucketInfo bucket = Plan({{"grad", count}}, kDefaultBucketCapBytes)[0];
  for (const char* algorithm : {"ring", "rd", "rabenseifner", "tree", "dbtree"}) {
    for (int n : {2, 3, 5}) {
      std::vector<int> staged_ops(static_cast<size_t>(n));
      auto statuses = RunRanks(n, [&](Transport& inner) -> Status {
        CountingTransport t(inner);
        DenseReducerOptions options;
        options.algorithm = algorithm;
        options.timeout = std::chrono::seconds(20);
        // As in training (the bucket plan is verified once): no per-call length check, whose
        // few bytes go from the caller's own memory.
        options.allreduce.check_lengths = false;
        FRUGAL_ASSIGN_OR_RETURN(auto reducer, MakeDenseReducer(t, options));
        std::vector<float> staged = RankValues(t.rank(), count);
        FRUGAL_RETURN_IF_ERROR(reducer->Reduce(bucket, staged));
        const uint64_t staged_bytes = reducer->bytes_sent();
        const int staged_own = t.own();
        const SharedBytes memory = reducer->NewBucketMemory(count);
        if (!memory.owner || memory.bytes.size() != count * sizeof(float)) {
          return InternalError("no bucket memory of the bucket's size");
        }
        const std::span<float> data(reinterpret_cast<float*>(memory.bytes.data()), count);
        const std::vector<float> values = RankValues(t.rank(), count);
        std::copy(values.begin(), values.end(), data.begin());
        const int own_before = t.own();
        FRUGAL_RETURN_IF_ERROR(reducer->ReduceShared(bucket, data, memory.owner));
        staged_ops[static_cast<size_t>(t.rank())] = staged_own;
        int expected_staged = 0;
        if (std::string_view(algorithm) == "rd" && t.CoreForEachRank()) {
          int p = 1, exchanges = 0;
          while (p * 2 <= n) p *= 2, ++exchanges;
          const int rem = n - p, r = t.rank();
          if (r >= 2 * rem || r % 2 == 1) expected_staged = exchanges;
        }
        if (t.own() - own_before != expected_staged) {
          return InternalError(std::to_string(t.own() - own_before) + " staged operations, " +
                               std::to_string(expected_staged) + " expected");
        }
        if (reducer->bytes_sent() != 2 * staged_bytes) {
          return InternalError("bytes: " + std::to_string(reducer->bytes_sent() - staged_bytes) +
                               " shared, " + std::to_string(staged_bytes) + " staged");
        }
        if (!std::equal(data.begin(), data.end(), staged.begin())) {
          return InternalError("the shared result differs from the staged one");
        }
        return Status::Ok();
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(statuses[r].ok())
            << algorithm << " n=" << n << " rank " << r << ": " << statuses[r].ToString();
      }
      // The counter sees the staged path where it is taken.
      EXPECT_GT(std::accumulate(staged_ops.begin(), staged_ops.end(), 0), 0) << algorithm;
    }
  }
  if (GlooAvailable()) {
    auto statuses = RunRanks(1, [](Transport& t) -> Status {
      DenseReducerOptions options;
      options.algorithm = "gloo";
      FRUGAL_ASSIGN_OR_RETURN(auto reducer, MakeDenseReducer(t, options));
      if (reducer->NewBucketMemory(10).owner) return InternalError("gloo has bucket memory");
      return Status::Ok();
    });
    EXPECT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  }
}

// Gloo's bytes cannot be observed: its reducers count those of the ring, which the ring's
// transport counts.
TEST(DenseReducer, RingCountsTwoTimesNMinusOneOverNOfTheBucket) {
  const size_t count = 4000;
  const BucketInfo bucket = Plan({{"grad", count}}, kDefaultBucketCapBytes)[0];
  std::vector<std::string> algorithms = {"ring"};
  if (GlooAvailable()) algorithms.insert(algorithms.end(), {"gloo", "gloo:halving_doubling"});
  for (const std::string& algorithm : algorithms) {
    std::vector<uint64_t> bytes(4);
    auto statuses = RunRanks(4, [&](Transport& t) -> Status {
      DenseReducerOptions options;
      options.algorithm = algorithm;
      options.allreduce.check_lengths = false;
      FRUGAL_ASSIGN_OR_RETURN(auto reducer, MakeDenseReducer(t, options));
      std::vector<float> data(count, 1.0f);
      FRUGAL_RETURN_IF_ERROR(reducer->Reduce(bucket, data));
      bytes[static_cast<size_t>(t.rank())] = reducer->bytes_sent();
      return Status::Ok();
    });
    for (int r = 0; r < 4; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << algorithm << ": " << statuses[r].ToString();
      EXPECT_EQ(bytes[r], 2u * 3 * (count / 4) * sizeof(float)) << algorithm << " rank " << r;
    }
  }
}

TEST(DenseReducer, RejectsUnknownNamesAndMpiOutsideMpi) {
  auto statuses = RunRanks(1, [](Transport& t) -> Status {
    DenseReducerOptions options;
    options.algorithm = "nccl";
    auto unknown = MakeDenseReducer(t, options);
    if (unknown.status().code() != StatusCode::kInvalidArgument) {
      return InternalError("nccl: " + unknown.status().ToString());
    }
    if (unknown.status().message().find("ring") == std::string::npos) {
      return InternalError("the message does not list the known names");
    }
    options.algorithm = "mpi";
    auto mpi = MakeDenseReducer(t, options);
    if (mpi.status().code() != StatusCode::kFailedPrecondition) {
      return InternalError("mpi: " + mpi.status().ToString());
    }
    return Status::Ok();
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  const std::vector<std::string> names = DenseReducerAlgorithms();
  EXPECT_EQ(names.front(), "ring");
  const size_t mpi =
      static_cast<size_t>(std::find(names.begin(), names.end(), "mpi") - names.begin());
  ASSERT_LT(mpi, names.size());
  EXPECT_EQ(mpi, AllAllreduceAlgorithms().size()) << "frugal's algorithms, then the libraries'";
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(IsLibraryAllreduce(names[i]), i >= mpi) << names[i];
  }
  if (GlooAvailable()) {
    EXPECT_EQ(
        std::vector<std::string>(names.begin() + static_cast<std::ptrdiff_t>(mpi) + 1, names.end()),
        (std::vector<std::string>{"gloo", "gloo:ring_chunked", "gloo:halving_doubling"}));
  }
  EXPECT_FALSE(IsLibraryAllreduce("gloo:ring"));
  EXPECT_EQ(*ModelAllreduceAlgorithm("gloo:halving_doubling"), AllreduceAlgorithm::kRabenseifner);
  EXPECT_EQ(*ModelAllreduceAlgorithm("mpi"), AllreduceAlgorithm::kRing);
  EXPECT_EQ(*ModelAllreduceAlgorithm("tree"), AllreduceAlgorithm::kBinaryTree);
}

}  // namespace
}  // namespace frugal
