// The sparsification, gTop-k, PowerSGD and sketch compressors through the Compressor interface,
// against serial references.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "compress/gtopk_merge.h"
#include "compress/lowrank_linalg.h"
#include "compress/sparse_dgc.h"
#include "compress/sparse_select.h"
#include "compress_sparse/sparse_test_util.h"
#include "frugal/bits.h"
#include "frugal/compress_wire.h"
#include "frugal/compressor.h"
#include "frugal/inproc_transport.h"
#include "frugal/random.h"

namespace frugal {
namespace {

using namespace std::chrono_literals;
using sparse::ReferenceTopK;
using sparse::SparseVector;

std::unique_ptr<Compressor> Make(std::string_view spec) {
  static const CompressorRegistry registry = DefaultCompressorRegistry();
  auto c = registry.Create(spec);
  EXPECT_TRUE(c.ok()) << spec << ": " << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

using sparse_test::Gaussian;

std::vector<float> Integers(size_t n, uint64_t seed, int range = 1000) {
  RngStream rng({.seed = seed});
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng.Below(2 * range + 1)) - range);
  return x;
}

std::vector<float> RoundTrip(const Compressor& c, std::span<const float> x,
                             const TensorInfo& tensor, CompressContext& ctx,
                             std::vector<std::byte>* payload_out = nullptr) {
  std::vector<std::byte> payload;
  Status s = c.Encode(x, tensor, ctx, payload);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<float> out(x.size(), 0.0f);
  s = c.Decode(payload, tensor, ctx, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (payload_out != nullptr) *payload_out = payload;
  return out;
}

std::vector<float> Dense(const SparseVector& v, size_t n) {
  std::vector<float> x(n, 0.0f);
  for (size_t i = 0; i < v.size(); ++i) x[v.indices[i]] += v.values[i];
  return x;
}

double SquaredNorm(std::span<const float> x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return s;
}

// ----- Registry -----

TEST(SparseRegistryTest, EveryCompressorIsRegisteredAndSpecsRoundTrip) {
  const CompressorRegistry registry = DefaultCompressorRegistry();
  for (std::string_view spec :
       {"randomk", "randomk:k=10,scale=1", "topk", "topk:k=7,select=sampled", "threshold",
        "threshold:tau=0.5,quantize=0", "adaptive:ratio=0.05", "sbc", "stc:select=sampled", "dgc",
        "dgc:ratio=0.01,momentum=0,epoch_steps=100,clip=5", "gtopk:ratio=0.001", "powersgd:rank=4",
        "powersgd:ef=0", "sketch", "sketch:rows=3,cols=100,rounds=1"}) {
    auto c = registry.Create(spec);
    ASSERT_TRUE(c.ok()) << spec << ": " << c.status().ToString();
    auto again = registry.Create((*c)->spec());
    ASSERT_TRUE(again.ok()) << (*c)->spec() << ": " << again.status().ToString();
    EXPECT_EQ((*again)->spec(), (*c)->spec());
  }
}

TEST(SparseRegistryTest, ErrorFeedbackDefaults) {
  // Methods defined with residual accumulation carry it unless ef=0; top-k and random-k are
  // plain operators; dgc keeps its own accumulation.
  for (std::string_view name :
       {"threshold", "adaptive", "sbc", "stc", "gtopk", "powersgd", "sketch"}) {
    auto c = Make(name);
    EXPECT_NE(c->inner(), nullptr) << name;
    EXPECT_EQ(Make(std::string(name) + ":ef=0")->inner(), nullptr) << name;
  }
  for (std::string_view name : {"topk", "randomk", "dgc"}) {
    EXPECT_EQ(Make(name)->inner(), nullptr) << name;
  }
  EXPECT_NE(Make("topk:ef=1")->inner(), nullptr);
}

TEST(SparseRegistryTest, BadParametersAreRejected) {
  const CompressorRegistry registry = DefaultCompressorRegistry();
  for (std::string_view spec :
       {"topk:ratio=0.1,k=5", "topk:ratio=0", "topk:ratio=2", "topk:k=0", "topk:select=fast",
        "topk:bogus=1", "randomk:scale=maybe", "threshold:tau=-1", "threshold:tau=0", "dgc:ef=1",
        "dgc:momentum=1", "powersgd:rank=0", "sketch:rows=0", "sketch:rounds=3"}) {
    auto c = registry.Create(spec);
    EXPECT_FALSE(c.ok()) << spec;
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << spec;
    }
  }
}

// ----- topk -----

TEST(TopKCompressorTest, DecodesToTheExactTopK) {
  const size_t n = 10000;
  std::vector<float> x = Gaussian(n, 1);
  TensorInfo tensor("w", n);
  CompressContext ctx(1);
  for (std::string_view spec : {"topk:ratio=0.01", "topk:k=1", "topk:ratio=1", "topk:k=20000"}) {
    auto c = Make(spec);
    std::vector<float> out = RoundTrip(*c, x, tensor, ctx);
    size_t k = std::string_view(spec) == "topk:ratio=0.01" ? 100
               : std::string_view(spec) == "topk:k=1"      ? 1
                                                           : n;
    EXPECT_EQ(out, Dense(ReferenceTopK(x, k), n)) << spec;
  }
}

TEST(TopKCompressorTest, IsAContraction) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const size_t d = 3000 + seed * 111;
    std::vector<float> x = Gaussian(d, seed);
    TensorInfo tensor("w", d);
    CompressContext ctx(seed);
    for (double ratio : {0.001, 0.01, 0.1, 0.5}) {
      for (std::string_view select : {"exact", "sampled"}) {
        auto c = Make(fmt::format("topk:ratio={},select={}", ratio, select));
        std::vector<float> out = RoundTrip(*c, x, tensor, ctx);
        std::vector<float> rest(d);
        size_t kept = 0;
        for (size_t i = 0; i < d; ++i) {
          rest[i] = x[i] - out[i];
          kept += out[i] != 0;
        }
        // Exact keeps k entries; sampled keeps between 0.8k and k, and the bound holds for the
        // number it kept.
        double bound = (1.0 - static_cast<double>(kept) / d) * SquaredNorm(x);
        EXPECT_LE(SquaredNorm(rest), bound * (1 + 1e-9)) << ratio << " " << select;
        size_t k = sparse::KFromRatio(ratio, d);
        EXPECT_LE(kept, k);
        EXPECT_GE(kept, select == "exact" ? k : static_cast<size_t>(std::ceil(0.8 * k)));
      }
    }
  }
}

