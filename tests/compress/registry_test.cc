#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "compress/test_util.h"

namespace frugal {
namespace {

using testing_compress::Make;

TEST(CompressorParams, ParsesNameAndParameters) {
  auto p = CompressorParams::Parse("qsgd:levels=16,bucket=512");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name(), "qsgd");
  EXPECT_TRUE(p->Has("levels"));
  auto levels = p->Int("levels", 1, 1, 100);
  ASSERT_TRUE(levels.ok());
  EXPECT_EQ(*levels, 16);
  auto bucket = p->Int("bucket", 1, 1, 1 << 20);
  ASSERT_TRUE(bucket.ok());
  EXPECT_EQ(*bucket, 512);
  EXPECT_TRUE(p->Finish().ok());
}

TEST(CompressorParams, BareKeyMeansOne) {
  auto p = CompressorParams::Parse("onebit:ef");
  ASSERT_TRUE(p.ok());
  auto ef = p->Bool("ef", false);
  ASSERT_TRUE(ef.ok());
  EXPECT_TRUE(*ef);
}

TEST(CompressorParams, RejectsSyntaxErrors) {
  for (const char* bad : {"", ":levels=1", "qsgd:levels=", "qsgd:=3", "qsgd:levels=1,levels=2",
                          "q sgd", "qsgd:levels=1,,bucket=2"}) {
    auto p = CompressorParams::Parse(bad);
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(CompressorParams, RangeAndTypeErrorsNameTheKey) {
  auto p = CompressorParams::Parse("x:a=abc,b=5,c=maybe,d=nan,e=red");
  ASSERT_TRUE(p.ok());
  auto a = p->Int("a", 0, 0, 10);
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("a=abc"), std::string::npos);
  auto b = p->Int("b", 0, 0, 4);
  EXPECT_NE(b.status().message().find("[0, 4]"), std::string::npos) << b.status().message();
  EXPECT_FALSE(p->Bool("c", false).ok());
  EXPECT_FALSE(p->Double("d", 0, -1, 1).ok());
  auto e = p->Choice("e", "green", {"green", "blue"});
  EXPECT_NE(e.status().message().find("green, blue"), std::string::npos);
}

TEST(CompressorRegistry, UnknownNameListsAcceptedNames) {
  CompressorRegistry registry = DefaultCompressorRegistry();
  auto c = registry.Create("qsdg");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("qsgd"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("none"), std::string::npos);
}

TEST(CompressorRegistry, UnknownParameterListsAcceptedOnes) {
  CompressorRegistry registry = DefaultCompressorRegistry();
  auto c = registry.Create("qsgd:level=4");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("level"), std::string::npos);
  EXPECT_NE(c.status().message().find("levels"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("bucket"), std::string::npos);
  auto out_of_range = registry.Create("qsgd:levels=0");
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  auto none_param = registry.Create("fp16:x=1");
  EXPECT_EQ(none_param.status().code(), StatusCode::kInvalidArgument);
}

TEST(CompressorRegistry, DuplicateRegistrationFails) {
  CompressorRegistry registry;
  RegisterQuantizers(registry);
  CompressorEntry entry{.name = "qsgd",
                        .summary = "",
                        .params = "",
                        .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
                          return InternalError("unused");
                        }};
  EXPECT_EQ(registry.Register(entry).code(), StatusCode::kInvalidArgument);
}

// Every compressor frugal offers, by family. A family whose registration is lost (a hook no
// longer called, an entry removed) fails here instead of vanishing from `--compress`.
const std::vector<std::string> kQuantizers = {"none",   "fp16",     "bf16",   "minmax8",
                                              "qsgd",   "terngrad", "onebit", "sign",
                                              "signum", "efsign",   "natural"};
const std::vector<std::string> kSparsifiers = {"randomk", "topk", "threshold", "adaptive",
                                               "sbc",     "stc",  "dgc",       "gtopk"};
const std::vector<std::string> kLowRank = {"powersgd"};
const std::vector<std::string> kSketches = {"sketch"};
const std::vector<std::string> kCoding = {"polar"};

std::vector<std::string> AllCompressorNames() {
  std::vector<std::string> all;
  for (const auto* family : {&kQuantizers, &kSparsifiers, &kLowRank, &kSketches, &kCoding}) {
    all.insert(all.end(), family->begin(), family->end());
  }
  std::sort(all.begin(), all.end());
  return all;
}

TEST(CompressorRegistry, HoldsExactlyTheDocumentedCompressors) {
  CompressorRegistry registry = DefaultCompressorRegistry();
  std::vector<std::string> names = registry.Names();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, AllCompressorNames());
  for (const std::string& name : names) {
    const CompressorEntry* e = registry.Find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_FALSE(e->summary.empty()) << name;
    // Every entry builds with its defaults.
    EXPECT_NE(Make(name), nullptr) << name;
  }
}

