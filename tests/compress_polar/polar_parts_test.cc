// The parts of the polar compressor against plain references (polar_reference.h): the
// constructions, the packed transform and the packing of information bits, and the fast SC
// schedule of both kernel sets against SC written as a plain recursion.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <set>

#include "compress/polar_construct.h"
#include "compress/polar_list.h"
#include "compress/polar_sc.h"
#include "compress/polar_transform.h"
#include "compress_polar/polar_reference.h"
#include "frugal/random.h"

namespace frugal {
namespace {

using compress_internal::HasX86V3;
using compress_internal::Kernels;
using polar::Construction;
using polar::InfoSet;
using polar::LlrMode;

std::vector<Kernels> KernelSets() {
  std::vector<Kernels> sets = {Kernels::kBaseline};
  if (HasX86V3()) sets.push_back(Kernels::kX86V3);
  return sets;
}

InfoSet FromBools(const std::vector<bool>& info, int m) {
  std::vector<uint32_t> order;
  for (size_t i = 0; i < info.size(); ++i) {
    if (info[i]) order.push_back(static_cast<uint32_t>(i));
  }
  const auto k = static_cast<uint32_t>(order.size());
  for (size_t i = 0; i < info.size(); ++i) {
    if (!info[i]) order.push_back(static_cast<uint32_t>(i));
  }
  return polar::MakeInfoSet(order, m, k);
}

std::vector<uint8_t> Bits(std::span<const uint64_t> words, size_t size) {
  std::vector<uint8_t> bits(size);
  for (size_t i = 0; i < size; ++i) bits[i] = (words[i / 64] >> (i % 64)) & 1u;
  return bits;
}

// ----- constructions -----

TEST(PolarConstruction, PolarizationWeightOrdersEightPositions) {
  // The 5G NR sequence for N = 8 read from the most reliable end.
  EXPECT_EQ(polar::ReliabilityOrder(3, Construction::kPw, 0.5),
            (std::vector<uint32_t>{7, 6, 5, 3, 4, 2, 1, 0}));
}

TEST(PolarConstruction, PolarizationWeightSetMatchesAPlainComputation) {
  for (int m : {0, 1, 4, 7, 10, 14}) {
    const size_t size = size_t{1} << m;
    const std::vector<uint32_t> order = polar::ReliabilityOrder(m, Construction::kPw, 0.5);
    for (size_t k : {size_t{0}, size / 10, size / 4, size / 2, size - size / 8, size}) {
      const std::vector<bool> expected = polar_reference::PwInfoSet(m, k);
      const InfoSet set = polar::MakeInfoSet(order, m, static_cast<uint32_t>(k));
      for (size_t i = 0; i < size; ++i) ASSERT_EQ(set.info(i), expected[i]) << m << " " << k;
    }
  }
}

// Every construction orders a permutation, and respects the partial order every degraded channel
// family has: setting a bit of an index (one more "plus" transform) never makes it less reliable.
TEST(PolarConstruction, OrdersArePermutationsThatRespectThePartialOrder) {
  for (Construction c : {Construction::kPw, Construction::kBb, Construction::kGa}) {
    for (int m = 0; m <= 12; ++m) {
      for (double rate : {0.1, 0.5, 0.9}) {
        const std::vector<uint32_t> order = polar::ReliabilityOrder(m, c, rate);
        const size_t size = size_t{1} << m;
        ASSERT_EQ(order.size(), size);
        std::vector<size_t> rank(size, size);
        for (size_t r = 0; r < size; ++r) rank[order[r]] = r;
        for (size_t i = 0; i < size; ++i) ASSERT_LT(rank[i], size) << "position " << i;
        for (size_t i = 0; i < size; ++i) {
          for (int j = 0; j < m; ++j) {
            if ((i >> j) & 1u) continue;
            ASSERT_LT(rank[i | (size_t{1} << j)], rank[i])
                << polar::ConstructionName(c) << " m=" << m << " i=" << i << " bit " << j;
          }
        }
      }
    }
  }
}

// bb against Bhattacharyya parameters evolved in plain doubles (no underflow at m <= 8).
TEST(PolarConstruction, BhattacharyyaMatchesPlainEvolution) {
  for (double rate : {0.25, 0.5, 0.75}) {
    const double d = polar::DesignDistortion(rate);
    const double h = -d * std::log2(d) - (1 - d) * std::log2(1 - d);
    EXPECT_NEAR(h, 1 - rate, 1e-12);
    for (int m = 1; m <= 8; ++m) {
      const size_t size = size_t{1} << m;
      std::vector<double> z(size);
      for (size_t i = 0; i < size; ++i) {
        double v = 2 * std::sqrt(d * (1 - d));
        for (int j = m - 1; j >= 0; --j) v = ((i >> j) & 1u) ? v * v : 2 * v - v * v;
        z[i] = v;
      }
      const std::vector<uint32_t> order = polar::ReliabilityOrder(m, Construction::kBb, rate);
      for (size_t r = 1; r < size; ++r) {
        EXPECT_LE(z[order[r - 1]], z[order[r]] * (1 + 1e-9)) << m << " rank " << r;
      }
    }
  }
}

TEST(PolarConstruction, FingerprintTellsSetsApart) {
  std::set<uint32_t> seen;
  for (Construction c : {Construction::kPw, Construction::kBb, Construction::kGa}) {
    const InfoSet set = polar::MakeInfoSet(polar::ReliabilityOrder(10, c, 0.1), 10, 102);
    seen.insert(set.fingerprint);
  }
  const std::vector<uint32_t> pw = polar::ReliabilityOrder(10, Construction::kPw, 0.1);
  seen.insert(polar::MakeInfoSet(pw, 10, 103).fingerprint);
  EXPECT_EQ(seen.size(), 4u) << "bb, ga and pw differ at m=10, k=102, and k=103 from k=102";
}

// ----- the transform and the information bits -----

TEST(PolarTransform, ButterfliesEqualTheMatrixProductAndAreAnInvolution) {
  RngStream rng(RngKey{.seed = 3});
  for (int m = 0; m <= 10; ++m) {
    const size_t size = size_t{1} << m;
    std::vector<uint8_t> u(size);
    for (auto& b : u) b = rng.NextU64() & 1u;
    std::vector<uint64_t> words(std::max<size_t>(1, size / 64), 0);
    for (size_t i = 0; i < size; ++i) words[i / 64] |= uint64_t{u[i]} << (i % 64);
    polar::Transform(words, m);
    EXPECT_EQ(Bits(words, size), polar_reference::TransformByMatrix(u)) << m;
    if (size < 64) {
      EXPECT_EQ(words[0] >> size, 0u) << "bits past the block stay zero";
    }
    polar::Transform(words, m);
    EXPECT_EQ(Bits(words, size), u) << m;
  }
}

TEST(PolarTransform, InformationBitsRoundTripInPositionOrder) {
  RngStream rng(RngKey{.seed = 4});
  for (int m : {0, 3, 6, 7, 11}) {
    const size_t size = size_t{1} << m;
    std::vector<bool> info(size);
    for (size_t i = 0; i < size; ++i) info[i] = rng.NextU64() % 3 != 0;
    const InfoSet set = FromBools(info, m);
    std::vector<uint64_t> u(set.mask.size(), 0);
    for (size_t i = 0; i < size; ++i) {
      if (info[i] && (rng.NextU64() & 1u)) u[i / 64] |= uint64_t{1} << (i % 64);
    }
    std::vector<std::byte> packed[2];
    for (Kernels k : KernelSets()) {
      auto& out = packed[k == Kernels::kX86V3];
      out.assign(polar::InfoBytes(set.k), std::byte{0xee});
      ASSERT_TRUE(polar::GatherInfoBits(k, u, set, out.data()));
      EXPECT_TRUE(polar::PaddingIsZero(out.data(), set.k));
      std::vector<uint64_t> back(set.mask.size(), ~uint64_t{0});
      polar::ScatterInfoBits(k, out.data(), set, back);
      EXPECT_EQ(back, u);
      // The bits in increasing position order, as the test reads them.
      polar_reference::ParsedBlock parsed;
      std::vector<std::byte> block(4, std::byte{0});
      block.insert(block.end(), out.begin(), out.end());
      parsed = polar_reference::ParseBlock(block.data(), info);
      EXPECT_EQ(parsed.u, Bits(u, size));
    }
    if (HasX86V3()) {
      EXPECT_EQ(packed[0], packed[1]);
    }
    // A set frozen bit is refused.
    for (size_t i = 0; i < size; ++i) {
      if (info[i]) continue;
      std::vector<uint64_t> bad = u;
      bad[i / 64] |= uint64_t{1} << (i % 64);
      std::vector<std::byte> out(polar::InfoBytes(set.k) + 1);
      EXPECT_FALSE(polar::GatherInfoBits(Kernels::kBaseline, bad, set, out.data()));
      break;
    }
  }
}

// ----- SC -----

// LLRs as the encoder defines them, computed here on their own.
std::vector<float> MappedLlrs(const std::vector<float>& p, size_t size, LlrMode mode) {
  std::vector<float> llr(size, 0.0f);
  for (size_t i = 0; i < p.size(); ++i) {
    if (mode == LlrMode::kSign) {
      llr[i] = p[i] < 0 ? -1.0f : 1.0f;
    } else if (std::fabs(p[i]) < FLT_MIN) {
      llr[i] = p[i] < 0 ? -FLT_MIN : FLT_MIN;
    } else {
      llr[i] = p[i];
    }
  }
  return llr;
}

// Sources that reach every corner of the schedule: Gaussian values, exact zeros and ties, values
// on a coarse grid (many equal magnitudes, so g often cancels to zero), huge values (scaled
// down), subnormals.
std::vector<float> Source(size_t n, int kind, RngStream& rng) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) {
    const double g = rng.Normal();
    switch (kind) {
      case 0:
        p[i] = static_cast<float>(g);
        break;
      case 1:
        p[i] = rng.NextU64() % 4 == 0 ? 0.0f : static_cast<float>(g);
        break;
      case 2:
        p[i] = static_cast<float>(std::round(g * 2) / 2);
        break;
      case 3:
        p[i] = static_cast<float>(g * 1e35);
        break;
      default:
        p[i] = static_cast<float>(g * 1e-39);
        break;
    }
  }
  return p;
}

