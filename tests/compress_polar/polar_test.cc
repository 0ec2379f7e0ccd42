// The polar compressor: its payload against an independent recomputation, the distortion and
// error targets on fixed seeds, the edge rates, determinism across runs, threads and kernel
// sets, validation of malformed payloads and error feedback.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <thread>

#include "compress/quant_util.h"
#include "compress/test_util.h"
#include "compress_polar/polar_reference.h"
#include "frugal/crc.h"

namespace frugal {
namespace {

using compress_internal::HasX86V3;
using compress_internal::Kernels;
using compress_internal::QuantizerBase;
using testing_compress::EncodeOrDie;
using testing_compress::Gaussian;
using testing_compress::Make;

// Bernoulli(1/2) signs: the binary symmetric source.
std::vector<float> Bss(size_t n, uint64_t seed) {
  RngStream rng(RngKey{.seed = seed, .rank = 0, .step = 0, .tensor = 91});
  std::vector<float> v(n);
  for (float& x : v) x = (rng.NextU64() & 1u) ? -1.0f : 1.0f;
  return v;
}

std::vector<float> Decoded(const Compressor& c, const std::vector<std::byte>& payload,
                           const TensorInfo& t) {
  CompressContext ctx(1, 0, 1);
  std::vector<float> out(t.numel, 0.0f);
  Status s = c.Decode(payload, t, ctx, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

std::vector<float> RoundTrip(const std::string& spec, const std::vector<float>& x,
                             uint64_t seed = 1) {
  auto c = Make(spec);
  TensorInfo t("g", x.size());
  CompressContext ctx(seed, 0, 1);
  return Decoded(*c, EncodeOrDie(*c, x, t, ctx), t);
}

double FlipFraction(const std::vector<float>& source, const std::vector<float>& decoded) {
  size_t flips = 0;
  for (size_t i = 0; i < source.size(); ++i) flips += (source[i] < 0) != (decoded[i] < 0);
  return static_cast<double>(flips) / static_cast<double>(source.size());
}

double Nmse(const std::vector<float>& p, const std::vector<float>& q) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    err += (double{p[i]} - q[i]) * (double{p[i]} - q[i]);
    norm += double{p[i]} * p[i];
  }
  return err / norm;
}

double Hinv(double y) {
  double lo = 0, hi = 0.5;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    const double h = -mid * std::log2(mid) - (1 - mid) * std::log2(1 - mid);
    (h < y ? lo : hi) = mid;
  }
  return lo;
}

// ----- the payload against an independent recomputation -----

// Every block of the body is alpha and the information bits of u; u F^(x)m must be the codeword
// of plain SC on the block's LLRs (frozen positions of u zero), alpha the least-squares scale of
// its signs, and the decoder's output alpha (1 - 2x) exactly.
TEST(Polar, DecodeEqualsAnIndependentRecomputation) {
  const int m = 8;
  const size_t block = size_t{1} << m;
  for (const char* mode : {"soft", "sign"}) {
    for (double rate : {0.3, 0.5, 0.8}) {
      for (size_t numel : {block * 3 + 77, block * 2, size_t{100}}) {
        const std::string spec = fmt::format("polar:ef=0,n={},rate={},mode={}", m, rate, mode);
        auto c = Make(spec);
        TensorInfo t("w", numel);
        std::vector<float> x = Gaussian(numel, numel);
        for (size_t i = 0; i < numel; i += 13) x[i] = 0.0f;
        CompressContext ctx(1, 0, 1);
        const std::vector<std::byte> payload = EncodeOrDie(*c, x, t, ctx);
        const std::vector<float> out = Decoded(*c, payload, t);
        const std::byte* at = payload.data() + kWireHeaderBytes;
        for (size_t first = 0; first < numel; first += block) {
          const size_t count = std::min(block, numel - first);
          size_t size = 1;
          while (size < count) size *= 2;
          int bm = 0;
          while ((size_t{1} << bm) < size) ++bm;
          const auto k = static_cast<size_t>(std::llround(rate * static_cast<double>(count)));
          const std::vector<bool> info = polar_reference::PwInfoSet(bm, k);
          const polar_reference::ParsedBlock parsed = polar_reference::ParseBlock(at, info);
          const std::vector<uint8_t> sent = polar_reference::TransformByMatrix(parsed.u);
          std::vector<float> llr(size, 0.0f);
          for (size_t i = 0; i < count; ++i) {
            const float p = x[first + i];
            llr[i] =
                std::string(mode) == "sign" ? (p < 0 ? -1.0f : 1.0f) : (p == 0.0f ? FLT_MIN : p);
          }
          const std::vector<uint8_t> sc = polar_reference::ScCodeword(llr, info);
          ASSERT_EQ(sent, sc) << spec << " numel " << numel << " block at " << first;
          double dot = 0;
          for (size_t i = 0; i < count; ++i) dot += sc[i] ? -double{x[first + i]} : x[first + i];
          const double alpha = std::max(0.0, dot / static_cast<double>(count));
          EXPECT_NEAR(parsed.alpha, alpha, 1e-6 * alpha) << spec;
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(out[first + i], sent[i] ? -parsed.alpha : parsed.alpha) << i;
          }
          at += 4 + (k + 7) / 8;
        }
        EXPECT_EQ(at, payload.data() + payload.size());
      }
    }
  }
}

