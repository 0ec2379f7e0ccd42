#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "compress/quant_util.h"
#include "compress/test_util.h"
#include "frugal/bits.h"

namespace frugal {
namespace {

using testing_compress::EncodeOrDie;
using testing_compress::Gaussian;
using testing_compress::Make;
using testing_compress::RoundTrip;

const char* const kQuantizerSpecs[] = {"none",
                                       "fp16",
                                       "bf16",
                                       "minmax8",
                                       "minmax8:chunk=7,rounding=stochastic",
                                       "qsgd",
                                       "qsgd:levels=2,bucket=5",
                                       "qsgd:levels=500,bucket=8",
                                       "terngrad",
                                       "terngrad:clip=0",
                                       "onebit",
                                       "onebit:ef=1",
                                       "sign",
                                       "signum",
                                       "efsign",
                                       "efsign:ef=0",
                                       "natural",
                                       "polar",
                                       "polar:ef=0,n=4,rate=0.3,mode=sign"};

class QuantizerTest : public ::testing::TestWithParam<const char*> {};

// The payload is exactly kWireHeaderBytes + BodyBits / 8 bytes, for many sizes and shapes.
TEST_P(QuantizerTest, ExactWireBits) {
  auto c = Make(GetParam());
  for (size_t n : {0, 1, 2, 7, 8, 9, 31, 63, 64, 65, 1000, 4097}) {
    for (int shaped = 0; shaped < 2; ++shaped) {
      std::vector<int64_t> shape;
      if (shaped && n % 3 == 0 && n > 0) shape = {3, static_cast<int64_t>(n / 3)};
      TensorInfo t("t", n, shape);
      CompressContext ctx(11, 0, 1);
      std::vector<float> x = Gaussian(n, n);
      std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
      std::optional<uint64_t> bits = c->WireBits(t);
      ASSERT_TRUE(bits.has_value());
      EXPECT_EQ(8 * p.size(), *bits) << GetParam() << " n=" << n;
      EXPECT_EQ(*bits % 8, 0u);
    }
  }
}

// Same seed, rank, step and tensor: the same bytes; the stream depends on each of them.
TEST_P(QuantizerTest, DeterministicFromTheSeed) {
  auto c = Make(GetParam());
  TensorInfo t("layer", 999);
  std::vector<float> x = Gaussian(t.numel, 3);
  auto encode = [&](uint64_t seed, int rank, uint64_t step) {
    CompressContext ctx(seed, rank, 4);
    ctx.set_step(step);
    return EncodeOrDie(*c, x, t, ctx);
  };
  EXPECT_EQ(encode(1, 2, 3), encode(1, 2, 3));
  std::string spec = GetParam();
  bool random = spec.find("qsgd") == 0 || spec.find("terngrad") == 0 || spec.find("natural") == 0 ||
                spec.find("stochastic") != std::string::npos;
  if (random) {
    EXPECT_NE(encode(1, 2, 3), encode(2, 2, 3));
    EXPECT_NE(encode(1, 2, 3), encode(1, 1, 3));
    EXPECT_NE(encode(1, 2, 3), encode(1, 2, 4));
  }
}

// DecodeOverwrite writes what Decode adds into zeros, bit for bit, whatever the output held; a
// truncated payload leaves the output unchanged or zero.
TEST_P(QuantizerTest, DecodeOverwriteIsDecodeIntoZeros) {
  auto c = Make(GetParam());
  for (size_t n : {1, 7, 300, 4097}) {
    TensorInfo t("t", n);
    CompressContext ctx(11, 0, 1);
    std::vector<float> x = Gaussian(t.numel, 9);
    x[0] = 0.0f;
    std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
    std::vector<float> added(t.numel, 0.0f), written(t.numel, -3.5f);
    ASSERT_TRUE(c->Decode(p, t, ctx, added).ok());
    ASSERT_TRUE(c->DecodeOverwrite(p, t, ctx, written).ok());
    EXPECT_EQ(std::memcmp(added.data(), written.data(), 4 * n), 0) << GetParam() << " n=" << n;
    std::vector<float> before(t.numel, -3.5f), after = before;
    p.resize(p.size() - 1);
    ASSERT_FALSE(c->DecodeOverwrite(p, t, ctx, after).ok()) << GetParam();
    for (size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(after[i] == before[i] || after[i] == 0.0f) << GetParam() << " " << i;
    }
  }
}

// Decode adds into its output.
TEST_P(QuantizerTest, DecodeAccumulates) {
  auto c = Make(GetParam());
  TensorInfo t("t", 300);
  CompressContext ctx(11, 0, 1);
  std::vector<float> x = Gaussian(t.numel, 5);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  std::vector<float> once(t.numel, 0.0f), twice(t.numel, 0.5f);
  ASSERT_TRUE(c->Decode(p, t, ctx, once).ok());
  ASSERT_TRUE(c->Decode(p, t, ctx, twice).ok());
  for (size_t i = 0; i < t.numel; ++i) EXPECT_FLOAT_EQ(twice[i], once[i] + 0.5f) << i;
}

TEST_P(QuantizerTest, WrongBufferSizeIsACallerBug) {
  auto c = Make(GetParam());
  TensorInfo t("t", 10);
  CompressContext ctx;
  std::vector<float> x(9, 1.0f);
  std::vector<std::byte> out;
  EXPECT_THROW((void)c->Encode(x, t, ctx, out), CheckError);
}

INSTANTIATE_TEST_SUITE_P(Quantizers, QuantizerTest, ::testing::ValuesIn(kQuantizerSpecs),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// Monte Carlo check of E[D(C(x))] = x: over `trials` steps, every element's mean is within
// 5 standard errors (its empirical standard deviation / sqrt(trials)) plus a float slack.
void ExpectUnbiased(const std::string& spec, const std::vector<float>& x, int trials) {
  auto c = Make(spec);
  ASSERT_TRUE(c->traits().unbiased) << spec;
  TensorInfo t("u", x.size());
  std::vector<double> sum(x.size(), 0), sq(x.size(), 0);
  for (int s = 0; s < trials; ++s) {
    CompressContext ctx(123, 0, 1);
    ctx.set_step(static_cast<uint64_t>(s));
    std::vector<float> y = RoundTrip(*c, x, t, ctx);
    for (size_t i = 0; i < x.size(); ++i) {
      sum[i] += y[i];
      sq[i] += static_cast<double>(y[i]) * y[i];
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    double mean = sum[i] / trials;
    double var = std::max(0.0, sq[i] / trials - mean * mean);
    double tolerance = 5 * std::sqrt(var / trials) + 1e-6 * std::fabs(x[i]) + 1e-30;
    EXPECT_NEAR(mean, x[i], tolerance) << spec << " element " << i;
  }
}

TEST(Unbiased, Qsgd) { ExpectUnbiased("qsgd:levels=4,bucket=16", Gaussian(48, 1), 4000); }
TEST(Unbiased, QsgdOneLevel) { ExpectUnbiased("qsgd:levels=1,bucket=64", Gaussian(64, 2), 4000); }
TEST(Unbiased, TernGradWithoutClipping) {
  ExpectUnbiased("terngrad:clip=0", Gaussian(64, 3), 4000);
}
TEST(Unbiased, Natural) {
  std::vector<float> x = Gaussian(64, 4);
  x[0] = 1e-40f;  // a subnormal
  x[1] = -3.0f;   // between powers of two
  x[2] = 0.0f;
  x[3] = 4.0f;  // a power of two: exact
  ExpectUnbiased("natural", x, 4000);
}
TEST(Unbiased, MinMax8Stochastic) {
  ExpectUnbiased("minmax8:chunk=32,rounding=stochastic", Gaussian(64, 5), 4000);
}
TEST(Unbiased, None) { ExpectUnbiased("none", Gaussian(16, 6), 3); }

// QSGD's variance bound (Lemma 3.1): E||Q(v) - v||^2 <= min(d/s^2, sqrt(d)/s) ||v||^2 per bucket.
TEST(Qsgd, VarianceBound) {
  for (int s : {1, 2, 4, 15}) {
    for (size_t d : {8, 64, 512}) {
      std::string spec = "qsgd:levels=" + std::to_string(s) + ",bucket=" + std::to_string(d);
      auto c = Make(spec);
      std::vector<float> v = Gaussian(d, s * 1000 + d);
      double norm2 = 0;
      for (float x : v) norm2 += double{x} * x;
      TensorInfo t("v", d);
      double err = 0;
      const int trials = 400;
      for (int k = 0; k < trials; ++k) {
        CompressContext ctx(7, 0, 1);
        ctx.set_step(k);
        std::vector<float> q = RoundTrip(*c, v, t, ctx);
        for (size_t i = 0; i < d; ++i) err += (double{q[i]} - v[i]) * (double{q[i]} - v[i]);
      }
      double bound = std::min(double(d) / (s * s), std::sqrt(double(d)) / s) * norm2;
      EXPECT_LE(err / trials, bound * 1.05) << spec;
    }
  }
}

TEST(Qsgd, ValuesAreLevelsOfTheBucketNorm) {
  auto c = Make("qsgd:levels=4,bucket=10");
  std::vector<float> x = Gaussian(25, 9);
  TensorInfo t("x", x.size());
  CompressContext ctx(1, 0, 1);
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  for (size_t b = 0; b < 3; ++b) {
    double norm2 = 0;
    for (size_t i = 10 * b; i < std::min<size_t>(25, 10 * b + 10); ++i)
      norm2 += double{x[i]} * x[i];
    float norm = static_cast<float>(std::sqrt(norm2));
    for (size_t i = 10 * b; i < std::min<size_t>(25, 10 * b + 10); ++i) {
      double level = std::fabs(y[i]) / (norm / 4);
      EXPECT_NEAR(level, std::round(level), 1e-4) << i;
      EXPECT_LE(std::round(level), 4);
      // The level is floor or ceil of |x| * s / norm.
      double r = std::fabs(x[i]) * 4 / norm;
      EXPECT_TRUE(std::round(level) == std::floor(r) || std::round(level) == std::ceil(r)) << i;
      if (y[i] != 0.0f) {
        EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i]));
      }
    }
  }
}

TEST(Qsgd, EliasGammaSizeIsReported) {
  auto c = Make("qsgd:levels=15,bucket=512");
  std::vector<float> x = Gaussian(2000, 3);
  TensorInfo t("x", x.size());
  CompressContext ctx(1, 0, 1);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  std::vector<float> y(x.size(), 0.0f);
  ASSERT_TRUE(c->Decode(p, t, ctx, y).ok());
  // Recompute the size from the decoded levels.
  uint64_t expected = 32 * 4;
  for (size_t i = 0; i < x.size(); ++i) {
    size_t b = i / 512;
    double norm2 = 0;
    for (size_t k = 512 * b; k < std::min<size_t>(x.size(), 512 * b + 512); ++k) {
      norm2 += double{x[k]} * x[k];
    }
    float norm = static_cast<float>(std::sqrt(norm2));
    uint64_t level = static_cast<uint64_t>(std::llround(std::fabs(y[i]) / (norm / 15)));
    expected += EliasGammaLength(level + 1) + (level != 0 ? 1 : 0);
  }
  std::optional<uint64_t> bits = c->EntropyCodedBits(p);
  ASSERT_TRUE(bits.has_value());
  EXPECT_EQ(*bits, expected);
  EXPECT_LT(*bits, 8 * (p.size() - kWireHeaderBytes));  // small levels are common: shorter
  EXPECT_FALSE(Make("fp16")->EntropyCodedBits(p).has_value());
}

// A payload whose last code is invalid (level 3 of 2), past the first blocks the decoder unpacks,
// is refused by Decode and DecodeOverwrite before either writes anything.
TEST(Qsgd, InvalidLastCodeLeavesTheOutputUntouched) {
  auto c = Make("qsgd:levels=2,bucket=512");
  const size_t n = 20001;
  std::vector<float> x = Gaussian(n, 4);
  TensorInfo t("x", n);
  CompressContext ctx(1, 0, 1);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  const size_t codes_at = kWireHeaderBytes + 4 * ((n + 511) / 512);
  const size_t width = 8 * (p.size() - codes_at) / n;  // 3: 2 bits of level, 1 of sign
  ASSERT_EQ(width, 3u);
  for (size_t bit = (n - 1) * width; bit < n * width; ++bit) {
    p[codes_at + bit / 8] |= std::byte{static_cast<uint8_t>(1u << (bit % 8))};
  }
  for (bool overwrite : {false, true}) {
    std::vector<float> out(n, 0.25f);
    Status st = overwrite ? c->DecodeOverwrite(p, t, ctx, out) : c->Decode(p, t, ctx, out);
    ASSERT_FALSE(st.ok()) << overwrite;
    EXPECT_NE(st.message().find("invalid code among elements [16384, 20001)"), std::string::npos)
        << st.message();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 0.25f) << overwrite << " " << i;
  }
}