// The list in include/frugal/compressor.h's header comment is the one users read: it names the
// same compressors, family by family.
TEST(CompressorRegistry, HeaderCommentListsTheSameCompressors) {
  std::ifstream header(FRUGAL_SOURCE_DIR "/include/frugal/compressor.h");
  ASSERT_TRUE(header) << "cannot read " FRUGAL_SOURCE_DIR "/include/frugal/compressor.h";
  const std::string begin = "// The compressors DefaultCompressorRegistry() holds";
  std::string line;
  while (std::getline(header, line) && line.rfind(begin, 0) != 0) {
  }
  ASSERT_FALSE(header.eof()) << "no line starting with '" << begin << "'";
  std::vector<std::string> documented;
  const std::regex name_re("^[a-z0-9]+$");
  while (std::getline(header, line) && line != "//") {
    if (line.rfind("//   ", 0) != 0) continue;  // only the indented family lines
    std::string text = line.substr(2);
    if (size_t colon = text.find(':'); colon != std::string::npos) text = text.substr(colon + 1);
    text = text.substr(0, text.find(".."));
    std::istringstream words(text);
    for (std::string word; std::getline(words, word, ',');) {
      std::istringstream trimmed(word);
      std::string name;
      if (trimmed >> name && std::regex_match(name, name_re)) documented.push_back(name);
    }
  }
  std::sort(documented.begin(), documented.end());
  EXPECT_EQ(documented, AllCompressorNames());
}

// The canonical spec builds an identical compressor (same spec, same id, same traits).
TEST(CompressorRegistry, CanonicalSpecRoundTrips) {
  for (const char* spec : {"none",
                           "fp16",
                           "bf16",
                           "minmax8",
                           "minmax8:chunk=64,rounding=stochastic",
                           "qsgd",
                           "qsgd:levels=3,bucket=128",
                           "terngrad",
                           "terngrad:clip=0",
                           "onebit",
                           "onebit:ef=1",
                           "sign",
                           "signum:beta=0.5",
                           "efsign",
                           "efsign:ef=0",
                           "natural",
                           "natural:ef",
                           "polar",
                           "polar:ef=0",
                           "polar:rate=0.1,n=20,mode=sign,list=4,construct=ga",
                           "polar:rounding=random,construct=bb",
                           "topk:ratio=0.01 | polar:rate=0.5",
                           "topk|polar:ef=0",
                           "randomk|topk:k=5|fp16:ef=1",
                           "none|qsgd"}) {
    auto c = Make(spec);
    ASSERT_NE(c, nullptr) << spec;
    auto again = Make(c->spec());
    ASSERT_NE(again, nullptr) << c->spec();
    EXPECT_EQ(again->spec(), c->spec()) << spec;
    EXPECT_EQ(again->id(), c->id());
    EXPECT_EQ(again->inner() != nullptr, c->inner() != nullptr) << spec;
  }
}

TEST(CompressorRegistry, ErrorFeedbackWrapping) {
  auto plain = Make("onebit");
  EXPECT_EQ(plain->inner(), nullptr);
  EXPECT_TRUE(plain->traits().needs_error_feedback);
  auto wrapped = Make("onebit:ef=1");
  ASSERT_NE(wrapped->inner(), nullptr);
  EXPECT_EQ(wrapped->spec(), "onebit:ef=1");
  EXPECT_FALSE(wrapped->traits().needs_error_feedback);
  EXPECT_EQ(wrapped->name(), "onebit");
  // efsign is defined with error feedback; ef=0 turns it off.
  auto efsign = Make("efsign");
  EXPECT_NE(efsign->inner(), nullptr);
  EXPECT_EQ(efsign->spec(), "efsign:ef=1");
  EXPECT_EQ(Make("efsign:ef=0")->inner(), nullptr);
  EXPECT_EQ(Make("efsign:ef=0")->spec(), "efsign:ef=0");
  EXPECT_THROW(WithErrorFeedback(Make("efsign")), CheckError);
}