TEST(Polar, WireSizeIsRatePlusAScalePerBlock) {
  auto c = Make("polar:rate=0.25,n=10");
  for (size_t numel : {size_t{0}, size_t{1}, size_t{5}, size_t{1024}, size_t{4096 + 3}}) {
    TensorInfo t("w", numel);
    const size_t full = numel / 1024, tail = numel % 1024;
    const size_t tail_k = static_cast<size_t>(std::llround(0.25 * static_cast<double>(tail)));
    const size_t body = full * (4 + 32) + (tail > 0 ? 4 + (tail_k + 7) / 8 : 0);
    EXPECT_EQ(c->BodyBits(t), std::optional<uint64_t>(8 * body)) << numel;
    CompressContext ctx(1, 0, 1);
    std::vector<float> x = Gaussian(numel, 3);
    EXPECT_EQ(EncodeOrDie(*c, x, t, ctx).size(), kWireHeaderBytes + body);
  }
}

// ----- distortion targets -----

// Bernoulli(1/2) source, mode=sign, hard min-sum SC, polarization weights: mean Hamming distortion
// over fixed blocks, against the values it must reach and the rate-distortion bound h^-1(1 - R).
TEST(PolarTargets, BinarySymmetricSourceDistortion) {
  struct Case {
    int n;
    double rate;
    size_t blocks;
    double target, tolerance;
  };
  double d_half_1024 = 0;
  for (const Case& k : {Case{10, 0.5, 400, 0.127, 0.003}, Case{16, 0.5, 16, 0.1165, 0.002},
                        Case{10, 0.25, 400, 0.235, 0.003}, Case{10, 0.1, 400, 0.335, 0.004}}) {
    const size_t numel = k.blocks << k.n;
    const std::vector<float> source = Bss(numel, 2024);
    const std::vector<float> decoded =
        RoundTrip(fmt::format("polar:ef=0,mode=sign,n={},rate={}", k.n, k.rate), source);
    const double d = FlipFraction(source, decoded);
    EXPECT_NEAR(d, k.target, k.tolerance) << "N=2^" << k.n << " R=" << k.rate;
    EXPECT_GT(d, Hinv(1 - k.rate)) << "below the rate-distortion bound";
    if (k.n == 10 && k.rate == 0.5) d_half_1024 = d;
    if (k.n == 16) {
      EXPECT_LT(d, d_half_1024) << "a longer block distorts less";
    }
    if (k.n == 10 && k.rate == 0.25) {
      EXPECT_GT(d, d_half_1024) << "a lower rate distorts more";
    }
  }
}

// Gaussian input, mode=soft, N = 16384: normalized squared error between sending the signs of a
// random R-fraction (1 - 2R/pi) and the limit of any +-alpha code.
TEST(PolarTargets, GaussianNormalizedError) {
  const size_t numel = size_t{16} << 14;
  const std::vector<float> p = Gaussian(numel, 77);
  struct Case {
    double rate, target, limit;
  };
  for (const Case& k :
       {Case{0.5, 0.530, 0.513}, Case{0.25, 0.729, 0.708}, Case{0.1, 0.885, 0.871}}) {
    const double nmse = Nmse(p, RoundTrip(fmt::format("polar:ef=0,rate={}", k.rate), p));
    EXPECT_NEAR(nmse, k.target, 0.006) << "R=" << k.rate;
    EXPECT_LT(nmse, 1 - k.rate * 2 / M_PI) << "R=" << k.rate;
    EXPECT_GT(nmse, k.limit) << "R=" << k.rate;
  }
}

