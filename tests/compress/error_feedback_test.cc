#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "compress/test_util.h"

namespace frugal {
namespace {

using testing_compress::EncodeOrDie;
using testing_compress::Gaussian;
using testing_compress::Make;

class ErrorFeedbackTest : public ::testing::TestWithParam<const char*> {};

// Sum of everything transmitted plus the final residual equals the sum of all inputs. (The
// residual stays bounded only for contractive compressors, E||C(x) - x||^2 < ||x||^2: QSGD with
// few levels and large buckets is not one, so it is tested here with 15 levels per 64 elements.)
TEST_P(ErrorFeedbackTest, NothingIsLost) {
  std::string spec = GetParam();
  auto c = Make(spec + (spec.find(':') == std::string::npos ? ":ef=1" : ",ef=1"));
  ASSERT_NE(c->inner(), nullptr);
  TensorInfo t("w", 517, {11, 47});
  CompressContext ctx(3, 1, 2);
  std::vector<double> sent(t.numel, 0), in(t.numel, 0);
  const int steps = 40;
  for (int s = 0; s < steps; ++s) {
    ctx.set_step(s);
    std::vector<float> g = Gaussian(t.numel, 100 + s);
    std::vector<std::byte> p = EncodeOrDie(*c, g, t, ctx);
    std::vector<float> d(t.numel, 0.0f);
    ASSERT_TRUE(c->Decode(p, t, ctx, d).ok());
    for (size_t i = 0; i < t.numel; ++i) {
      sent[i] += d[i];
      in[i] += g[i];
    }
  }
  auto* state = ctx.FindState<ResidualState>("w", kErrorFeedbackSlot);
  ASSERT_NE(state, nullptr);
  ASSERT_EQ(state->residual.size(), t.numel);
  double worst = 0, residual_norm = 0;
  for (size_t i = 0; i < t.numel; ++i) {
    worst = std::max(worst, std::fabs(sent[i] + state->residual[i] - in[i]));
    residual_norm += double{state->residual[i]} * state->residual[i];
  }
  EXPECT_LT(worst, 1e-3) << GetParam();
  // The residual stays bounded (it does not grow like the sum of the inputs).
  EXPECT_LT(std::sqrt(residual_norm / t.numel), 10.0) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Quantizers, ErrorFeedbackTest,
                         ::testing::Values("fp16", "bf16", "minmax8", "qsgd:levels=15,bucket=64",
                                           "terngrad", "onebit", "sign", "efsign", "natural",
                                           "polar:n=5,rate=0.2"));

TEST(ErrorFeedback, LosslessCompressorKeepsAZeroResidual) {
  auto c = Make("none:ef=1");
  TensorInfo t("w", 100);
  CompressContext ctx;
  std::vector<float> g = Gaussian(t.numel, 1);
  EncodeOrDie(*c, g, t, ctx);
  auto* state = ctx.FindState<ResidualState>("w", kErrorFeedbackSlot);
  ASSERT_NE(state, nullptr);
  for (float e : state->residual) EXPECT_EQ(e, 0.0f);
}

// The residual compensates the next step: what one step does not send, the next one does.
TEST(ErrorFeedback, CompensatesTheNextStep) {
  auto c = Make("efsign");
  TensorInfo t("w", 2);
  CompressContext ctx;
  // p = (3, 1): scale 2, sent (2, 2), e = (1, -1). Next g = (0, 0): p = (1, -1), sent (1, -1).
  std::vector<float> g1 = {3.0f, 1.0f}, g2 = {0.0f, 0.0f};
  std::vector<float> d1(2, 0.0f), d2(2, 0.0f);
  ASSERT_TRUE(c->Decode(EncodeOrDie(*c, g1, t, ctx), t, ctx, d1).ok());
  EXPECT_EQ(d1, (std::vector<float>{2, 2}));
  ASSERT_TRUE(c->Decode(EncodeOrDie(*c, g2, t, ctx), t, ctx, d2).ok());
  EXPECT_EQ(d2, (std::vector<float>{1, -1}));
}

TEST(ErrorFeedback, FailedEncodingLeavesTheResidual) {
  auto c = Make("efsign");
  TensorInfo t("w", 3);
  CompressContext ctx;
  std::vector<float> g = {1.0f, -4.0f, 0.5f};
  EncodeOrDie(*c, g, t, ctx);
  std::vector<float> before = ctx.FindState<ResidualState>("w", kErrorFeedbackSlot)->residual;
  std::vector<float> bad = {1.0f, NAN, 0.0f};
  std::vector<std::byte> out;
  EXPECT_EQ(c->Encode(bad, t, ctx, out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx.FindState<ResidualState>("w", kErrorFeedbackSlot)->residual, before);
}

}  // namespace
}  // namespace frugal

namespace frugal {
namespace {

// efsign's fused error feedback (two passes) gives the generic path's payload and residual bit for
// bit: p = g + e, Encode(p) by the bare compressor, e = p - Decode(...) into zeros.
TEST(ErrorFeedback, FusedEfSignEqualsTheGenericPath) {
  auto fused = testing_compress::Make("efsign");  // error feedback on by default
  auto bare = testing_compress::Make("efsign:ef=0");
  ASSERT_NE(fused->inner(), nullptr);
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{1000}, size_t{4099}}) {
    TensorInfo t("w", n);
    CompressContext ctx(5, 0, 1), bare_ctx(5, 0, 1);
    std::vector<float> e(n, 0.0f);
    for (int step = 0; step < 4; ++step) {
      ctx.set_step(step);
      bare_ctx.set_step(step);
      std::vector<float> g = testing_compress::Gaussian(n, 40 + step);
      std::vector<std::byte> got = testing_compress::EncodeOrDie(*fused, g, t, ctx);
      std::vector<float> p(n);
      for (size_t i = 0; i < n; ++i) p[i] = g[i] + e[i];
      std::vector<std::byte> want = testing_compress::EncodeOrDie(*bare, p, t, bare_ctx);
      std::vector<float> d(n, 0.0f);
      ASSERT_TRUE(bare->Decode(want, t, bare_ctx, d).ok());
      for (size_t i = 0; i < n; ++i) e[i] = p[i] - d[i];
      ASSERT_EQ(got, want) << "n " << n << " step " << step;
      const auto* state = ctx.FindState<ResidualState>("w", kErrorFeedbackSlot);
      ASSERT_NE(state, nullptr);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(state->residual[i]), std::bit_cast<uint32_t>(e[i]))
            << "n " << n << " step " << step << " i " << i;
      }
    }
    // A non-finite gradient is refused and the residual is left as it was.
    const std::vector<float> before =
        ctx.FindState<ResidualState>("w", kErrorFeedbackSlot)->residual;
    std::vector<float> bad = testing_compress::Gaussian(n, 99);
    bad[n / 2] = std::nanf("");
    std::vector<std::byte> out;
    EXPECT_EQ(fused->Encode(bad, t, ctx, out).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ctx.FindState<ResidualState>("w", kErrorFeedbackSlot)->residual, before);
  }
}

}  // namespace
}  // namespace frugal
