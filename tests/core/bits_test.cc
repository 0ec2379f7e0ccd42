#include "frugal/bits.h"

#include <gtest/gtest.h>

#include "frugal/crc.h"
#include "frugal/random.h"

namespace frugal {
namespace {

TEST(BitsTest, RoundTripMixedWidths) {
  RngStream rng({.seed = 1});
  std::vector<std::pair<uint64_t, int>> fields;
  std::vector<std::byte> buf;
  BitWriter w(&buf);
  size_t total = 0;
  for (int i = 0; i < 5000; ++i) {
    int width = static_cast<int>(rng.Below(65));
    uint64_t v = rng.NextU64();
    if (width < 64) v &= (uint64_t{1} << width) - 1;
    fields.emplace_back(v, width);
    w.Write(v, width);
    total += width;
  }
  EXPECT_EQ(w.bits_written(), total);
  EXPECT_EQ(buf.size(), (total + 7) / 8);
  BitReader r(buf);
  for (auto [v, width] : fields) {
    auto got = r.Read(width);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, v);
  }
  EXPECT_LT(r.bits_left(), 8u);
}

TEST(BitsTest, TruncatedReadIsMalformed) {
  std::vector<std::byte> buf;
  BitWriter w(&buf);
  w.Write(0x1ff, 9);
  BitReader r(buf);
  ASSERT_TRUE(r.Read(9).ok());
  auto bad = r.Read(8);
  EXPECT_EQ(bad.status().code(), StatusCode::kMalformed);
}

TEST(BitsTest, EliasGamma) {
  std::vector<std::byte> buf;
  BitWriter w(&buf);
  std::vector<uint64_t> values = {1, 2, 3, 4, 5, 17, 1000, 1ULL << 40, ~0ULL};
  size_t expected_bits = 0;
  for (uint64_t v : values) {
    w.WriteEliasGamma(v);
    expected_bits += EliasGammaLength(v);
  }
  EXPECT_EQ(w.bits_written(), expected_bits);
  EXPECT_EQ(EliasGammaLength(1), 1);
  EXPECT_EQ(EliasGammaLength(4), 5);
  BitReader r(buf);
  for (uint64_t v : values) {
    auto got = r.ReadEliasGamma();
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, v);
  }
  std::vector<std::byte> zeros(16, std::byte{0});
  BitReader z(zeros);
  EXPECT_EQ(z.ReadEliasGamma().status().code(), StatusCode::kMalformed);
}

TEST(BitsTest, BitsFor) {
  EXPECT_EQ(BitsFor(0), 0);
  EXPECT_EQ(BitsFor(1), 0);
  EXPECT_EQ(BitsFor(2), 1);
  EXPECT_EQ(BitsFor(3), 2);
  EXPECT_EQ(BitsFor(1024), 10);
  EXPECT_EQ(BitsFor(1025), 11);
}

TEST(CrcTest, KnownVector) {
  std::string s = "123456789";
  EXPECT_EQ(Crc32(std::as_bytes(std::span(s))), 0xCBF43926u);
}

}  // namespace
}  // namespace frugal