// mode=sign on Gaussian input: with D the flip fraction, the error is 1 - (2/pi)(1 - 2D)^2 (the
// flips do not depend on the magnitudes, and alpha is the least-squares scale).
TEST(PolarTargets, SignModeOnGaussianFollowsTheFlipFraction) {
  const size_t numel = size_t{16} << 14;
  const std::vector<float> p = Gaussian(numel, 78);
  for (double rate : {0.1, 0.25, 0.5, 0.75}) {
    const std::vector<float> q = RoundTrip(fmt::format("polar:ef=0,mode=sign,rate={}", rate), p);
    const double d = FlipFraction(p, q);
    EXPECT_NEAR(Nmse(p, q), 1 - (2 / M_PI) * (1 - 2 * d) * (1 - 2 * d), 0.01) << rate;
  }
}

TEST(PolarTargets, ListEncodingLowersTheDistortion) {
  const std::vector<float> source = Bss(size_t{50} << 10, 31);
  const double sc = FlipFraction(source, RoundTrip("polar:ef=0,mode=sign,n=10,rate=0.5", source));
  const double list =
      FlipFraction(source, RoundTrip("polar:ef=0,mode=sign,n=10,rate=0.5,list=8", source));
  EXPECT_LT(list, sc - 0.003) << "SC " << sc << ", list of 8 " << list;
  EXPECT_GT(list, Hinv(0.5));
}

// ----- edge rates -----

// R = 1 is the sign: mode=sign gives sign's signs, mode=soft gives efsign's payload values (alpha
// = <p, sgn p>/N = ||p||_1/N), zeros and -0 counted positive.
TEST(Polar, RateOneIsSignAndScaledSign) {
  const size_t numel = 1024;
  std::vector<float> p = Gaussian(numel, 5);
  p[3] = 0.0f;
  p[4] = -0.0f;
  p[5] = 1e-40f;
  p[6] = -1e-40f;
  const std::vector<float> efsign = RoundTrip("efsign:ef=0", p);
  EXPECT_EQ(RoundTrip("polar:ef=0,n=10,rate=1", p), efsign);
  const std::vector<float> sign = RoundTrip("sign", p);
  const std::vector<float> polar_sign = RoundTrip("polar:ef=0,n=10,rate=1,mode=sign", p);
  for (size_t i = 0; i < numel; ++i) ASSERT_EQ(polar_sign[i] < 0, sign[i] < 0) << i;
}

TEST(Polar, RateZeroSendsOnlyAlpha) {
  auto c = Make("polar:ef=0,rate=0,n=10");
  const size_t numel = 3000;
  TensorInfo t("w", numel);
  std::vector<float> p = Gaussian(numel, 6);
  for (float& v : p) v += 0.25f;
  CompressContext ctx(1, 0, 1);
  const std::vector<std::byte> payload = EncodeOrDie(*c, p, t, ctx);
  EXPECT_EQ(payload.size(), kWireHeaderBytes + 3 * 4);
  const std::vector<float> q = Decoded(*c, payload, t);
  for (size_t first = 0; first < numel; first += 1024) {
    const size_t count = std::min<size_t>(1024, numel - first);
    double mean = 0;
    for (size_t i = 0; i < count; ++i) mean += p[first + i];
    mean /= static_cast<double>(count);
    for (size_t i = 0; i < count; ++i) ASSERT_NEAR(q[first + i], mean, 1e-6);
  }
  std::vector<float> negative(2000, -1.0f);
  for (float v : RoundTrip("polar:ef=0,rate=0,n=10", negative)) EXPECT_EQ(v, 0.0f);
}

// Scaling the input by a power of two scales alpha and keeps every bit.
TEST(Polar, InvariantToScalingTheInput) {
  const std::vector<float> p = Gaussian(5000, 8);
  auto c = Make("polar:ef=0,n=10,rate=0.4");
  TensorInfo t("w", p.size());
  CompressContext ctx(1, 0, 1);
  const std::vector<std::byte> a = EncodeOrDie(*c, p, t, ctx);
  std::vector<float> scaled = p;
  for (float& v : scaled) v *= 0x1p-7f;
  const std::vector<std::byte> b = EncodeOrDie(*c, scaled, t, ctx);
  const std::vector<float> qa = Decoded(*c, a, t), qb = Decoded(*c, b, t);
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(qa[i] * 0x1p-7f, qb[i]) << i;
}

