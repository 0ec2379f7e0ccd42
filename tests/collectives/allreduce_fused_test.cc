// AllreduceFused: each tensor of a fused buffer ends with the bits of an Allreduce of it alone, for
// every algorithm that promises it, every world size up to 8, both ops, both protocols, scratch
// kept or not, in every order of the tensors; the others still reduce correctly; a failed call
// drops the scratch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/inproc_transport.h"
#include "frugal/random.h"
#include "test_util.h"

namespace frugal {
namespace {

using testing::BitIdentical;
using testing::ExpectAllOk;
using testing::FirstMismatch;
using testing::MakeInput;
using testing::Over;
using testing::Protocol;
using testing::ProtocolName;

// Sizes below and above the number of ranks, primes, one large enough for several segments of
// kSegmentBytes in every block, and one (160 KB) from which the trees read their peers in place
// on one machine where the small ones alone do not (kReadingTreeBytes).
const std::vector<size_t> kCounts = {1, 5, 37, 2, 9001, 3, 64, 40000};
constexpr size_t kSegmentBytes = 1024;

// Tensor i of rank r: MakeInput(r, counts[i], step = i) scaled element by element by powers of two
// from 2^-8 to 2^8, so that partial sums round and their bits depend on the order of the
// additions (uniform values on one grid add up exactly on a few ranks, in any order).
std::vector<float> TensorInput(int rank, size_t count, size_t i) {
  std::vector<float> v = MakeInput(rank, count, /*step=*/i);
  RngStream rng(RngKey{.seed = 5, .rank = rank, .step = i, .tensor = count});
  for (float& x : v) x = std::ldexp(x, static_cast<int>(rng.Below(17)) - 8);
  return v;
}

// Every rank's tensors after reducing each alone.
std::vector<std::vector<std::vector<float>>> ReduceAlone(int n, const std::vector<size_t>& counts,
                                                         const AllreduceOptions& options,
                                                         Protocol protocol) {
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(n));
  ExpectAllOk(RunRanks(
      n,
      [&](Transport& t) -> Status {
        auto& mine = out[static_cast<size_t>(t.rank())];
        for (size_t i = 0; i < counts.size(); ++i) {
          mine.push_back(TensorInput(t.rank(), counts[i], i));
          FRUGAL_RETURN_IF_ERROR(Allreduce(t, mine.back(), options));
        }
        return Status::Ok();
      },
      Over(protocol)));
  return out;
}

// Every rank's fused buffer (tensors in `order`) after AllreduceFused, or after a plain Allreduce
// of it with `plain`.
std::vector<std::vector<float>> ReduceFused(int n, const std::vector<size_t>& counts,
                                            const std::vector<size_t>& order,
                                            const AllreduceOptions& options, Protocol protocol,
                                            bool keep_scratch, bool plain = false) {
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  std::vector<size_t> fused_counts;
  for (size_t i : order) fused_counts.push_back(counts[i]);
  ExpectAllOk(RunRanks(
      n,
      [&](Transport& t) -> Status {
        std::vector<float>& buffer = out[static_cast<size_t>(t.rank())];
        for (size_t i : order) {
          const std::vector<float> in = TensorInput(t.rank(), counts[i], i);
          buffer.insert(buffer.end(), in.begin(), in.end());
        }
        if (plain) return Allreduce(t, buffer, options);
        SharedBytes scratch;
        // Twice with the same scratch: the second call reuses it.
        if (keep_scratch) {
          std::vector<float> again = buffer;
          FRUGAL_RETURN_IF_ERROR(AllreduceFused(t, again, fused_counts, options, &scratch));
        }
        return AllreduceFused(t, buffer, fused_counts, options, keep_scratch ? &scratch : nullptr);
      },
      Over(protocol)));
  return out;
}

// Tensor order[k]'s slice of a fused buffer.
std::vector<float> Slice(const std::vector<float>& fused, const std::vector<size_t>& counts,
                         const std::vector<size_t>& order, size_t k) {
  size_t at = 0;
  for (size_t j = 0; j < k; ++j) at += counts[order[j]];
  return std::vector<float>(fused.begin() + static_cast<ptrdiff_t>(at),
                            fused.begin() + static_cast<ptrdiff_t>(at + counts[order[k]]));
}

std::vector<AllreduceAlgorithm> LayoutFreeAlgorithms() {
  return {AllreduceAlgorithm::kRing,
          AllreduceAlgorithm::kDirect,
          AllreduceAlgorithm::kRabenseifner,
          AllreduceAlgorithm::kDoubleBinaryTree,
          AllreduceAlgorithm::kRecursiveDoubling,
          AllreduceAlgorithm::kBinaryTree};
}

TEST(AllreduceFused, EveryTensorHasTheBitsOfItsOwnAllreduce) {
  const std::vector<size_t> forward = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<size_t> shuffled = {4, 6, 0, 7, 3, 5, 1, 2};
  for (AllreduceAlgorithm algorithm : LayoutFreeAlgorithms()) {
    for (int n = 2; n <= 8; ++n) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (Protocol protocol : {Protocol::kEager, Protocol::kSynchronous}) {
          AllreduceOptions options;
          options.algorithm = algorithm;
          options.op = op;
          options.segment_bytes = kSegmentBytes;
          const auto alone = ReduceAlone(n, kCounts, options, protocol);
          for (const auto& order : {forward, shuffled}) {
            const bool keep = &order == &shuffled;
            const auto fused = ReduceFused(n, kCounts, order, options, protocol, keep);
            for (int r = 0; r < n; ++r) {
              for (size_t k = 0; k < order.size(); ++k) {
                EXPECT_TRUE(BitIdentical(Slice(fused[static_cast<size_t>(r)], kCounts, order, k),
                                         alone[static_cast<size_t>(r)][order[k]]))
                    << AllreduceAlgorithmName(algorithm) << " n=" << n << " op "
                    << (op == ReduceOp::kSum ? "sum" : "average") << " " << ProtocolName(protocol)
                    << " rank " << r << " tensor " << order[k] << " at position " << k;
              }
            }
          }
        }
      }
    }
  }
}