TEST(PolarSc, FastScheduleOfBothKernelSetsEqualsPlainSc) {
  RngStream rng(RngKey{.seed = 5});
  for (int m = 0; m <= 9; ++m) {
    const size_t size = size_t{1} << m;
    for (int trial = 0; trial < 6; ++trial) {
      // Random sets (every node type appears), and a polarization-weight set.
      std::vector<bool> info(size);
      const uint64_t density = rng.Below(5);
      for (size_t i = 0; i < size; ++i) info[i] = rng.Below(4) < density;
      if (trial == 5) info = polar_reference::PwInfoSet(m, size / 2);
      const InfoSet set = FromBools(info, m);
      const polar::ScPlan plan(set);
      for (LlrMode mode : {LlrMode::kSoft, LlrMode::kSign}) {
        // 11 blocks: a full AVX2 group and a partial one; the last block is a padded tail.
        std::vector<std::vector<float>> g(11), e(11);
        std::vector<polar::ScBlock> blocks(11);
        for (size_t b = 0; b < 11; ++b) {
          const size_t count = b == 10 ? size - size / 3 : size;
          g[b] = Source(count, static_cast<int>((b + trial) % 5), rng);
          e[b] = Source(count, 0, rng);
          blocks[b] = {g[b].data(), b % 2 ? e[b].data() : nullptr, count};
        }
        for (Kernels k : KernelSets()) {
          std::vector<uint64_t> x(11 * set.mask.size());
          ASSERT_TRUE(polar::ScEncode(k, plan, mode, blocks, x));
          for (size_t b = 0; b < 11; ++b) {
            std::vector<float> p = g[b];
            if (b % 2) {
              for (size_t i = 0; i < p.size(); ++i) p[i] += e[b][i];
            }
            float max = 0;
            for (float v : p) max = std::max(max, std::fabs(v));
            if (max >= 0x1p106f) {
              for (float& v : p) v *= 0x1p-24f;
            }
            const std::vector<uint8_t> expected =
                polar_reference::ScCodeword(MappedLlrs(p, size, mode), info);
            ASSERT_EQ(Bits(std::span<const uint64_t>(x).subspan(b * set.mask.size()), size),
                      expected)
                << "m=" << m << " trial " << trial << " block " << b << " kernels "
                << (k == Kernels::kX86V3 ? "x86-64-v3" : "baseline");
            // The frozen positions of u = x F are zero.
            const std::vector<uint8_t> u = polar_reference::TransformByButterflies(expected);
            for (size_t i = 0; i < size; ++i) {
              if (!info[i]) {
                ASSERT_EQ(u[i], 0) << i;
              }
            }
          }
        }
      }
    }
  }
}