// Fixed-width code packing against the bit-by-bit reference (BitWriter), for every width.
TEST(CodePacking, MatchesBitWriterForEveryWidth) {
  for (int width = 1; width <= 8; ++width) {
    for (size_t n : {0, 1, 5, 8, 9, 15, 16, 17, 63, 64, 100}) {
      RngStream rng(RngKey{.seed = static_cast<uint64_t>(width), .step = n});
      std::vector<uint8_t> codes(n);
      for (auto& c : codes) c = static_cast<uint8_t>(rng.Below(uint64_t{1} << width));
      std::vector<std::byte> expected;
      BitWriter writer(&expected);
      for (uint8_t c : codes) writer.Write(c, width);
      std::vector<std::byte> packed(compress_internal::CodeBytes(n, width), std::byte{0xAB});
      compress_internal::PackCodes(codes.data(), n, width, packed.data());
      ASSERT_EQ(packed, expected) << "width " << width << " n " << n;
      EXPECT_TRUE(compress_internal::CodePaddingIsZero(packed.data(), n, width));
      std::vector<uint8_t> back(n, 0xFF);
      compress_internal::UnpackCodes(packed.data(), n, width, back.data());
      ASSERT_EQ(back, codes) << "width " << width << " n " << n;
    }
  }
}

// Wide QSGD codes (more than 8 bits) take the general bit packer: same values as the rule says.
TEST(Qsgd, WideCodesRoundTrip) {
  auto c = Make("qsgd:levels=1000,bucket=32");
  std::vector<float> x = Gaussian(100, 12);
  TensorInfo t("x", x.size());
  CompressContext ctx(1, 0, 1);
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  for (size_t b = 0; b * 32 < x.size(); ++b) {
    double norm2 = 0;
    for (size_t i = 32 * b; i < std::min<size_t>(x.size(), 32 * b + 32); ++i) {
      norm2 += double{x[i]} * x[i];
    }
    float unit = static_cast<float>(std::sqrt(norm2)) / 1000;
    for (size_t i = 32 * b; i < std::min<size_t>(x.size(), 32 * b + 32); ++i) {
      ASSERT_LE(std::fabs(y[i] - x[i]), unit * 1.0001f) << i;
    }
  }
}