// No more than 32 + ceil(log2 N) bits per kept element, plus fixed headers.
TEST(TopKCompressorTest, WireSizeBound) {
  for (size_t n : {1000, 100000, 1000003}) {
    for (double ratio : {0.001, 0.01, 0.3, 1.0}) {
      std::vector<float> x = Gaussian(n, n);
      TensorInfo tensor("w", n);
      CompressContext ctx;
      auto c = Make(fmt::format("topk:ratio={}", ratio));
      std::vector<std::byte> payload;
      RoundTrip(*c, x, tensor, ctx, &payload);
      size_t k = sparse::KFromRatio(ratio, n);
      double bits = 8.0 * (payload.size() - kWireHeaderBytes - 6);
      EXPECT_LE(bits, k * (32.0 + BitsFor(n)) + 7) << n << " " << ratio;
    }
  }
}

TEST(TopKCompressorTest, SampledIsDeterministicFromSeedRankStep) {
  const size_t n = 200000;
  std::vector<float> x = Gaussian(n, 2);
  TensorInfo tensor("w", n);
  auto c = Make("topk:ratio=0.01,select=sampled");
  CompressContext a(5, 1, 4), b(5, 1, 4);
  a.set_step(3);
  b.set_step(3);
  std::vector<std::byte> pa, pb;
  ASSERT_TRUE(c->Encode(x, tensor, a, pa).ok());
  ASSERT_TRUE(c->Encode(x, tensor, b, pb).ok());
  EXPECT_EQ(pa, pb);
}

// ----- randomk -----

std::vector<uint32_t> NonZeros(std::span<const float> x) {
  std::vector<uint32_t> idx;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != 0) idx.push_back(static_cast<uint32_t>(i));
  }
  return idx;
}