// ----- determinism -----

TEST(Polar, PayloadIsBitIdenticalAcrossRunsThreadsAndKernelSets) {
  for (const char* spec :
       {"polar:ef=0", "polar:ef=0,mode=sign,rate=0.25,n=9", "polar:ef=0,construct=ga,rate=0.1,n=12",
        "polar:ef=0,construct=bb,n=6", "polar:ef=0,list=4,n=8", "polar:ef=0,rounding=random,n=8",
        "polar:ef=0,n=16,rate=0.3"}) {
    const size_t numel = (size_t{1} << 14) * 9 + 1234;
    std::vector<float> p = Gaussian(numel, 9);
    for (size_t i = 0; i < numel; i += 101) p[i] = 0.0f;
    TensorInfo t("layer", numel);
    auto encode = [&](Kernels k) {
      auto c = Make(spec);
      dynamic_cast<QuantizerBase&>(*c).set_kernels(k);
      CompressContext ctx(3, 1, 2);
      ctx.set_step(5);
      return EncodeOrDie(*c, p, t, ctx);
    };
    const std::vector<std::byte> first = encode(Kernels::kBaseline);
    EXPECT_EQ(encode(Kernels::kBaseline), first) << spec;
    if (HasX86V3()) {
      EXPECT_EQ(encode(Kernels::kX86V3), first) << spec;
    }
    std::vector<std::vector<std::byte>> threaded(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] {
        threaded[i] = encode(i % 2 && HasX86V3() ? Kernels::kX86V3 : Kernels::kBaseline);
      });
    }
    for (auto& th : threads) th.join();
    for (const auto& payload : threaded) EXPECT_EQ(payload, first) << spec;
  }
}

TEST(Polar, RandomizedRoundingFollowsTheSeedAndStep) {
  const std::vector<float> p = Gaussian(4096, 10);
  auto c = Make("polar:ef=0,rounding=random,n=10,rate=0.5");
  TensorInfo t("w", p.size());
  auto encode = [&](uint64_t seed, uint64_t step) {
    CompressContext ctx(seed, 0, 1);
    ctx.set_step(step);
    return EncodeOrDie(*c, p, t, ctx);
  };
  EXPECT_EQ(encode(1, 1), encode(1, 1));
  EXPECT_NE(encode(1, 1), encode(1, 2));
  EXPECT_NE(encode(1, 1), encode(2, 1));
  const double nmse = Nmse(p, Decoded(*c, encode(1, 1), t));
  EXPECT_GT(nmse, 0.513);
  EXPECT_LT(nmse, 1 - 0.5 * 2 / M_PI);
}

// ----- malformed payloads -----

TEST(Polar, MalformedPayloadsAreRejectedWithoutTouchingTheOutput) {
  auto c = Make("polar:ef=0,n=6,rate=0.3");
  const size_t numel = 64 * 2 + 10;
  TensorInfo t("w", numel);
  CompressContext ctx(1, 0, 1);
  const std::vector<std::byte> good = EncodeOrDie(*c, Gaussian(numel, 11), t, ctx);
  std::vector<float> out(numel, 0.5f);
  auto expect_rejected = [&](const std::vector<std::byte>& bad, const std::string& what) {
    Status s = c->Decode(bad, t, ctx, out);
    EXPECT_EQ(s.code(), StatusCode::kMalformed) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
    for (float v : out) ASSERT_EQ(v, 0.5f) << what;
  };
  const size_t body = kWireHeaderBytes;
  // Block 0: alpha at body + 0, 19 bits (3 bytes, 5 padding bits); block 1 at body + 7;
  // the tail: 10 positions in 16, k = 3, at body + 14.
  for (float alpha : {NAN, INFINITY, -1.0f}) {
    for (size_t block_at : {size_t{0}, size_t{7}, size_t{14}}) {
      std::vector<std::byte> bad = good;
      std::memcpy(bad.data() + body + block_at, &alpha, 4);
      expect_rejected(bad, "has scale");
    }
  }
  for (size_t padding_at : {size_t{6}, size_t{13}, size_t{18}}) {
    std::vector<std::byte> bad = good;
    bad[body + padding_at] |= std::byte{0x80};
    expect_rejected(bad, "padding bits");
  }
  // A header whose check word (the fingerprint of the information sets) differs.
  std::vector<std::byte> bad = good;
  bad[24] ^= std::byte{1};
  const uint32_t crc = Crc32(std::span<const std::byte>(bad.data(), 28));
  std::memcpy(bad.data() + 28, &crc, 4);
  expect_rejected(bad, "check word");
  // Another construction or another rate: refused by the header.
  for (const char* other : {"polar:ef=0,n=6,rate=0.3,construct=bb", "polar:ef=0,n=6,rate=0.31"}) {
    auto o = Make(other);
    expect_rejected(EncodeOrDie(*o, Gaussian(numel, 11), t, ctx), "other parameters");
  }
  // Every truncation and an extension.
  for (size_t len = 0; len < good.size(); ++len) {
    expect_rejected(std::vector<std::byte>(good.begin(), good.begin() + len), "payload");
  }
  std::vector<std::byte> longer = good;
  longer.push_back(std::byte{0});
  expect_rejected(longer, "payload");
  EXPECT_TRUE(c->Decode(good, t, ctx, out).ok());
}