TEST(None, Lossless) {
  std::vector<float> x = Gaussian(1001, 1);
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = -0.0f;
  x[2] = std::numeric_limits<float>::denorm_min();
  auto c = Make("none");
  TensorInfo t("x", x.size());
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(y[i] + 0.0f), std::bit_cast<uint32_t>(x[i] + 0.0f)) << i;
  EXPECT_TRUE(c->traits().lossless);
  EXPECT_TRUE(c->traits().summable);
}

// Every finite fp16 value survives a round trip; float32 values round to the nearest fp16.
TEST(Fp16, RoundTripsEveryHalfAndRoundsToNearest) {
  auto c = Make("fp16");
  std::vector<float> halves;
  for (uint32_t h = 0; h < 65536; ++h) {
    uint32_t exp = (h >> 10) & 0x1f;
    if (exp == 0x1f) continue;  // inf and NaN
    float mant = static_cast<float>(h & 0x3ff);
    float v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024.0f + mant, int(exp) - 25);
    halves.push_back((h & 0x8000) ? -v : v);
  }
  TensorInfo t("h", halves.size());
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, halves, t, ctx);
  for (size_t i = 0; i < halves.size(); ++i) ASSERT_EQ(y[i], halves[i]) << i;
  // Rounding of arbitrary floats: the error is at most half an fp16 ulp.
  std::vector<float> x = Gaussian(5000, 7, 100.0f);
  TensorInfo tx("x", x.size());
  std::vector<float> z = RoundTrip(*c, x, tx, ctx);
  for (size_t i = 0; i < x.size(); ++i) {
    float a = std::fabs(x[i]);
    int e = std::max(-14, static_cast<int>(std::floor(std::log2(a))));
    float half_ulp = std::ldexp(1.0f, e - 11);
    ASSERT_LE(std::fabs(z[i] - x[i]), half_ulp) << x[i];
  }
}