TEST(RandomKCompressorTest, RanksAgreeOnIndicesAndPayloadsSum) {
  const size_t n = 5000;
  TensorInfo tensor("layer.weight", n);
  auto c = Make("randomk:ratio=0.02");
  ASSERT_TRUE(c->traits().summable);
  ASSERT_EQ(c->BodyBits(tensor), 32u * 100);
  std::vector<float> ones(n, 1.0f);
  std::vector<std::vector<uint32_t>> picked;
  std::vector<std::vector<std::byte>> payloads;
  std::vector<std::vector<float>> inputs;
  for (int rank = 0; rank < 3; ++rank) {
    CompressContext ctx(42, rank, 3);
    ctx.set_step(9);
    std::vector<std::byte> payload;
    picked.push_back(NonZeros(RoundTrip(*c, ones, tensor, ctx, &payload)));
    inputs.push_back(Integers(n, 10 + rank));
    ASSERT_TRUE(c->Encode(inputs.back(), tensor, ctx, payload).ok());
    payloads.push_back(payload);
  }
  EXPECT_EQ(picked[0].size(), 100u);
  EXPECT_EQ(picked[0], picked[1]);
  EXPECT_EQ(picked[0], picked[2]);
  // Another step draws other indices.
  CompressContext later(42, 0, 3);
  later.set_step(10);
  EXPECT_NE(NonZeros(RoundTrip(*c, ones, tensor, later)), picked[0]);
  // The float-wise sum of the bodies decodes to the sum of the inputs at the shared indices.
  std::vector<std::byte> summed = payloads[0];
  for (size_t i = kWireHeaderBytes; i < summed.size(); i += 4) {
    float total = 0;
    for (const auto& p : payloads) {
      float v;
      std::memcpy(&v, p.data() + i, 4);
      total += v;
    }
    std::memcpy(summed.data() + i, &total, 4);
  }
  CompressContext ctx(42, 0, 3);
  ctx.set_step(9);
  std::vector<float> out(n, 0.0f);
  ASSERT_TRUE(c->Decode(summed, tensor, ctx, out).ok());
  for (uint32_t i : picked[0]) EXPECT_EQ(out[i], inputs[0][i] + inputs[1][i] + inputs[2][i]);
  EXPECT_EQ(NonZeros(out).size() <= 100, true);
}

// With scale=1, E[Decode(Encode(x))] = x: the mean over 4000 steps is within 5 standard errors.
TEST(RandomKCompressorTest, ScaledIsUnbiased) {
  const size_t n = 200;
  std::vector<float> x = Gaussian(n, 3);
  TensorInfo tensor("w", n);
  auto c = Make("randomk:ratio=0.1,scale=1");
  EXPECT_TRUE(c->traits().unbiased);
  const int steps = 4000;
  std::vector<double> mean(n, 0.0);
  CompressContext ctx(7);
  for (int s = 0; s < steps; ++s) {
    ctx.set_step(static_cast<uint64_t>(s));
    std::vector<float> out = RoundTrip(*c, x, tensor, ctx);
    for (size_t i = 0; i < n; ++i) mean[i] += out[i] / static_cast<double>(steps);
  }
  // Var of one sample of coordinate i: x_i^2 (d/k - 1).
  for (size_t i = 0; i < n; ++i) {
    double se = std::fabs(x[i]) * std::sqrt((1.0 / 0.1 - 1.0) / steps);
    EXPECT_NEAR(mean[i], x[i], 5 * se + 1e-6) << i;
  }
}

// ----- threshold, adaptive, sbc, stc -----

TEST(ThresholdCompressorTest, StromSendsPlusMinusTau) {
  const size_t n = 4000;
  std::vector<float> x = Gaussian(n, 4);
  TensorInfo tensor("w", n);
  CompressContext ctx;
  std::vector<float> out = RoundTrip(*Make("threshold:tau=1.5,ef=0"), x, tensor, ctx);
  std::vector<float> raw = RoundTrip(*Make("threshold:tau=1.5,quantize=0,ef=0"), x, tensor, ctx);
  for (size_t i = 0; i < n; ++i) {
    bool sent = std::fabs(x[i]) >= 1.5f;
    EXPECT_EQ(out[i], sent ? std::copysign(1.5f, x[i]) : 0.0f);
    EXPECT_EQ(raw[i], sent ? x[i] : 0.0f);
  }
}