TEST(Polar, NonFiniteInputIsRefused) {
  auto c = Make("polar:ef=0,n=5");
  std::vector<float> p = Gaussian(100, 12);
  p[70] = INFINITY;
  TensorInfo t("w", 100);
  CompressContext ctx(1, 0, 1);
  std::vector<std::byte> out;
  Status s = c->Encode(p, t, ctx, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("non-finite"), std::string::npos);
}

// ----- error feedback -----

// The fused encoder gives the generic path's payload and residual bit for bit, with both kernel
// sets, and what was sent plus the residual is what came in.
TEST(Polar, FusedErrorFeedbackEqualsTheGenericPathAndLosesNothing) {
  for (const char* spec : {"polar:n=8,rate=0.2", "polar:n=8,mode=sign", "polar:n=6,list=2"}) {
    auto fused = Make(spec);
    ASSERT_NE(fused->inner(), nullptr) << "error feedback is on by default";
    auto bare = Make(std::string(spec) + ",ef=0");
    const size_t numel = 256 * 5 + 100;
    TensorInfo t("w", numel);
    std::vector<Kernels> sets = {Kernels::kBaseline};
    if (HasX86V3()) sets.push_back(Kernels::kX86V3);
    for (Kernels k : sets) {
      dynamic_cast<QuantizerBase&>(*bare).set_kernels(k);
      CompressContext ctx(1, 0, 1), generic_ctx(1, 0, 1);
      std::vector<float> residual(numel, 0.0f), sent(numel, 0.0f), in(numel, 0.0f);
      for (int step = 0; step < 6; ++step) {
        ctx.set_step(step);
        generic_ctx.set_step(step);
        const std::vector<float> g = Gaussian(numel, 100 + step);
        for (size_t i = 0; i < numel; ++i) in[i] += g[i];
        std::vector<float> p(numel);
        for (size_t i = 0; i < numel; ++i) p[i] = g[i] + residual[i];
        std::vector<std::byte> generic;
        ASSERT_TRUE(bare->Encode(p, t, generic_ctx, generic).ok());
        std::vector<float> decoded(numel, 0.0f);
        ASSERT_TRUE(bare->Decode(generic, t, generic_ctx, decoded).ok());
        for (size_t i = 0; i < numel; ++i) residual[i] = p[i] - decoded[i];
        std::vector<std::byte> payload;
        auto* inner = dynamic_cast<const QuantizerBase*>(fused->inner());
        const_cast<QuantizerBase*>(inner)->set_kernels(k);
        ASSERT_TRUE(fused->Encode(g, t, ctx, payload).ok());
        EXPECT_EQ(payload, generic) << spec << " step " << step;
        const auto* state = ctx.FindState<ResidualState>("w", kErrorFeedbackSlot);
        ASSERT_NE(state, nullptr);
        ASSERT_EQ(std::memcmp(state->residual.data(), residual.data(), 4 * numel), 0)
            << spec << " step " << step;
        ASSERT_TRUE(fused->Decode(payload, t, ctx, sent).ok());
      }
      double worst = 0;
      for (size_t i = 0; i < numel; ++i)
        worst = std::max(worst, double{std::fabs(sent[i] + residual[i] - in[i])});
      EXPECT_LT(worst, 1e-4) << spec;
    }
  }
}

}  // namespace
}  // namespace frugal