TEST(Fp16, SaturatesAndKeepsNaN) {
  auto c = Make("fp16");
  std::vector<float> x(19, 1.0f);
  x[0] = 1e6f;
  x[1] = -1e6f;
  x[2] = 65519.0f;  // rounds to 65504
  x[3] = std::numeric_limits<float>::infinity();
  x[4] = std::numeric_limits<float>::quiet_NaN();
  x[5] = 1e-9f;      // below the smallest subnormal: zero
  x[17] = 70000.0f;  // in the tail handled without SIMD
  x[18] = std::numeric_limits<float>::quiet_NaN();
  TensorInfo t("x", x.size());
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  EXPECT_EQ(y[0], 65504.0f);
  EXPECT_EQ(y[1], -65504.0f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], 65504.0f);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_EQ(y[17], 65504.0f);
  EXPECT_TRUE(std::isnan(y[18]));
}

TEST(Bf16, RoundsToNearestEvenAndSaturates) {
  auto c = Make("bf16");
  std::vector<float> x = {1.0f,
                          std::bit_cast<float>(0x3F808000u),  // tie: rounds to even (1.0)
                          std::bit_cast<float>(0x3F818000u),  // tie: rounds to even (up)
                          std::bit_cast<float>(0x3F808001u),  // above the tie: up
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -2.5f};
  TensorInfo t("x", x.size());
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[0]), 0x3F800000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[1]), 0x3F800000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[2]), 0x3F820000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[3]), 0x3F810000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[4]), 0x7F7F0000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[5]), 0xFF7F0000u);
  EXPECT_TRUE(std::isinf(y[6]));
  EXPECT_TRUE(std::isnan(y[7]));
  EXPECT_EQ(y[8], -2.5f);
}