TEST(AdaptiveCompressorTest, KeepsAFractionOfEachSignAtItsMean) {
  const size_t n = 10000;
  std::vector<float> x = Gaussian(n, 5);
  for (size_t i = 0; i < n; i += 3) x[i] = std::fabs(x[i]);  // more positives than negatives
  TensorInfo tensor("w", n);
  CompressContext ctx;
  std::vector<float> out = RoundTrip(*Make("adaptive:ratio=0.02,ef=0"), x, tensor, ctx);
  std::vector<float> pos(n, 0.0f), neg(n, 0.0f);
  size_t n_pos = 0, n_neg = 0;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] > 0) pos[i] = x[i], ++n_pos;
    if (x[i] < 0) neg[i] = x[i], ++n_neg;
  }
  SparseVector top_pos = ReferenceTopK(pos, sparse::KFromRatio(0.02, n_pos));
  SparseVector top_neg = ReferenceTopK(neg, sparse::KFromRatio(0.02, n_neg));
  double mu_pos = 0, mu_neg = 0;
  for (float v : top_pos.values) mu_pos += v / static_cast<double>(top_pos.size());
  for (float v : top_neg.values) mu_neg += v / static_cast<double>(top_neg.size());
  std::vector<float> want(n, 0.0f);
  for (uint32_t i : top_pos.indices) want[i] = static_cast<float>(mu_pos);
  for (uint32_t i : top_neg.indices) want[i] = static_cast<float>(mu_neg);
  EXPECT_EQ(NonZeros(out), NonZeros(want));
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], want[i], 1e-5);
}

TEST(SbcCompressorTest, SendsOnlyTheStrongerSideAsItsMean) {
  const size_t n = 8000;
  for (bool positive_heavy : {true, false}) {
    std::vector<float> x = Gaussian(n, 6);
    for (float& v : x) {
      if ((v > 0) == positive_heavy) v *= 3;
    }
    TensorInfo tensor("w", n);
    CompressContext ctx;
    std::vector<float> out = RoundTrip(*Make("sbc:k=80,ef=0"), x, tensor, ctx);
    std::vector<float> side(n, 0.0f);
    for (size_t i = 0; i < n; ++i) {
      if ((x[i] > 0) == positive_heavy && x[i] != 0) side[i] = x[i];
    }
    SparseVector top = ReferenceTopK(side, 80);
    double mu = 0;
    for (float v : top.values) mu += v / 80.0;
    EXPECT_EQ(NonZeros(out), top.indices);
    for (uint32_t i : top.indices) EXPECT_NEAR(out[i], mu, 1e-5);
  }
}

TEST(StcCompressorTest, TernaryValuesAtTheTopK) {
  const size_t n = 8000;
  std::vector<float> x = Gaussian(n, 7);
  TensorInfo tensor("w", n);
  CompressContext ctx;
  std::vector<float> out = RoundTrip(*Make("stc:k=100,ef=0"), x, tensor, ctx);
  SparseVector top = ReferenceTopK(x, 100);
  double mu = 0;
  for (float v : top.values) mu += std::fabs(v) / 100.0;
  EXPECT_EQ(NonZeros(out), top.indices);
  for (size_t j = 0; j < top.size(); ++j) {
    EXPECT_NEAR(out[top.indices[j]], std::copysign(mu, top.values[j]), 1e-5);
  }
}

// ----- dgc -----

TEST(DgcCompressorTest, MomentumCorrectionAndFactorMasking) {
  const size_t n = 20000;
  TensorInfo tensor("w", n);
  CompressContext ctx(3, 0, 2);
  auto c = Make("dgc:ratio=0.01,momentum=0.9");
  std::vector<float> u(n, 0.0f), v(n, 0.0f);
  for (uint64_t step = 0; step < 6; ++step) {
    ctx.set_step(step);
    std::vector<float> g = Gaussian(n, 100 + step);
    for (size_t i = 0; i < n; ++i) {
      u[i] = 0.9f * u[i] + g[i];
      v[i] += u[i];
    }
    std::vector<float> sent = RoundTrip(*c, g, tensor, ctx);
    const auto* state = ctx.FindState<sparse::DgcState>("w", sparse::kDgcSlot);
    ASSERT_NE(state, nullptr);
    std::vector<uint32_t> idx = NonZeros(sent);
    EXPECT_GE(idx.size(), 160u);
    EXPECT_LE(idx.size(), 200u);
    for (uint32_t i : idx) {
      // Masks are zero at the sent indices; what was sent is the velocity there.
      EXPECT_EQ(state->u[i], 0.0f);
      EXPECT_EQ(state->v[i], 0.0f);
      EXPECT_EQ(sent[i], v[i]);
    }
    // Nothing is lost: sent + kept velocity == velocity before sending, entry by entry.
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(sent[i] + state->v[i], v[i]);
    for (uint32_t i : idx) u[i] = v[i] = 0.0f;
    EXPECT_EQ(state->u, u);
    EXPECT_EQ(state->v, v);
  }
}

