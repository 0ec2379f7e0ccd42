// The engine with the compressing reducer: every aggregation path gives the same bits through the
// engine as the same reducer called directly, and the timeline shows compress and decompress.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "engine_test_util.h"
#include "frugal/compressed_reducer.h"
#include "frugal/engine.h"
#include "frugal/engine_phases.h"

namespace frugal::testing {
namespace {

struct Case {
  std::string spec;
  AggregationPath path;
};

std::vector<Case> Cases() {
  return {
      {"none", AggregationPath::kAllreduce},   {"randomk:ratio=0.25", AggregationPath::kAuto},
      {"qsgd", AggregationPath::kTwoPhase},    {"qsgd", AggregationPath::kAllgather},
      {"onebit:ef=1", AggregationPath::kAuto}, {"topk:ratio=0.1", AggregationPath::kAuto},
      {"sign", AggregationPath::kSignVote},    {"powersgd:start_iter=0", AggregationPath::kAuto}};
}

std::unique_ptr<CompressedReducer> MakeReducer(Transport& t, const CompressorRegistry& registry,
                                               const Case& c) {
  CompressedReducerOptions options;
  options.spec = c.spec;
  options.path = c.path;
  options.min_bytes = 0;
  options.seed = 17;
  options.timeout = std::chrono::seconds(20);
  auto reducer = MakeCompressedReducer(t, registry, options);
  if (!reducer.ok()) throw std::runtime_error(reducer.status().ToString());
  return std::move(reducer).value();
}

const std::vector<size_t> kCompressedSizes = {96, 250, 1000, 64};

TEST(EngineCompress, EveryAggregationPathMatchesTheDirectReducerBitForBit) {
  const int n = 3;
  const int steps = 2;
  for (const Case& c : Cases()) {
    std::vector<std::vector<std::vector<float>>> direct(n), engine_out(n);
    ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
      const int rank = t.rank();
      const CompressorRegistry registry = DefaultCompressorRegistry();
      // Direct: each tensor as a bucket of its own, in submission order, step by step.
      std::unique_ptr<CompressedReducer> plain = MakeReducer(t, registry, c);
      for (int step = 0; step < steps; ++step) {
        for (size_t k = 0; k < kCompressedSizes.size(); ++k) {
          std::vector<float> v = UniformInput(rank, kCompressedSizes[k], k + 10 * step);
          BucketInfo bucket;
          bucket.name = Indexed("t", k);
          bucket.count = v.size();
          // The engine reports a whole tensor's shape, {count} for a flat request.
          bucket.entries = {{bucket.name, 0, v.size(), {static_cast<int64_t>(v.size())}}};
          bucket.step = static_cast<uint64_t>(step);
          FRUGAL_RETURN_IF_ERROR(plain->Reduce(bucket, v));
          direct[rank].push_back(std::move(v));
        }
      }
      // Through the engine, with a fresh reducer (fresh compressor state).
      std::unique_ptr<CompressedReducer> reducer = MakeReducer(t, registry, c);
      EngineOptions options;
      ApplyOverlapMode(OverlapMode::kWfbp, options);
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
      for (int step = 0; step < steps; ++step) {
        Gate gate;
        std::unique_ptr<Work> hold = engine->Call("hold", [&](Transport&) {
          return gate.Wait(kWait) ? Status::Ok() : TimeoutError("gate");
        });
        std::vector<std::vector<float>> data;
        for (size_t k = 0; k < kCompressedSizes.size(); ++k) {
          data.push_back(UniformInput(rank, kCompressedSizes[k], k + 10 * step));
        }
        std::vector<std::unique_ptr<Work>> works;
        for (size_t k = 0; k < kCompressedSizes.size(); ++k) {
          works.push_back(engine->Submit(Req(Indexed("t", k), 0, step), data[k]));
        }
        gate.Open();
        FRUGAL_RETURN_IF_ERROR(hold->Wait(kWait));
        for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
        for (auto& v : data) engine_out[rank].push_back(std::move(v));
      }
      return engine->Shutdown();
    }));
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(engine_out[r].size(), direct[r].size()) << c.spec;
      for (size_t k = 0; k < direct[r].size(); ++k) {
        EXPECT_EQ(0, std::memcmp(engine_out[r][k].data(), direct[r][k].data(),
                                 direct[r][k].size() * sizeof(float)))
            << c.spec << " path " << AggregationPathName(c.path) << " rank " << r << " tensor "
            << k;
      }
    }
  }
}

