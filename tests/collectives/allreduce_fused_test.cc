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

// The engine's priority partitions: a tensor cut into pieces (here 40000 floats into pieces of
// 9000, the last 4000, as --partition-mb cuts; and 9001 into 7000 and 2001) ends with the bits of
// its reduction in one piece, each piece reduced alone, or pieces of both tensors fused in one
// buffer in a shuffled order.
TEST(AllreduceFused, APieceOfATensorHasTheBitsItHasInTheWhole) {
  struct Piece {
    size_t tensor;  // index into kCounts
    size_t offset;
    size_t count;
  };
  std::vector<Piece> pieces;
  for (size_t at = 0; at < 40000; at += 9000)
    pieces.push_back({7, at, std::min<size_t>(9000, 40000 - at)});
  pieces.push_back({4, 0, 7000});
  pieces.push_back({4, 7000, 2001});
  const std::vector<size_t> fused_order = {5, 2, 6, 0, 4, 1, 3};
  const std::vector<size_t> tensors = {4, 7};
  for (AllreduceAlgorithm algorithm : LayoutFreeAlgorithms()) {
    for (int n = 2; n <= 8; ++n) {
      AllreduceOptions options;
      options.algorithm = algorithm;
      options.segment_bytes = kSegmentBytes;
      const auto alone = ReduceAlone(n, kCounts, options, Protocol::kEager);
      // Every rank's pieces: reduced one at a time, and all in one buffer in fused_order.
      std::vector<std::vector<std::vector<float>>> one(static_cast<size_t>(n));
      std::vector<std::vector<float>> fused(static_cast<size_t>(n));
      ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
        const size_t r = static_cast<size_t>(t.rank());
        auto piece_input = [&](const Piece& p) {
          const std::vector<float> in = TensorInput(t.rank(), kCounts[p.tensor], p.tensor);
          return std::vector<float>(in.begin() + static_cast<ptrdiff_t>(p.offset),
                                    in.begin() + static_cast<ptrdiff_t>(p.offset + p.count));
        };
        std::vector<FusedPart> parts;
        for (const Piece& p : pieces) {
          one[r].push_back(piece_input(p));
          const FusedPart part{p.count, p.offset, kCounts[p.tensor]};
          FRUGAL_RETURN_IF_ERROR(AllreduceFused(t, one[r].back(), std::span(&part, 1), options));
        }
        for (size_t k : fused_order) {
          const Piece& p = pieces[k];
          const std::vector<float> in = piece_input(p);
          fused[r].insert(fused[r].end(), in.begin(), in.end());
          parts.push_back({p.count, p.offset, kCounts[p.tensor]});
        }
        return AllreduceFused(t, fused[r], parts, options);
      }));
      for (int r = 0; r < n; ++r) {
        const size_t rr = static_cast<size_t>(r);
        // The pieces, in their tensor's order, put back together.
        for (size_t tensor : tensors) {
          std::vector<float> joined;
          std::vector<float> joined_fused(kCounts[tensor]);
          for (size_t k = 0; k < pieces.size(); ++k) {
            if (pieces[k].tensor != tensor) continue;
            joined.insert(joined.end(), one[rr][k].begin(), one[rr][k].end());
          }
          size_t at = 0;
          for (size_t k : fused_order) {
            const Piece& p = pieces[k];
            if (p.tensor == tensor) {
              std::copy_n(fused[rr].begin() + static_cast<ptrdiff_t>(at), p.count,
                          joined_fused.begin() + static_cast<ptrdiff_t>(p.offset));
            }
            at += p.count;
          }
          const std::string where = fmt::format("{} n={} rank {} tensor {}",
                                                AllreduceAlgorithmName(algorithm), n, r, tensor);
          EXPECT_TRUE(BitIdentical(joined, alone[rr][tensor])) << where << ", pieces alone";
          EXPECT_TRUE(BitIdentical(joined_fused, alone[rr][tensor])) << where << ", pieces fused";
        }
      }
    }
  }
}

std::vector<double> AsDoubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Parts that lie anywhere in the buffer (the compressing reducer's small entries between its large
// ones): each has the bits of its own all-reduce, and the elements between them are left as they
// are, for the layout-free algorithms and for two that reduce the gathered parts as they are.
TEST(AllreduceFused, PartsBetweenOtherDataKeepTheirBitsAndLeaveTheRest) {
  const std::vector<size_t> order = {4, 6, 0, 7, 3, 5, 1, 2};
  constexpr size_t kGap = 3;
  std::vector<AllreduceAlgorithm> algorithms = LayoutFreeAlgorithms();
  algorithms.push_back(AllreduceAlgorithm::kHierarchical);
  for (AllreduceAlgorithm algorithm : algorithms) {
    for (int n : {1, 2, 3, 5, 8}) {
      AllreduceOptions options;
      options.algorithm = algorithm;
      options.segment_bytes = kSegmentBytes;
      options.ranks_per_host = 2;
      const auto alone = ReduceAlone(n, kCounts, options, Protocol::kEager);
      std::vector<std::vector<float>> out(static_cast<size_t>(n));
      std::vector<size_t> starts;
      std::vector<FusedPart> parts;
      size_t at = kGap;
      for (size_t i : order) {
        starts.push_back(at);
        parts.push_back({kCounts[i], 0, kCounts[i]});
        at += kCounts[i] + kGap;
      }
      ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
        std::vector<float>& buffer = out[static_cast<size_t>(t.rank())];
        buffer.assign(at, 1000.0f + static_cast<float>(t.rank()));
        for (size_t k = 0; k < order.size(); ++k) {
          const std::vector<float> in = TensorInput(t.rank(), kCounts[order[k]], order[k]);
          std::copy(in.begin(), in.end(), buffer.begin() + static_cast<ptrdiff_t>(starts[k]));
        }
        SharedBytes scratch;
        return AllreduceFused(t, buffer, parts, starts, options, &scratch);
      }));
      for (int r = 0; r < n; ++r) {
        const std::vector<float>& buffer = out[static_cast<size_t>(r)];
        const std::string where =
            fmt::format("{} n={} rank {}", AllreduceAlgorithmName(algorithm), n, r);
        size_t gap_at = 0;
        for (size_t k = 0; k <= order.size(); ++k) {
          for (size_t g = 0; g < kGap; ++g) {
            EXPECT_EQ(buffer[gap_at + g], 1000.0f + static_cast<float>(r)) << where;
          }
          if (k == order.size()) break;
          const auto begin = buffer.begin() + static_cast<ptrdiff_t>(starts[k]);
          const std::vector<float> got(begin, begin + static_cast<ptrdiff_t>(kCounts[order[k]]));
          if (algorithm == AllreduceAlgorithm::kHierarchical) {
            // Reduced as gathered: the sum, not necessarily its own all-reduce's bits.
            EXPECT_EQ(FirstMismatch(got, AsDoubles(alone[static_cast<size_t>(r)][order[k]]),
                                    256 * testing::Tolerance(n, ReduceOp::kSum)),
                      -1)
                << where << " tensor " << order[k];
          } else {
            EXPECT_TRUE(BitIdentical(got, alone[static_cast<size_t>(r)][order[k]]))
                << where << " tensor " << order[k];
          }
          gap_at = starts[k] + kCounts[order[k]];
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