// Without momentum dgc is gradient accumulation: everything sent plus what is still accumulated
// equals the sum of all gradients.
TEST(DgcCompressorTest, AccumulatedSumIsConserved) {
  const size_t n = 5000;
  TensorInfo tensor("w", n);
  CompressContext ctx;
  auto c = Make("dgc:ratio=0.01,momentum=0");
  std::vector<double> inputs(n, 0.0), sent(n, 0.0);
  for (uint64_t step = 0; step < 20; ++step) {
    ctx.set_step(step);
    std::vector<float> g = Integers(n, step, 50);
    for (size_t i = 0; i < n; ++i) inputs[i] += g[i];
    std::vector<float> out = RoundTrip(*c, g, tensor, ctx);
    for (size_t i = 0; i < n; ++i) sent[i] += out[i];
  }
  const auto* state = ctx.FindState<sparse::DgcState>("w", sparse::kDgcSlot);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(sent[i] + state->v[i], inputs[i]);
}

TEST(DgcCompressorTest, WarmUpScheduleAndLocalClipping) {
  const size_t n = 400000;
  TensorInfo tensor("w", n);
  auto c = Make("dgc:ratio=0.001,momentum=0,epoch_steps=2");
  CompressContext ctx;
  std::vector<float> g = Gaussian(n, 8);
  const double densities[] = {0.25, 0.0625, 0.015625, 0.00390625, 0.001};
  for (int epoch = 0; epoch < 5; ++epoch) {
    ctx.set_step(static_cast<uint64_t>(2 * epoch + 1));
    ctx.Erase("w");  // fresh accumulation, so only the density changes
    size_t kept = NonZeros(RoundTrip(*c, g, tensor, ctx)).size();
    double k = densities[epoch] * n;
    EXPECT_LE(kept, static_cast<size_t>(std::round(k))) << epoch;
    EXPECT_GE(kept, static_cast<size_t>(0.8 * k)) << epoch;
  }
  // clip=4 on 4 ranks: the gradient is scaled to norm 4 / sqrt(4) = 2.
  auto clip = Make("dgc:ratio=1,momentum=0,clip=4");
  CompressContext four(0, 1, 4);
  std::vector<float> small = Gaussian(1000, 9);
  TensorInfo t2("v", 1000);
  std::vector<float> out = RoundTrip(*clip, small, t2, four);
  double norm = std::sqrt(SquaredNorm(small));
  for (size_t i = 0; i < 1000; ++i) EXPECT_NEAR(out[i], small[i] * 2.0 / norm, 1e-6);
}

// ----- gtopk, powersgd, sketch: aggregation over ranks -----

struct RunResult {
  std::vector<std::vector<float>> out;       // data after aggregation, per rank
  std::vector<std::vector<float>> residual;  // the error-feedback residual, per rank
};

RunResult Aggregate(std::string_view spec, const std::vector<std::vector<float>>& inputs,
                    const TensorInfo& tensor, ReduceOp op, int steps = 1) {
  const int world = static_cast<int>(inputs.size());
  RunResult run;
  run.out.resize(world);
  run.residual.resize(world);
  auto c = Make(spec);
  std::vector<Status> statuses = RunRanks(world, [&](Transport& t) -> Status {
    CompressContext ctx(11, t.rank(), world);
    std::vector<float>& data = run.out[t.rank()];
    for (int s = 0; s < steps; ++s) {
      ctx.set_step(static_cast<uint64_t>(s));
      data = inputs[t.rank()];
      AggregateOptions options;
      options.op = op;
      options.timeout = 10s;
      FRUGAL_RETURN_IF_ERROR(AggregateCompressed(t, *c, data, tensor, ctx, options));
    }
    if (auto* e = ctx.FindState<ResidualState>(tensor.name, kErrorFeedbackSlot)) {
      run.residual[t.rank()] = e->residual;
    }
    return Status::Ok();
  });
  for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << spec << ": " << s.ToString();
  return run;
}