TEST(EngineCompress, TimelineShowsCompressCommunicateAndDecompress) {
  const int n = 2;
  std::string trace;
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    PhaseRecorder phases;
    const CompressorRegistry registry = WithPhaseTiming(DefaultCompressorRegistry(), phases);
    std::unique_ptr<CompressedReducer> reducer =
        MakeReducer(t, registry, Case{"qsgd", AggregationPath::kAllgather});
    Timeline timeline(t.rank());
    EngineOptions options;
    options.timeline = &timeline;
    options.phases = &phases;
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, *reducer, options));
    std::vector<float> g = UniformInput(t.rank(), 4096, 1);
    FRUGAL_RETURN_IF_ERROR(engine->Submit(Req("layer.weight"), g)->Wait(kWait));
    StatusOr<std::string> merged = std::string();
    FRUGAL_RETURN_IF_ERROR(engine
                               ->Call("timeline",
                                      [&](Transport& tt) {
                                        merged = timeline.Gather(tt, kWait);
                                        return merged.status();
                                      })
                               ->Wait(kWait));
    if (t.rank() == 0) trace = *merged;
    return engine->Shutdown();
  }));
  const nlohmann::json doc = nlohmann::json::parse(trace);
  std::map<std::string, std::set<std::string>> phases_by_row;
  std::map<std::pair<int, int>, std::string> rows;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      rows[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
    }
  }
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    phases_by_row[rows[{e["pid"].get<int>(), e["tid"].get<int>()}]].insert(
        e["name"].get<std::string>());
  }
  for (const std::string row : {"engine", "tensor layer.weight"}) {
    for (const char* phase : {"compress", "communicate", "decompress"}) {
      EXPECT_TRUE(phases_by_row[row].count(phase)) << row << ": " << phase;
    }
  }
  EXPECT_TRUE(phases_by_row["tensor layer.weight"].count("queue"));
  EXPECT_TRUE(phases_by_row["tensor layer.weight"].count("negotiate"));
}

// Under one-step delay, gradients of two steps are ready together; cycle fusion must not put them
// in one bucket, or a tensor would be compressed with another step's random stream. Random-k
// draws its indices from the step: the engine must give the bits of the reducer called with each
// tensor's own step.
TEST(EngineCompress, AFusedBucketHoldsTensorsOfOneStep) {
  const int n = 2;
  const Case c{"randomk:ratio=0.25", AggregationPath::kAuto};
  const std::vector<std::pair<std::string, uint64_t>> tensors = {
      {"a", 3}, {"b", 4}, {"c", 4}, {"d", 3}};
  std::vector<std::vector<std::vector<float>>> direct(n), engine_out(n);
  std::vector<std::vector<std::vector<std::string>>> buckets(n);
  ExpectAllOk(RunRanks(n, [&](Transport& t) -> Status {
    const int rank = t.rank();
    const CompressorRegistry registry = DefaultCompressorRegistry();
    std::unique_ptr<CompressedReducer> plain = MakeReducer(t, registry, c);
    for (size_t k = 0; k < tensors.size(); ++k) {
      std::vector<float> v = UniformInput(rank, 200, k);
      BucketInfo bucket;
      bucket.name = tensors[k].first;
      bucket.count = v.size();
      bucket.entries = {{bucket.name, 0, v.size(), {static_cast<int64_t>(v.size())}}};
      bucket.step = tensors[k].second;
      FRUGAL_RETURN_IF_ERROR(plain->Reduce(bucket, v));
      direct[rank].push_back(std::move(v));
    }
    RecordingReducer reducer(MakeReducer(t, registry, c));
    EngineOptions options;
    ApplyOverlapMode(OverlapMode::kFusion, options, FusionPolicy::kCycle);
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Start(t, reducer, options));
    Gate gate;
    std::unique_ptr<Work> hold = engine->Call(
        "hold", [&](Transport&) { return gate.Wait(kWait) ? Status::Ok() : TimeoutError("gate"); });
    std::vector<std::vector<float>> data;
    std::vector<std::unique_ptr<Work>> works;
    for (size_t k = 0; k < tensors.size(); ++k) data.push_back(UniformInput(rank, 200, k));
    for (size_t k = 0; k < tensors.size(); ++k) {
      works.push_back(engine->Submit(Req(tensors[k].first, 0, tensors[k].second), data[k]));
    }
    gate.Open();
    FRUGAL_RETURN_IF_ERROR(hold->Wait(kWait));
    for (auto& w : works) FRUGAL_RETURN_IF_ERROR(w->Wait(kWait));
    engine_out[rank] = std::move(data);
    buckets[rank] = reducer.buckets();
    return engine->Shutdown();
  }));
  for (int r = 0; r < n; ++r) {
    // Still fused: a with d (step 3), b with c (step 4).
    EXPECT_EQ(buckets[r], (std::vector<std::vector<std::string>>{{"a", "d"}, {"b", "c"}}));
    for (size_t k = 0; k < tensors.size(); ++k) {
      EXPECT_EQ(0, std::memcmp(engine_out[r][k].data(), direct[r][k].data(),
                               direct[r][k].size() * sizeof(float)))
          << "rank " << r << " tensor " << tensors[k].first;
    }
  }
}