TEST(MinMax8, NearestRoundingErrorIsHalfAStep) {
  auto c = Make("minmax8:chunk=100");
  std::vector<float> x = Gaussian(1050, 3);
  x[200] = x[201] = x[202] = 0.25f;
  TensorInfo t("x", x.size());
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  for (size_t chunk = 0; chunk * 100 < x.size(); ++chunk) {
    size_t end = std::min(x.size(), chunk * 100 + 100);
    float lo = *std::min_element(x.begin() + chunk * 100, x.begin() + end);
    float hi = *std::max_element(x.begin() + chunk * 100, x.begin() + end);
    float step = (hi - lo) / 255;
    for (size_t i = chunk * 100; i < end; ++i) {
      ASSERT_LE(std::fabs(y[i] - x[i]), step / 2 * 1.001f + 1e-6f) << i;
    }
  }
  // A constant chunk decodes exactly.
  std::vector<float> flat(50, -1.5f);
  TensorInfo tf("f", flat.size());
  std::vector<float> z = RoundTrip(*c, flat, tf, ctx);
  for (float v : z) EXPECT_EQ(v, -1.5f);
}

TEST(Quantizers, NonFiniteInputIsRejectedWhereItCannotBeEncoded) {
  for (const char* spec : {"minmax8", "qsgd", "terngrad", "onebit", "efsign:ef=0", "natural"}) {
    auto c = Make(spec);
    std::vector<float> x(40, 1.0f);
    x[33] = std::numeric_limits<float>::infinity();
    TensorInfo t("x", x.size());
    CompressContext ctx;
    std::vector<std::byte> out;
    EXPECT_EQ(c->Encode(x, t, ctx, out).code(), StatusCode::kInvalidArgument) << spec;
    x[33] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(c->Encode(x, t, ctx, out).code(), StatusCode::kInvalidArgument) << spec;
  }
}

TEST(TernGrad, ValuesAreZeroOrPlusMinusTheScale) {
  auto c = Make("terngrad");
  std::vector<float> x = Gaussian(3001, 8);
  x[5] = 40.0f;  // an outlier, clipped at 2.5 sigma
  TensorInfo t("x", x.size());
  CompressContext ctx(3, 0, 1);
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  double ss = 0;
  for (float v : x) ss += double{v} * v;
  float sigma = static_cast<float>(std::sqrt(ss / x.size()));
  std::set<float> values(y.begin(), y.end());
  float s = *values.rbegin();
  EXPECT_NEAR(s, 2.5f * sigma, 1e-4f);  // the outlier was clipped to 2.5 sigma
  for (float v : values) EXPECT_TRUE(v == 0.0f || v == s || v == -s) << v;
  EXPECT_EQ(y[5], s);  // clipped to the scale: kept with probability 1
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] != 0.0f) {
      EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i]));
    }
  }
}