TEST(GTopKCompressorTest, MatchesTheSerialTreeAndConservesMassForEveryWorldSize) {
  const size_t n = 3000;
  TensorInfo tensor("w", n);
  for (int world : {1, 2, 3, 5, 8}) {
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < world; ++r) inputs.push_back(Integers(n, 20 + r));
    RunResult run = Aggregate("gtopk:k=30", inputs, tensor, ReduceOp::kSum);
    // Serial reference: pairwise merges of the local top-k in the same order.
    std::vector<SparseVector> sets;
    for (auto& x : inputs) sets.push_back(ReferenceTopK(x, 30));
    int p2 = 1;
    while (p2 * 2 <= world) p2 *= 2;
    sparse::TopKSelector selector;
    SparseVector scratch, merged;
    for (int j = 0; j + p2 < world; ++j) {
      sparse::MergeTopK(sets[j], sets[j + p2], 30, &scratch, selector, &merged);
      sets[j] = merged;
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
      std::vector<SparseVector> next(p2);
      for (int i = 0; i < p2; ++i) {
        sparse::MergeTopK(sets[i], sets[i ^ mask], 30, &scratch, selector, &next[i]);
      }
      for (int i = 0; i < p2; ++i) sets[i] = next[i];
    }
    std::vector<float> want = Dense(sets[0], n);
    std::vector<double> total(n, 0.0);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(run.out[r], want) << "world=" << world << " rank=" << r;
      ASSERT_EQ(run.residual[r].size(), n);
      for (size_t i = 0; i < n; ++i) total[i] += run.residual[r][i];
    }
    // Sum of the inputs = the aggregate + the residuals: dropped entries went back.
    for (size_t i = 0; i < n; ++i) {
      double in = 0;
      for (int r = 0; r < world; ++r) in += inputs[r][i];
      EXPECT_EQ(total[i] + want[i], in) << "world=" << world << " i=" << i;
    }
  }
}

TEST(GTopKCompressorTest, TwoRanksOfSparseInputsGiveTheExactTopKOfTheSum) {
  const size_t n = 4000, k = 50;
  TensorInfo tensor("w", n);
  std::vector<std::vector<float>> inputs(2, std::vector<float>(n, 0.0f));
  RngStream rng({.seed = 4});
  for (auto& x : inputs) {
    for (size_t j = 0; j < k; ++j) x[rng.Below(n / 4)] = static_cast<float>(rng.Normal());
  }
  std::vector<float> sum(n);
  for (size_t i = 0; i < n; ++i) sum[i] = inputs[0][i] + inputs[1][i];
  RunResult run = Aggregate("gtopk:k=50,ef=0", inputs, tensor, ReduceOp::kAverage);
  std::vector<float> want = Dense(ReferenceTopK(sum, k), n);
  for (float& v : want) v /= 2;
  EXPECT_EQ(run.out[0], want);
  EXPECT_EQ(run.out[1], want);
}

std::vector<float> Matrix(size_t rows, size_t cols, int rank, uint64_t seed) {
  std::vector<float> u = Gaussian(rows * rank, seed), v = Gaussian(cols * rank, seed + 1);
  std::vector<float> m(rows * cols, 0.0f);
  lowrank::AddOuterProducts(u, v, rows, cols, rank, 1.0f, m);
  return m;
}

double RelativeError(std::span<const float> got, std::span<const float> want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(err / norm);
}

TEST(PowerSgdCompressorTest, RecoversTheAverageOfLowRankMatrices) {
  const size_t rows = 64, cols = 48;
  TensorInfo tensor("fc.weight", rows * cols,
                    {static_cast<int64_t>(rows), static_cast<int64_t>(cols)});
  for (int world : {1, 2, 3}) {
    // Rank-2 matrices sharing column and row spaces: their average is rank 2.
    std::vector<float> base = Matrix(rows, cols, 2, 1);
    std::vector<std::vector<float>> inputs;
    std::vector<float> mean(rows * cols, 0.0f);
    for (int r = 0; r < world; ++r) {
      std::vector<float> m = base;
      for (float& x : m) x *= static_cast<float>(r + 1);
      for (size_t i = 0; i < m.size(); ++i) mean[i] += m[i] / static_cast<float>(world);
      inputs.push_back(m);
    }
    RunResult run = Aggregate("powersgd:rank=2,start_iter=0", inputs, tensor, ReduceOp::kAverage);
    for (int r = 0; r < world; ++r) {
      EXPECT_LT(RelativeError(run.out[r], mean), 1e-5) << "world=" << world;
      EXPECT_EQ(run.out[r], run.out[0]);
      // Exact recovery leaves (almost) nothing in the residual beyond the rank's own deviation
      // from the mean, M_r - mean.
      std::vector<float> dev(rows * cols);
      for (size_t i = 0; i < dev.size(); ++i) dev[i] = inputs[r][i] - mean[i];
      for (size_t i = 0; i < dev.size(); ++i) EXPECT_NEAR(run.residual[r][i], dev[i], 1e-3);
    }
  }
}