// A compressor that counts which encoder error feedback calls: the generic Encode or the fused
// EncodeWithResidual (of EF-signSGD, which has one).
class CountingCompressor final : public Compressor {
 public:
  CountingCompressor(std::unique_ptr<Compressor> inner, std::atomic<int>& encodes,
                     std::atomic<int>& fused)
      : inner_(std::move(inner)), encodes_(encodes), fused_(fused) {}
  std::string_view name() const override { return "counted"; }
  std::string spec() const override { return "counted"; }
  CompressorId id() const override { return inner_->id(); }
  CompressorTraits traits() const override { return inner_->traits(); }
  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return inner_->BodyBits(tensor);
  }
  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    ++encodes_;
    return inner_->Encode(input, tensor, ctx, out);
  }
  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    return inner_->Decode(payload, tensor, ctx, output);
  }
  std::optional<Status> EncodeWithResidual(std::span<const float> input, std::span<float> residual,
                                           const TensorInfo& tensor, CompressContext& ctx,
                                           std::vector<std::byte>& out) const override {
    std::optional<Status> status = inner_->EncodeWithResidual(input, residual, tensor, ctx, out);
    if (status) ++fused_;
    return status;
  }

 private:
  std::unique_ptr<Compressor> inner_;
  std::atomic<int>& encodes_;
  std::atomic<int>& fused_;
};

// --timeline wraps every compressor in a timed one: error feedback must still take the fused
// encoder, give the same payload and residual, and the encode must be drawn as "compress".
TEST(EnginePhases, TimedCompressorsKeepTheFusedErrorFeedbackPath) {
  std::atomic<int> encodes{0};
  std::atomic<int> fused{0};
  CompressorRegistry base;
  ASSERT_TRUE(
      base.Register({.name = "counted",
                     .summary = "EF-signSGD, counting its encoders",
                     .params = "",
                     .factory = [&](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
                       FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> inner,
                                               DefaultCompressorRegistry().Create("efsign:ef=0"));
                       return std::unique_ptr<Compressor>(
                           std::make_unique<CountingCompressor>(std::move(inner), encodes, fused));
                     }})
          .ok());
  PhaseRecorder phases;
  const CompressorRegistry timed = WithPhaseTiming(base, phases);
  const TensorInfo tensor("layer.weight", 1000);
  std::vector<std::vector<std::byte>> payloads;
  std::vector<std::vector<float>> residuals;
  for (const CompressorRegistry* registry : std::vector<const CompressorRegistry*>{&base, &timed}) {
    StatusOr<std::unique_ptr<Compressor>> compressor = registry->Create("counted:ef=1");
    ASSERT_TRUE(compressor.ok()) << compressor.status().ToString();
    CompressContext ctx(5, 0, 1);
    std::vector<std::byte> out;
    for (uint64_t step = 0; step < 2; ++step) {
      ctx.set_step(step);
      const std::vector<float> g = UniformInput(0, tensor.numel, step);
      ASSERT_TRUE((*compressor)->Encode(g, tensor, ctx, out).ok());
    }
    payloads.push_back(out);
    residuals.push_back(ctx.FindState<ResidualState>(tensor.name, kErrorFeedbackSlot)->residual);
  }
  EXPECT_EQ(fused.load(), 4) << "every encode, timed or not, takes the fused path";
  EXPECT_EQ(encodes.load(), 0);
  EXPECT_EQ(payloads[0], payloads[1]);
  EXPECT_EQ(residuals[0], residuals[1]);
  const std::vector<Phase> drawn = phases.Drain();
  ASSERT_EQ(drawn.size(), 2u);
  for (const Phase& p : drawn) {
    EXPECT_EQ(p.name, "compress");
    EXPECT_EQ(p.tensor, "layer.weight");
  }
}

}  // namespace
}  // namespace frugal::testing