TEST(PolarSc, NonFiniteInputIsReported) {
  const InfoSet set = FromBools(polar_reference::PwInfoSet(6, 32), 6);
  const polar::ScPlan plan(set);
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> g(64, 1.0f);
    g[40] = bad;
    const polar::ScBlock block{g.data(), nullptr, 64};
    for (Kernels k : KernelSets()) {
      std::vector<uint64_t> x(1);
      EXPECT_FALSE(polar::ScEncode(k, plan, LlrMode::kSoft, std::span(&block, 1), x));
    }
  }
}

TEST(PolarList, OnePathIsScAndAListOfEveryPathIsMaximumLikelihood) {
  RngStream rng(RngKey{.seed = 6});
  for (int m : {1, 3, 4, 8}) {
    const size_t size = size_t{1} << m;
    const size_t k = m == 8 ? size / 2 : size / 2 + 1;
    const std::vector<bool> info = polar_reference::PwInfoSet(m, k);
    const InfoSet set = FromBools(info, m);
    std::vector<size_t> info_positions;
    for (size_t i = 0; i < size; ++i) {
      if (info[i]) info_positions.push_back(i);
    }
    for (int trial = 0; trial < 8; ++trial) {
      const std::vector<float> llr = MappedLlrs(Source(size, trial % 3, rng), size,
                                                trial % 2 ? LlrMode::kSign : LlrMode::kSoft);
      std::vector<uint64_t> x(set.mask.size());
      polar::ListEncode(llr, set, polar::ListOptions{}, x);
      EXPECT_EQ(Bits(x, size), polar_reference::ScCodeword(llr, info)) << m;
      auto objective = [&](const std::vector<uint8_t>& c) {
        double sum = 0;
        for (size_t i = 0; i < size; ++i) sum += c[i] ? -double{llr[i]} : double{llr[i]};
        return sum;
      };
      if (m > 4) continue;
      // With room for every path the list finds the best codeword of all 2^k.
      polar::ListEncode(llr, set, polar::ListOptions{.list = 1 << k}, x);
      double best = -INFINITY;
      for (uint64_t word = 0; word < (uint64_t{1} << k); ++word) {
        std::vector<uint8_t> u(size, 0);
        for (size_t j = 0; j < k; ++j) u[info_positions[j]] = (word >> j) & 1u;
        best = std::max(best, objective(polar_reference::TransformByButterflies(u)));
      }
      const std::vector<uint8_t> listed = Bits(x, size);
      EXPECT_EQ(objective(listed), best) << "m=" << m << " trial " << trial;
      const std::vector<uint8_t> u = polar_reference::TransformByButterflies(listed);
      for (size_t i = 0; i < size; ++i) {
        if (!info[i]) {
          ASSERT_EQ(u[i], 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace frugal