TEST(PowerSgdCompressorTest, DenseBeforeStartIterAndForVectors) {
  const size_t rows = 32, cols = 32;
  TensorInfo matrix("w", rows * cols, {32, 32});
  TensorInfo vector("b", 500, {500});
  std::vector<std::vector<float>> inputs = {Gaussian(rows * cols, 1), Gaussian(rows * cols, 2)};
  std::vector<float> mean(rows * cols);
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = (inputs[0][i] + inputs[1][i]) / 2;
  // Steps 0 and 1 run; start_iter=5 keeps both dense and exact.
  RunResult dense =
      Aggregate("powersgd:rank=1,start_iter=5", inputs, matrix, ReduceOp::kAverage, 2);
  EXPECT_EQ(dense.out[0], mean);
  for (float e : dense.residual[0]) EXPECT_EQ(e, 0.0f);
  RunResult compressed =
      Aggregate("powersgd:rank=1,start_iter=0", inputs, matrix, ReduceOp::kAverage);
  EXPECT_GT(RelativeError(compressed.out[0], mean), 0.1);  // a random matrix is not rank 1
  std::vector<std::vector<float>> vectors = {Gaussian(500, 3), Gaussian(500, 4)};
  RunResult vec = Aggregate("powersgd:rank=1,start_iter=0", vectors, vector, ReduceOp::kSum);
  for (size_t i = 0; i < 500; ++i) EXPECT_EQ(vec.out[0][i], vectors[0][i] + vectors[1][i]);
}

TEST(PowerSgdCompressorTest, EncodeDecodeRecoversALowRankMatrix) {
  const size_t rows = 50, cols = 70;
  TensorInfo tensor("w", rows * cols, {50, 70});
  std::vector<float> m = Matrix(rows, cols, 3, 5);
  auto c = Make("powersgd:rank=3,start_iter=0,ef=0");
  CompressContext ctx(1);
  std::vector<std::byte> payload;
  std::vector<float> out = RoundTrip(*c, m, tensor, ctx, &payload);
  EXPECT_LT(RelativeError(out, m), 1e-5);
  EXPECT_EQ(payload.size(), kWireHeaderBytes + 4 + 4 * (rows + cols) * 3);
  // A flat buffer is viewed as a near-square matrix, padded: the result still decodes in range.
  TensorInfo flat("bucket", 1000);
  std::vector<float> x = Gaussian(1000, 6);
  std::vector<float> flat_out = RoundTrip(*c, x, flat, ctx, &payload);
  EXPECT_EQ(payload.size(), kWireHeaderBytes + 4 + 4 * (32 + 32) * 3);  // 32 x 32 view
  EXPECT_LT(RelativeError(flat_out, x), 1.0);
}

TEST(SketchCompressorTest, AggregateRecoversHeavyHittersWithExactValues) {
  const size_t n = 50000;
  TensorInfo tensor("w", n);
  for (int world : {1, 2, 3, 4}) {
    std::vector<std::vector<float>> inputs;
    std::vector<float> sum(n, 0.0f);
    for (int r = 0; r < world; ++r) {
      std::vector<float> x = Gaussian(n, 30 + r);
      for (float& v : x) v *= 0.001f;
      for (size_t j = 0; j < 10; ++j) x[j * 4001 + 7] += 5.0f + static_cast<float>(j);
      for (size_t i = 0; i < n; ++i) sum[i] += x[i];
      inputs.push_back(x);
    }
    RunResult run = Aggregate("sketch:k=10,cols=2000", inputs, tensor, ReduceOp::kSum);
    std::vector<float> want(n, 0.0f);
    for (size_t j = 0; j < 10; ++j) want[j * 4001 + 7] = sum[j * 4001 + 7];
    for (int r = 0; r < world; ++r) {
      // The values are the all-reduced exact sums (summed in the all-reduce's order).
      for (size_t i = 0; i < n; ++i) EXPECT_NEAR(run.out[r][i], want[i], 1e-4) << world;
      EXPECT_EQ(run.out[r], run.out[0]);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(run.residual[r][i], want[i] != 0 ? 0.0f : inputs[r][i]);
      }
    }
  }
}

