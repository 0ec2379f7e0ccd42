#include <gtest/gtest.h>

#include <cstring>

#include "compress/test_util.h"

namespace frugal {
namespace {

using testing_compress::EncodeOrDie;
using testing_compress::Gaussian;
using testing_compress::Make;

const char* const kSpecs[] = {"none",
                              "fp16",
                              "bf16",
                              "minmax8:chunk=16",
                              "qsgd",
                              "qsgd:levels=3,bucket=8",
                              "qsgd:levels=500,bucket=8",
                              "terngrad",
                              "onebit",
                              "sign",
                              "signum",
                              "efsign:ef=0",
                              "natural",
                              "polar:ef=0,n=4",
                              "polar:ef=0,mode=sign,rate=0.9"};

class WireTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WireTest, HeaderFields) {
  auto c = Make(GetParam());
  TensorInfo t("w", 37, {37});
  CompressContext ctx(5, 0, 1);
  std::vector<float> x = Gaussian(t.numel, 1);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  auto h = ReadWireHeader(p);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->version, kWireVersion);
  EXPECT_EQ(h->id, static_cast<uint8_t>(c->id()));
  EXPECT_EQ(h->numel, 37u);
  EXPECT_EQ(h->body_bytes, p.size() - kWireHeaderBytes);
  EXPECT_EQ(h->params_crc, SpecCrc(c->spec()));
}

// Every prefix and every extension of a valid payload is rejected, and the output is untouched.
TEST_P(WireTest, TruncatedAndOversizedPayloadsAreRejected) {
  auto c = Make(GetParam());
  TensorInfo t("w", 29);
  CompressContext ctx(5, 0, 1);
  std::vector<float> x = Gaussian(t.numel, 2);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  std::vector<float> out(t.numel, 7.0f);
  for (size_t len = 0; len < p.size(); ++len) {
    Status s = c->Decode(std::span<const std::byte>(p.data(), len), t, ctx, out);
    ASSERT_EQ(s.code(), StatusCode::kMalformed) << len << ": " << s.ToString();
  }
  std::vector<std::byte> longer = p;
  longer.push_back(std::byte{0});
  EXPECT_EQ(c->Decode(longer, t, ctx, out).code(), StatusCode::kMalformed);
  for (float v : out) ASSERT_EQ(v, 7.0f);
}

// Flipping any bit of the header is detected.
TEST_P(WireTest, CorruptedHeaderIsRejected) {
  auto c = Make(GetParam());
  TensorInfo t("w", 21);
  CompressContext ctx(5, 0, 1);
  std::vector<float> x = Gaussian(t.numel, 3);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  std::vector<float> out(t.numel, 0.0f);
  for (size_t bit = 0; bit < 8 * kWireHeaderBytes; ++bit) {
    std::vector<std::byte> q = p;
    q[bit / 8] ^= std::byte{static_cast<unsigned char>(1u << (bit % 8))};
    ASSERT_EQ(c->Decode(q, t, ctx, out).code(), StatusCode::kMalformed) << "bit " << bit;
  }
  for (float v : out) ASSERT_EQ(v, 0.0f);
}

// Random corruption of the body either decodes (fixed-width fields accept most patterns) or is
// rejected without touching the output; it never crashes.
TEST_P(WireTest, CorruptedBodyNeverCrashes) {
  auto c = Make(GetParam());
  TensorInfo t("w", 53);
  CompressContext ctx(5, 0, 1);
  std::vector<float> x = Gaussian(t.numel, 4);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  RngStream rng(RngKey{.seed = 9});
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<std::byte> q = p;
    int flips = 1 + static_cast<int>(rng.Below(4));
    for (int f = 0; f < flips; ++f) {
      size_t at = kWireHeaderBytes + rng.Below(q.size() - kWireHeaderBytes);
      q[at] = static_cast<std::byte>(rng.Below(256));
    }
    std::vector<float> out(t.numel, 1.0f);
    Status s = c->Decode(q, t, ctx, out);
    if (!s.ok()) {
      ++rejected;
      ASSERT_EQ(s.code(), StatusCode::kMalformed);
      for (float v : out) ASSERT_EQ(v, 1.0f);
    }
  }
  RecordProperty("rejected", rejected);
}

TEST_P(WireTest, PayloadOfAnotherTensorOrCompressorIsRejected) {
  auto c = Make(GetParam());
  TensorInfo t("w", 40);
  CompressContext ctx(5, 0, 1);
  std::vector<float> x = Gaussian(t.numel, 5);
  std::vector<std::byte> p = EncodeOrDie(*c, x, t, ctx);
  std::vector<float> out(41, 0.0f);
  Status s = c->Decode(p, TensorInfo("w", 41), ctx, out);
  EXPECT_EQ(s.code(), StatusCode::kMalformed);
  EXPECT_NE(s.message().find("40"), std::string::npos) << s.message();
  // The same bytes given to a compressor with another id or other parameters.
  auto other = Make(std::string(GetParam()) == "natural" ? "qsgd" : "natural");
  std::vector<float> out40(40, 0.0f);
  EXPECT_EQ(other->Decode(p, t, ctx, out40).code(), StatusCode::kMalformed);
  if (c->name() == "qsgd") {
    auto qsgd9 = Make("qsgd:levels=9");
    EXPECT_EQ(qsgd9->Decode(p, t, ctx, out40).code(), StatusCode::kMalformed);
  }
}

INSTANTIATE_TEST_SUITE_P(Quantizers, WireTest, ::testing::ValuesIn(kSpecs), [](const auto& info) {
  std::string s = info.param;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
});

TEST(WireHeader, GarbageIsRejected) {
  std::vector<std::byte> junk(64, std::byte{0x46});
  EXPECT_EQ(ReadWireHeader(junk).status().code(), StatusCode::kMalformed);
  EXPECT_EQ(ReadWireHeader({}).status().code(), StatusCode::kMalformed);
}

TEST(WireHeader, FinishPayloadRewritesTheBodyLength) {
  auto c = Make("none");
  TensorInfo t("v", 2);
  std::vector<std::byte> out;
  BeginPayload(*c, t, 0, out);
  out.resize(out.size() + 8, std::byte{0});
  EXPECT_FALSE(ReadWireHeader(out).ok());
  FinishPayload(out);
  auto h = ReadWireHeader(out);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->body_bytes, 8u);
}

}  // namespace
}  // namespace frugal