TEST(Sign, ValuesAndSignOfZero) {
  auto c = Make("sign");
  std::vector<float> x = {
      0.0f, -0.0f, 1e-30f, -1e-30f, 5.0f, -5.0f, std::numeric_limits<float>::quiet_NaN(),
      2.0f, -7.0f};
  TensorInfo t("x", x.size());
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  std::vector<float> expected = {1, 1, 1, -1, 1, -1, 1, 1, -1};
  EXPECT_EQ(y, expected);
  EXPECT_EQ(*c->WireBits(t), 8 * (kWireHeaderBytes + 2));
}

TEST(Signum, SignOfTheMomentum) {
  auto c = Make("signum:beta=0.5");
  TensorInfo t("x", 2);
  CompressContext ctx;
  // m1 = 0.5 * g1 = (1, -1); m2 = 0.5 * m1 + 0.5 * g2 = (0.5 - 1.5, -0.5 + 0.25) = (-1, -0.25).
  std::vector<float> g1 = {2.0f, -2.0f}, g2 = {-3.0f, 0.5f};
  EXPECT_EQ(RoundTrip(*c, g1, t, ctx), (std::vector<float>{1, -1}));
  EXPECT_EQ(RoundTrip(*c, g2, t, ctx), (std::vector<float>{-1, -1}));
}

TEST(EfSign, ScaleIsTheMeanAbsoluteValue) {
  auto c = Make("efsign:ef=0");
  std::vector<float> x = Gaussian(1003, 2);
  double l1 = 0;
  for (float v : x) l1 += std::fabs(v);
  float scale = static_cast<float>(l1 / x.size());
  TensorInfo t("x", x.size());
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] < 0 ? -scale : scale) << i;
}

TEST(OneBit, PerColumnMeansOfEachSign) {
  auto c = Make("onebit");
  const size_t rows = 7, cols = 5;
  std::vector<float> x = Gaussian(rows * cols, 4);
  TensorInfo t("w", rows * cols, {static_cast<int64_t>(rows), static_cast<int64_t>(cols)});
  CompressContext ctx;
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  for (size_t j = 0; j < cols; ++j) {
    double pos = 0, neg = 0, sum = 0, decoded_sum = 0;
    int np = 0, nn = 0;
    for (size_t r = 0; r < rows; ++r) {
      float v = x[r * cols + j];
      sum += v;
      decoded_sum += y[r * cols + j];
      if (v < 0)
        neg += v, ++nn;
      else
        pos += v, ++np;
    }
    for (size_t r = 0; r < rows; ++r) {
      float v = x[r * cols + j];
      float expected = static_cast<float>(v < 0 ? neg / nn : pos / np);
      ASSERT_FLOAT_EQ(y[r * cols + j], expected) << r << "," << j;
    }
    EXPECT_NEAR(decoded_sum, sum, 1e-5);  // the column sum is preserved
  }
}

TEST(Natural, ValuesArePowersOfTwoAroundTheInput) {
  auto c = Make("natural");
  std::vector<float> x = Gaussian(2000, 5, 1e-3f);
  x[0] = std::numeric_limits<float>::max();
  x[1] = 0.0f;
  x[2] = -std::numeric_limits<float>::denorm_min();
  TensorInfo t("x", x.size());
  CompressContext ctx(2, 0, 1);
  std::vector<float> y = RoundTrip(*c, x, t, ctx);
  EXPECT_EQ(y[0], std::ldexp(1.0f, 127));
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(y[2] == 0.0f || y[2] == -std::ldexp(1.0f, -126));
  for (size_t i = 3; i < x.size(); ++i) {
    ASSERT_NE(y[i], 0.0f);
    int e;
    float m = std::frexp(std::fabs(y[i]), &e);
    ASSERT_EQ(m, 0.5f) << y[i];  // a power of two
    ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i]));
    float lo = std::ldexp(1.0f, std::ilogb(x[i]));
    ASSERT_TRUE(std::fabs(y[i]) == lo || std::fabs(y[i]) == 2 * lo) << x[i] << " " << y[i];
  }
  EXPECT_EQ(*c->WireBits(t), 8 * (kWireHeaderBytes + 2000 + 250));
}

}  // namespace
}  // namespace frugal
