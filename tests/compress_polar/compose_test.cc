// Composition of compressors ("a | b"): the decoded result against running the stages by hand,
// the exact payload size, error feedback of the whole, the refusals and malformed payloads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "compress/test_util.h"

namespace frugal {
namespace {

using testing_compress::EncodeOrDie;
using testing_compress::Gaussian;
using testing_compress::Make;

Status CreateStatus(const std::string& spec) {
  return DefaultCompressorRegistry().Create(spec).status();
}

// top-k, then polar on the kept values: the output is top-k's indices holding polar's decoding
// of top-k's values (the values as a tensor of their own, "<name>|1"), and the payload is the
// header, 16 bytes of stage lengths, top-k's index section and polar's whole payload.
TEST(Composition, TopKThenPolarEqualsTheStagesByHand) {
  const size_t numel = 20000;
  const std::vector<float> x = Gaussian(numel, 1);
  TensorInfo tensor("layer.weight", numel);
  auto composed = Make("topk:ratio=0.05 | polar:rate=0.5,n=8,ef=0");
  ASSERT_NE(composed, nullptr);
  EXPECT_EQ(composed->inner(), nullptr);
  CompressContext ctx(1, 0, 1);
  const std::vector<std::byte> payload = EncodeOrDie(*composed, x, tensor, ctx);

  auto topk = Make("topk:ratio=0.05");
  auto polar = Make("polar:rate=0.5,n=8,ef=0");
  CompressContext hand(1, 0, 1);
  const std::vector<std::byte> sparse = EncodeOrDie(*topk, x, tensor, hand);
  const size_t k = 1000;
  const size_t values_at = sparse.size() - 4 * k;
  std::vector<float> values(k);
  std::memcpy(values.data(), sparse.data() + values_at, 4 * k);
  TensorInfo values_tensor("layer.weight|1", k);
  const std::vector<std::byte> coded = EncodeOrDie(*polar, values, values_tensor, hand);
  EXPECT_EQ(payload.size(), kWireHeaderBytes + 16 + (values_at - kWireHeaderBytes) + coded.size());

  std::vector<float> decoded_values(k, 0.0f);
  ASSERT_TRUE(polar->Decode(coded, values_tensor, hand, decoded_values).ok());
  std::vector<std::byte> rebuilt = sparse;
  std::memcpy(rebuilt.data() + values_at, decoded_values.data(), 4 * k);
  std::vector<float> expected(numel, 0.5f), out(numel, 0.5f);
  ASSERT_TRUE(topk->Decode(rebuilt, tensor, hand, expected).ok());
  ASSERT_TRUE(composed->Decode(payload, tensor, ctx, out).ok());
  EXPECT_EQ(out, expected);
  size_t changed = 0;
  for (size_t i = 0; i < numel; ++i) changed += out[i] != 0.5f;
  EXPECT_EQ(changed, k);
}

TEST(Composition, ThreeStagesAndLosslessStagesRoundTrip) {
  const size_t numel = 3000;
  const std::vector<float> x = Gaussian(numel, 2);
  TensorInfo tensor("w", numel);
  // none and fp16 of small integers lose nothing: the composition reproduces the top-k exactly.
  std::vector<float> ints(numel);
  for (size_t i = 0; i < numel; ++i) ints[i] = std::round(x[i] * 100);
  CompressContext ctx0(1, 0, 1);
  const std::vector<float> plain =
      testing_compress::RoundTrip(*Make("topk:k=300"), ints, tensor, ctx0);
  CompressContext ctx(1, 0, 1);
  EXPECT_EQ(testing_compress::RoundTrip(*Make("none|topk:k=300|fp16"), ints, tensor, ctx), plain);
  CompressContext ctx2(1, 0, 1);
  EXPECT_EQ(testing_compress::RoundTrip(*Make("topk:k=300|none"), ints, tensor, ctx2), plain);
  // random-k (shared indices) then top-k then polar: 1500 values, 150 of them coded by polar.
  auto three = Make("randomk:ratio=0.5|topk:ratio=0.1|polar:n=4,ef=0");
  CompressContext ctx3(1, 0, 1);
  const std::vector<float> out = testing_compress::RoundTrip(*three, x, tensor, ctx3);
  size_t nonzero = 0;
  for (float v : out) nonzero += v != 0.0f;
  EXPECT_LE(nonzero, 150u);
  EXPECT_GT(nonzero, 100u);
}

TEST(Composition, ErrorFeedbackWrapsTheWholeAndItsSpecRoundTrips) {
  auto c = Make("topk:ratio=0.01 | polar:rate=0.5");
  ASSERT_NE(c->inner(), nullptr) << "polar's default error feedback covers the composition";
  EXPECT_EQ(c->spec(),
            "topk:ratio=0.01,sample=0.01,select=exact|polar:construct=pw,list=1,mode=soft,n=14,"
            "rate=0.5,rounding=hard,ef=1");
  EXPECT_EQ(Make(c->spec())->spec(), c->spec());
  auto bare = Make("topk|polar:ef=0");
  EXPECT_EQ(bare->inner(), nullptr);
  EXPECT_EQ(Make(bare->spec())->spec(), bare->spec());
  EXPECT_EQ(Make("topk|fp16")->inner(), nullptr);
  EXPECT_NE(Make("topk|fp16:ef=1")->inner(), nullptr);
  EXPECT_TRUE(c->traits().requantizable == false) << "top-k is not re-quantizable";
  EXPECT_TRUE(Make("none|polar")->traits().requantizable);
  EXPECT_EQ(ResolveAggregationPath(*c, AggregationPath::kAuto), AggregationPath::kAllgather);

  // What was sent plus the residual is what came in.
  TensorInfo tensor("w", 5000);
  CompressContext ctx(1, 0, 1);
  std::vector<float> in(tensor.numel, 0.0f), sent(tensor.numel, 0.0f);
  auto ef = Make("topk:ratio=0.1|polar:n=6,rate=0.3");
  for (int step = 0; step < 8; ++step) {
    ctx.set_step(step);
    const std::vector<float> g = Gaussian(tensor.numel, 10 + step);
    for (size_t i = 0; i < g.size(); ++i) in[i] += g[i];
    const std::vector<std::byte> payload = EncodeOrDie(*ef, g, tensor, ctx);
    ASSERT_TRUE(ef->Decode(payload, tensor, ctx, sent).ok());
  }
  const auto* state = ctx.FindState<ResidualState>("w", kErrorFeedbackSlot);
  ASSERT_NE(state, nullptr);
  double worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    worst = std::max(worst, double{std::fabs(sent[i] + state->residual[i] - in[i])});
  }
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(ctx.num_states(), 2u) << "the residual and top-k's scratch; no state of the stages";
}

TEST(Composition, CompositionsThatMakeNoSenseAreRefusedInOneLine) {
  struct Case {
    const char* spec;
    const char* says;
  };
  for (const Case& c : {
           Case{"polar|topk", "polar does not end its payload with float values"},
           Case{"qsgd|polar", "qsgd does not end its payload with float values"},
           Case{"topk:ef=1|polar", "write ef on its last stage"},
           Case{"topk|sign", "vote of signs"},
           Case{"powersgd|none", "moves its own data"},
           Case{"topk|terngrad", "moves its own data"},
           Case{"dgc|polar", "dgc keeps momentum"},
           Case{"topk|", "stage 2 is empty"},
           Case{" | polar", "stage 1 is empty"},
           Case{"topk|polar:rate=2", "rate=2"},
           Case{"topk|polar:colour=red", "colour"},
       }) {
    const Status s = CreateStatus(c.spec);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.spec << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.spec << ": " << s.ToString();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << c.spec;
  }
  EXPECT_EQ(CreateStatus("topk|qsdg").code(), StatusCode::kNotFound);
}

TEST(Composition, MalformedPayloadsAreRejectedWithoutTouchingTheOutput) {
  auto c = Make("topk:ratio=0.1|polar:n=4,ef=0");
  TensorInfo tensor("w", 500);
  CompressContext ctx(1, 0, 1);
  const std::vector<std::byte> good = EncodeOrDie(*c, Gaussian(tensor.numel, 3), tensor, ctx);
  std::vector<float> out(tensor.numel, 0.25f);
  auto rejected = [&](const std::vector<std::byte>& bad) {
    Status s = c->Decode(bad, tensor, ctx, out);
    for (float v : out) {
      if (v != 0.25f) return false;
    }
    return s.code() == StatusCode::kMalformed;
  };
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_TRUE(rejected(std::vector<std::byte>(good.begin(), good.begin() + len))) << len;
  }
  const size_t body = kWireHeaderBytes;
  for (uint64_t count : {uint64_t{0}, uint64_t{49}, uint64_t{51}, uint64_t{501}, ~uint64_t{0}}) {
    std::vector<std::byte> bad = good;
    std::memcpy(bad.data() + body, &count, 8);
    EXPECT_TRUE(rejected(bad)) << "count " << count;
  }
  for (uint64_t prefix : {uint64_t{0}, uint64_t{7}, uint64_t{100000}, ~uint64_t{0}}) {
    std::vector<std::byte> bad = good;
    std::memcpy(bad.data() + body + 8, &prefix, 8);
    EXPECT_TRUE(rejected(bad)) << "prefix " << prefix;
  }
  // Every single-byte change after the stage lengths is caught or decodes to something finite.
  for (size_t at = body + 16; at < good.size(); ++at) {
    std::vector<std::byte> bad = good;
    bad[at] ^= std::byte{0x5a};
    std::vector<float> o(tensor.numel, 0.0f);
    Status s = c->Decode(bad, tensor, ctx, o);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), StatusCode::kMalformed) << at;
      for (float v : o) ASSERT_EQ(v, 0.0f) << at;
    }
  }
  EXPECT_TRUE(c->Decode(good, tensor, ctx, out).ok());
}

}  // namespace
}  // namespace frugal