// Encodes the same input with every registered compressor, with its defaults and with error
// feedback, and calls check(spec, compressor, context, payload) on each; returns how many.
template <typename Check>
size_t ForEveryEncoded(const TensorInfo& t, Check check) {
  CompressorRegistry registry = DefaultCompressorRegistry();
  std::vector<float> x(t.numel);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) - 0.1f;
  size_t checked = 0;
  for (const std::string& name : registry.Names()) {
    for (const std::string& spec : std::vector<std::string>{name, name + ":ef=1"}) {
      auto c = registry.Create(spec);
      if (!c.ok()) continue;  // a compressor with error feedback built in
      CompressContext ctx(5, 0, 1);
      std::vector<std::byte> payload;
      EXPECT_TRUE((*c)->Encode(x, t, ctx, payload).ok()) << spec;
      check(spec, **c, ctx, payload);
      ++checked;
    }
  }
  return checked;
}

// DecodeOverwrite writes what Decode adds into zeros, bit for bit, for every compressor with its
// defaults and with error feedback: over a buffer of garbage, and after a truncated payload it
// returns Decode's error.
TEST(CompressorRegistry, DecodeOverwriteIsDecodeIntoZeros) {
  const TensorInfo t("w", 48 * 40, {48, 40});
  const size_t checked =
      ForEveryEncoded(t, [&](const std::string& spec, const Compressor& c, CompressContext& ctx,
                             const std::vector<std::byte>& payload) {
        std::vector<float> added(t.numel, 0.0f);
        std::vector<float> written(t.numel, std::numeric_limits<float>::quiet_NaN());
        ASSERT_TRUE(c.Decode(payload, t, ctx, added).ok()) << spec;
        ASSERT_TRUE(c.DecodeOverwrite(payload, t, ctx, written).ok()) << spec;
        EXPECT_EQ(std::memcmp(added.data(), written.data(), 4 * t.numel), 0) << spec;
        std::vector<std::byte> truncated(payload.begin(), payload.end() - 1);
        Status refused = c.DecodeOverwrite(truncated, t, ctx, written);
        EXPECT_EQ(refused.code(), StatusCode::kMalformed) << spec << ": " << refused.ToString();
      });
  EXPECT_GE(checked, AllCompressorNames().size());
}

// DecodeScaled adds scale times what DecodeOverwrite writes, for every compressor with its
// defaults and with error feedback: with scale 1 bit for bit what Decode adds, with dyadic scales
// (whose products are exact) exactly y + scale * v, with 1/3 to float rounding; a truncated
// payload is refused with the output unchanged.
TEST(CompressorRegistry, DecodeScaledAddsTheScaledDecode) {
  const TensorInfo t("w", 48 * 40, {48, 40});
  std::vector<float> y(t.numel);
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::cos(0.11f * static_cast<float>(i)) + 2.0f;
  const size_t checked =
      ForEveryEncoded(t, [&](const std::string& spec, const Compressor& c, CompressContext& ctx,
                             const std::vector<std::byte>& payload) {
        std::vector<float> v(t.numel);
        ASSERT_TRUE(c.DecodeOverwrite(payload, t, ctx, v).ok()) << spec;
        std::vector<float> added = y;
        ASSERT_TRUE(c.Decode(payload, t, ctx, added).ok()) << spec;
        std::vector<float> out = y;
        ASSERT_TRUE(c.DecodeScaled(payload, t, ctx, 1.0f, out).ok()) << spec;
        EXPECT_EQ(std::memcmp(added.data(), out.data(), 4 * t.numel), 0) << spec;
        size_t nonzero = 0;
        for (float scale : {0.5f, -0.25f, 1.0f / 3.0f}) {
          out = y;
          ASSERT_TRUE(c.DecodeScaled(payload, t, ctx, scale, out).ok()) << spec;
          for (size_t e = 0; e < t.numel; ++e) {
            const float expected = y[e] + scale * v[e];
            if (scale == 1.0f / 3.0f) {
              ASSERT_NEAR(out[e], expected, 1e-6f * std::abs(expected)) << spec << " at " << e;
            } else {
              ASSERT_EQ(out[e], expected) << spec << " scale " << scale << " at " << e;
            }
            nonzero += v[e] != 0.0f;
          }
        }
        EXPECT_GT(nonzero, 0u) << spec;
        std::vector<std::byte> truncated(payload.begin(), payload.end() - 1);
        out = y;
        Status refused = c.DecodeScaled(truncated, t, ctx, 0.5f, out);
        EXPECT_EQ(refused.code(), StatusCode::kMalformed) << spec << ": " << refused.ToString();
        EXPECT_EQ(std::memcmp(out.data(), y.data(), 4 * t.numel), 0) << spec;
      });
  EXPECT_GE(checked, AllCompressorNames().size());
}