// The property is not vacuous: reduced as one plain buffer, the same tensors end with other bits
// on a ring of 3 and of 8 ranks.
TEST(AllreduceFused, APlainAllreduceOfTheSameBufferDiffers) {
  const std::vector<size_t> order = {0, 1, 2, 3, 4, 5, 6, 7};
  AllreduceOptions options;
  options.segment_bytes = kSegmentBytes;
  for (int n : {3, 8}) {
    const auto alone = ReduceAlone(n, kCounts, options, Protocol::kEager);
    const auto plain = ReduceFused(n, kCounts, order, options, Protocol::kEager, false, true);
    int differ = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      differ += BitIdentical(Slice(plain[0], kCounts, order, k), alone[0][k]) ? 0 : 1;
    }
    EXPECT_GT(differ, 0) << n << " ranks";
  }
}

// Hierarchical and torus reduce the buffer as it is: still the sum of every rank's values (within
// the tolerance of values in [-1, 1) scaled to the inputs' largest magnitude, 2^8).
TEST(AllreduceFused, TwoLevelAlgorithmsStillReduce) {
  const std::vector<size_t> order = {0, 1, 2, 3, 4, 5, 6, 7};
  const size_t total = std::accumulate(kCounts.begin(), kCounts.end(), size_t{0});
  for (AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::kHierarchical, AllreduceAlgorithm::kTorus2D}) {
    AllreduceOptions options;
    options.algorithm = algorithm;
    options.ranks_per_host = 2;
    const int n = 6;
    const auto fused = ReduceFused(n, kCounts, order, options, Protocol::kEager, true);
    std::vector<double> want(total, 0.0);
    for (int r = 0; r < n; ++r) {
      size_t at = 0;
      for (size_t i = 0; i < kCounts.size(); ++i) {
        for (float x : TensorInput(r, kCounts[i], i)) want[at++] += x;
      }
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(FirstMismatch(fused[static_cast<size_t>(r)], want,
                              256 * testing::Tolerance(n, ReduceOp::kSum)),
                -1)
          << AllreduceAlgorithmName(algorithm) << " rank " << r;
    }
  }
}

// A call that fails (a peer never comes) returns the error and drops the scratch, which the network
// may still write.
TEST(AllreduceFused, AFailedCallDropsTheScratch) {
  AllreduceOptions options;
  options.timeout = std::chrono::milliseconds(200);
  const std::vector<size_t> counts = {3, 4};
  Status failed;
  bool dropped = false;
  ExpectAllOk(RunRanks(3, [&](Transport& t) -> Status {
    if (t.rank() != 0) return Status::Ok();
    std::vector<float> data = {1, 2, 3, 4, 5, 6, 7};
    SharedBytes scratch = t.NewShared(64 * sizeof(float));
    failed = AllreduceFused(t, data, counts, options, &scratch);
    dropped = scratch.owner == nullptr;
    return Status::Ok();
  }));
  EXPECT_FALSE(failed.ok());
  EXPECT_TRUE(dropped);
}

}  // namespace
}  // namespace frugal
