// The engine with the compressing reducer: every aggregation path gives the same bits through the
// engine as the same reducer called directly, and the timeline shows compress and decompress.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "engine_test_util.h"
#include "frugal/compressed_reducer.h"
#include "frugal/engine.h"
#include "frugal/engine_phases.h"

namespace frugal::testing {
namespace {

constexpr Duration kWait = std::chrono::seconds(30);

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

const std::vector<size_t> kSizes = {96, 250, 1000, 64};

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
        for (size_t k = 0; k < kSizes.size(); ++k) {
          std::vector<float> v = UniformInput(rank, kSizes[k], k + 10 * step);
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
        for (size_t k = 0; k < kSizes.size(); ++k) {
          data.push_back(UniformInput(rank, kSizes[k], k + 10 * step));
        }
        std::vector<std::unique_ptr<Work>> works;
        for (size_t k = 0; k < kSizes.size(); ++k) {
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

}  // namespace
}  // namespace frugal::testing