TEST(AggregationPathNames, ParseAndPrint) {
  for (const char* name : {"auto", "allreduce", "allgather", "twophase", "vote", "custom"}) {
    auto p = ParseAggregationPath(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ(AggregationPathName(*p), name);
  }
  auto bad = ParseAggregationPath("ring");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("twophase"), std::string::npos);
}

TEST(AggregationPaths, ResolvedFromTraits) {
  EXPECT_EQ(ResolveAggregationPath(*Make("none"), AggregationPath::kAuto),
            AggregationPath::kAllreduce);
  EXPECT_EQ(ResolveAggregationPath(*Make("fp16"), AggregationPath::kAuto),
            AggregationPath::kTwoPhase);
  EXPECT_EQ(ResolveAggregationPath(*Make("sign"), AggregationPath::kAuto),
            AggregationPath::kSignVote);
  EXPECT_EQ(ResolveAggregationPath(*Make("signum"), AggregationPath::kAuto),
            AggregationPath::kSignVote);
  EXPECT_EQ(ResolveAggregationPath(*Make("terngrad"), AggregationPath::kAuto),
            AggregationPath::kCustom);
  EXPECT_EQ(ResolveAggregationPath(*Make("terngrad:ef=1"), AggregationPath::kAuto),
            AggregationPath::kCustom);
  EXPECT_EQ(ResolveAggregationPath(*Make("qsgd"), AggregationPath::kAllgather),
            AggregationPath::kAllgather);
}

TEST(TensorInfo, MatrixView) {
  TensorInfo flat("b", 10);
  EXPECT_EQ(flat.rows(), 10u);
  EXPECT_EQ(flat.cols(), 1u);
  TensorInfo conv("w", 32 * 3 * 5 * 5, {32, 3, 5, 5});
  EXPECT_EQ(conv.rows(), 32u);
  EXPECT_EQ(conv.cols(), 75u);
  EXPECT_EQ(conv.id, TensorId("w"));
  EXPECT_THROW(TensorInfo("bad", 10, {3, 3}), CheckError);
}

TEST(CompressContext, StateIsKeyedByTensorAndSlot) {
  struct Counter : TensorState {
    int n = 0;
  };
  CompressContext ctx(1, 0, 1);
  TensorInfo a("a", 4), b("b", 4);
  ctx.State<Counter>(a, "x").n = 3;
  ctx.State<Counter>(a, "y").n = 5;
  EXPECT_EQ(ctx.State<Counter>(a, "x").n, 3);
  EXPECT_EQ(ctx.State<Counter>(b, "x").n, 0);
  EXPECT_EQ(ctx.num_states(), 3u);
  EXPECT_THROW(ctx.State<Counter>(TensorInfo("a", 5), "x"), CheckError);
  EXPECT_THROW(ctx.State<ResidualState>(a, "x"), CheckError);
  ctx.Erase("a");
  EXPECT_EQ(ctx.num_states(), 1u);
  EXPECT_EQ(ctx.FindState<Counter>("a", "x"), nullptr);
  ASSERT_NE(ctx.FindState<Counter>("b", "x"), nullptr);
  RngKey own = ctx.Key(a);
  RngKey shared = ctx.Key(a, true);
  EXPECT_EQ(own.rank, 0);
  EXPECT_EQ(shared.rank, kAnyRank);
  EXPECT_EQ(own.tensor, TensorId("a"));
}

}  // namespace
}  // namespace frugal
