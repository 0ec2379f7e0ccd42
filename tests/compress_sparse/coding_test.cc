#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "compress/sparse_coding.h"
#include "frugal/bits.h"
#include "frugal/random.h"

namespace frugal::sparse {
namespace {

// `count` distinct sorted indices below n.
std::vector<uint32_t> RandomIndices(uint64_t n, size_t count, uint64_t seed) {
  RngStream rng({.seed = seed});
  std::vector<uint8_t> taken(n, 0);
  std::vector<uint32_t> out;
  while (out.size() < count) {
    uint32_t i = static_cast<uint32_t>(rng.Below(n));
    if (!taken[i]) {
      taken[i] = 1;
      out.push_back(i);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t GammaBits(std::span<const uint32_t> indices) {
  uint64_t bits = 0;
  int64_t prev = -1;
  for (uint32_t i : indices) {
    bits += static_cast<uint64_t>(EliasGammaLength(static_cast<uint64_t>(i - prev)));
    prev = i;
  }
  return bits;
}

uint64_t RiceBits(std::span<const uint32_t> indices, int b) {
  uint64_t bits = 0;
  int64_t prev = -1;
  for (uint32_t i : indices) {
    bits += (static_cast<uint64_t>(i - prev - 1) >> b) + 1 + static_cast<uint64_t>(b);
    prev = i;
  }
  return bits;
}

TEST(IndexCodingTest, RoundTripsAtEveryDensity) {
  for (uint64_t n : {1ull, 2ull, 3ull, 1000ull, 65536ull, 1000003ull}) {
    for (double density : {0.0, 0.0001, 0.01, 0.1, 0.5, 1.0}) {
      size_t count = static_cast<size_t>(density * static_cast<double>(n));
      std::vector<uint32_t> indices = RandomIndices(n, count, n + count);
      std::vector<std::byte> buf;
      AppendIndexSection(indices, n, &buf);
      IndexCodePlan plan = PlanIndexCode(indices, n);
      ASSERT_EQ(buf.size(), IndexSectionBytes(plan));
      EXPECT_LE(buf.size(), MaxIndexSectionBytes(count, n));
      std::vector<uint32_t> back;
      auto used = ReadIndexSection(buf, n, count, &back);
      ASSERT_TRUE(used.ok()) << used.status().ToString();
      EXPECT_EQ(*used, buf.size());
      EXPECT_EQ(back, indices) << "n=" << n << " density=" << density;
    }
  }
}

// The plan is the shortest of the fixed code, Elias-gamma and the Rice parameters it tries, and
// its length is exactly what the codes take; never more than ceil(log2 n) bits per index.
TEST(IndexCodingTest, PlanIsTheShortestCode) {
  const uint64_t n = 25000000;
  for (double density : {0.0005, 0.001, 0.01, 0.1, 0.6}) {
    size_t count = static_cast<size_t>(density * static_cast<double>(n) / 50);
    std::vector<uint32_t> indices = RandomIndices(n / 50, count, 7);
    const uint64_t small_n = n / 50;
    IndexCodePlan plan = PlanIndexCode(indices, small_n);
    uint64_t fixed = count * static_cast<uint64_t>(BitsFor(small_n));
    uint64_t best_rice = UINT64_MAX;
    for (int b = 0; b < 32; ++b) best_rice = std::min(best_rice, RiceBits(indices, b));
    uint64_t best = std::min({fixed, GammaBits(indices), best_rice});
    EXPECT_LE(plan.bits, fixed);
    // The Rice parameters tried are those near log2 of the mean gap, within a few percent of the
    // best over every parameter.
    EXPECT_LE(static_cast<double>(plan.bits), 1.03 * static_cast<double>(best)) << density;
    switch (plan.coding) {
      case IndexCoding::kFixed:
        EXPECT_EQ(plan.bits, fixed);
        break;
      case IndexCoding::kGamma:
        EXPECT_EQ(plan.bits, GammaBits(indices));
        break;
      case IndexCoding::kRice:
        EXPECT_EQ(plan.bits, RiceBits(indices, plan.rice_bits));
        break;
    }
  }
}

// The fixed code is laid out exactly as frugal::BitWriter writes fields.
TEST(IndexCodingTest, FixedCodeMatchesBitWriter) {
  const uint64_t n = 1000;
  std::vector<uint32_t> indices;
  for (uint32_t i = 0; i < n; i += 3) indices.push_back(i);
  IndexCodePlan plan{IndexCoding::kFixed, 0, indices.size() * static_cast<uint64_t>(BitsFor(n))};
  std::vector<std::byte> buf(IndexSectionBytes(plan));
  WriteIndexSection(indices, n, plan, buf.data());
  std::vector<std::byte> want;
  BitWriter writer(&want);
  for (uint32_t i : indices) writer.Write(i, BitsFor(n));
  ASSERT_EQ(buf.size(), kIndexSectionHeaderBytes + want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), buf.begin() + kIndexSectionHeaderBytes));
}

TEST(IndexCodingTest, DeltaCodingBeatsFixedWidthWhenSparse) {
  const uint64_t n = 25000000;
  std::vector<uint32_t> indices = RandomIndices(n, 25000, 3);  // 0.1%
  IndexCodePlan plan = PlanIndexCode(indices, n);
  EXPECT_NE(plan.coding, IndexCoding::kFixed);
  EXPECT_LT(static_cast<double>(plan.bits) / 25000.0, 13.0);  // vs 25 bits fixed
}

TEST(IndexCodingTest, ExtremeGaps) {
  const uint64_t n = uint64_t{1} << 32;
  std::vector<uint32_t> indices = {0, 1, 0x80000000u, 0xfffffffeu, 0xffffffffu};
  for (IndexCoding coding : {IndexCoding::kFixed, IndexCoding::kGamma, IndexCoding::kRice}) {
    for (int b : {0, 5, 31}) {
      if (coding != IndexCoding::kRice && b != 0) continue;
      IndexCodePlan plan{coding, b, 0};
      plan.bits = coding == IndexCoding::kFixed   ? indices.size() * 32
                  : coding == IndexCoding::kGamma ? GammaBits(indices)
                                                  : RiceBits(indices, b);
      if (plan.bits > (1u << 20)) continue;  // Rice with tiny b on 2^31 gaps: too long to test
      std::vector<std::byte> buf(IndexSectionBytes(plan));
      WriteIndexSection(indices, n, plan, buf.data());
      std::vector<uint32_t> back;
      auto used = ReadIndexSection(buf, n, indices.size(), &back);
      ASSERT_TRUE(used.ok()) << used.status().ToString();
      EXPECT_EQ(back, indices);
    }
  }
}

TEST(IndexCodingTest, RejectsMalformedSections) {
  const uint64_t n = 100000;
  std::vector<uint32_t> indices = RandomIndices(n, 300, 5);
  std::vector<std::byte> good;
  AppendIndexSection(indices, n, &good);
  std::vector<uint32_t> back;
  // Every truncation fails.
  for (size_t len = 0; len < good.size(); ++len) {
    std::span<const std::byte> cut(good.data(), len);
    auto r = ReadIndexSection(cut, n, indices.size(), &back);
    EXPECT_FALSE(r.ok()) << len;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kMalformed);
    }
  }
  auto bad = good;
  bad[0] = std::byte{7};  // unknown coding
  EXPECT_FALSE(ReadIndexSection(bad, n, 300, &back).ok());
  bad = good;
  uint32_t huge = 0xffffffffu;
  std::memcpy(bad.data() + 2, &huge, 4);  // count beyond n and the limit
  EXPECT_FALSE(ReadIndexSection(bad, n, 300, &back).ok());
  EXPECT_FALSE(ReadIndexSection(good, n, 299, &back).ok());  // more than the caller allows
  EXPECT_FALSE(ReadIndexSection(good, indices.back(), 300, &back).ok());  // index out of range
  // Fixed code with a repeated index.
  std::vector<uint32_t> dense(1000);
  for (uint32_t i = 0; i < 1000; ++i) dense[i] = i;
  IndexCodePlan plan{IndexCoding::kFixed, 0, uint64_t{1000} * BitsFor(1000)};
  std::vector<std::byte> fixed(IndexSectionBytes(plan));
  WriteIndexSection(dense, 1000, plan, fixed.data());
  ASSERT_TRUE(ReadIndexSection(fixed, 1000, 1000, &back).ok());
  fixed[kIndexSectionHeaderBytes + 2] = fixed[kIndexSectionHeaderBytes + 1];
  EXPECT_FALSE(ReadIndexSection(fixed, 1000, 1000, &back).ok());
}

// Random corruption never crashes, and whatever decodes is valid.
TEST(IndexCodingTest, CorruptedSectionsStayInBounds) {
  const uint64_t n = 5000;
  RngStream rng({.seed = 77});
  std::vector<uint32_t> back;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint32_t> indices = RandomIndices(n, 1 + rng.Below(200), trial);
    std::vector<std::byte> buf;
    AppendIndexSection(indices, n, &buf);
    int flips = 1 + static_cast<int>(rng.Below(4));
    for (int f = 0; f < flips; ++f) {
      size_t pos = rng.Below(buf.size());
      buf[pos] ^= static_cast<std::byte>(1u << rng.Below(8));
    }
    auto r = ReadIndexSection(buf, n, 300, &back);
    if (!r.ok()) continue;
    EXPECT_LE(*r, buf.size());
    for (size_t i = 0; i < back.size(); ++i) {
      ASSERT_LT(back[i], n);
      if (i > 0) {
        ASSERT_GT(back[i], back[i - 1]);
      }
    }
  }
}

TEST(ValueSectionTest, FloatsAndSigns) {
  std::vector<float> values = {1.5f, -2.0f, 0.0f, -0.0f, 3e-39f, -7.0f, 8.0f, 9.0f, -1.0f};
  std::vector<std::byte> buf;
  AppendFloats(values, &buf);
  AppendSigns(values, &buf);
  ASSERT_EQ(buf.size(), values.size() * 4 + 2);
  std::vector<float> back;
  auto used = ReadFloats(buf, values.size(), &back);
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(std::memcmp(back.data(), values.data(), values.size() * 4), 0);
  std::vector<uint8_t> negative;
  auto signs = ReadSigns(std::span(buf).subspan(*used), values.size(), &negative);
  ASSERT_TRUE(signs.ok());
  EXPECT_EQ(negative, (std::vector<uint8_t>{0, 1, 0, 1, 0, 1, 0, 0, 1}));
  EXPECT_FALSE(ReadFloats(std::span(buf).first(35), 9, &back).ok());
  auto bad = buf;
  bad.back() |= std::byte{0x80};  // a padding bit
  EXPECT_FALSE(ReadSigns(std::span(bad).subspan(*used), values.size(), &negative).ok());
}

}  // namespace
}  // namespace frugal::sparse