TEST(SketchCompressorTest, PayloadsAreLinearAndRecoverOneSparseVectors) {
  const size_t n = 20000;
  TensorInfo tensor("w", n);
  auto c = Make("sketch:k=1,cols=500,rounds=1,ef=0");
  ASSERT_TRUE(c->traits().summable);
  ASSERT_FALSE(c->traits().custom_aggregate);
  CompressContext ctx(3);
  std::vector<float> a = Integers(n, 1), b = Integers(n, 2), ab(n);
  for (size_t i = 0; i < n; ++i) ab[i] = a[i] + b[i];
  std::vector<std::byte> pa, pb, pab;
  ASSERT_TRUE(c->Encode(a, tensor, ctx, pa).ok());
  ASSERT_TRUE(c->Encode(b, tensor, ctx, pb).ok());
  ASSERT_TRUE(c->Encode(ab, tensor, ctx, pab).ok());
  ASSERT_EQ(pa.size(), pab.size());
  for (size_t i = kWireHeaderBytes; i < pa.size(); i += 4) {
    float x, y, z;
    std::memcpy(&x, pa.data() + i, 4);
    std::memcpy(&y, pb.data() + i, 4);
    std::memcpy(&z, pab.data() + i, 4);
    EXPECT_EQ(x + y, z);
  }
  for (uint64_t hot : {0ull, 777ull, 19999ull}) {
    std::vector<float> x(n, 0.0f);
    x[hot] = -2.5f;
    EXPECT_EQ(RoundTrip(*c, x, tensor, ctx), x);
  }
}

// ----- Malformed payloads -----

// Every truncation and a sweep of bit flips: the decoder fails with kMalformed and leaves the
// output untouched, or succeeds on a payload that is still valid.
TEST(SparseMalformedTest, DecodersRejectOrStayInBounds) {
  const size_t n = 3000;
  TensorInfo tensor("w", n, {60, 50});
  std::vector<float> x = Gaussian(n, 12);
  for (std::string_view spec : {"randomk:ratio=0.05", "topk:ratio=0.02", "threshold:tau=1,ef=0",
                                "threshold:tau=1,quantize=0,ef=0", "adaptive:ratio=0.02,ef=0",
                                "sbc:ratio=0.02,ef=0", "stc:ratio=0.02,ef=0", "dgc:ratio=0.02",
                                "gtopk:ratio=0.02,ef=0", "powersgd:rank=2,start_iter=0,ef=0",
                                "powersgd:start_iter=9,ef=0", "sketch:ratio=0.01,rounds=1,ef=0"}) {
    SCOPED_TRACE(spec);
    auto c = Make(spec);
    CompressContext ctx(1);
    std::vector<std::byte> good;
    ASSERT_TRUE(c->Encode(x, tensor, ctx, good).ok());
    std::vector<float> out(n, 0.0f);
    ASSERT_TRUE(c->Decode(good, tensor, ctx, out).ok());
    const std::vector<float> zeros(n, 0.0f);
    for (size_t len = 0; len < good.size(); len += (len < 64 ? 1 : 13)) {
      std::fill(out.begin(), out.end(), 0.0f);
      Status s = c->Decode(std::span(good).first(len), tensor, ctx, out);
      EXPECT_EQ(s.code(), StatusCode::kMalformed) << len;
      EXPECT_EQ(out, zeros);
    }
    std::vector<std::byte> longer = good;
    longer.push_back(std::byte{0});
    EXPECT_FALSE(c->Decode(longer, tensor, ctx, out).ok());
    TensorInfo other("w", n + 1);
    std::vector<float> other_out(n + 1, 0.0f);
    EXPECT_FALSE(c->Decode(good, other, ctx, other_out).ok());
    RngStream rng({.seed = 99});
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<std::byte> bad = good;
      size_t pos = kWireHeaderBytes + rng.Below(bad.size() - kWireHeaderBytes);
      bad[pos] ^= static_cast<std::byte>(1u << rng.Below(8));
      std::fill(out.begin(), out.end(), 0.0f);
      Status s = c->Decode(bad, tensor, ctx, out);
      if (!s.ok()) {
        EXPECT_EQ(s.code(), StatusCode::kMalformed);
        EXPECT_EQ(out, zeros);
      }
    }
  }
}

}  // namespace
}  // namespace frugal
