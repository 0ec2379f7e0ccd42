// The single-process reference of the gossip algorithms: all n models in one place, the same
// mixing matrix W, written as the papers write them (matrices of models, one copy of every
// neighbour's public vector), and the local step both the reference and the distributed runs
// take. Shared by the tier-1 (ranks as threads) and tier-2 (mpirun) tests.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/gossip.h"
#include "frugal/strategy.h"

namespace frugal::gossip_test {

// The test model: parameters "w" (300 values) and "b" (7), and a float buffer "bn" (5), packed in
// this order (as the gossip strategy packs ModelBuffers).
inline constexpr size_t kW = 300;
inline constexpr size_t kB = 7;
inline constexpr size_t kBn = 5;
inline constexpr size_t kTotal = kW + kB + kBn;
// --compress-min-bytes of the tests: "w" (1200 bytes) is compressed, "b" and "bn" go as float32.
inline constexpr size_t kMinBytes = 1024;

struct LocalStepOptions {
  float lr = 0.1f;
  float noise = 0.01f;
  uint64_t seed = 3;
};

// Rank `rank`'s local step of step `step` on the model `x` (kTotal values), in place: a gradient
// step on 0.5 ||x - b_rank||^2 plus noise from the stream (seed, rank, step, "test/noise"),
// x <- x - lr (x - b) + noise, in float.
void LocalStep(const LocalStepOptions& options, int rank, uint64_t step, std::span<float> x);

// The initial model: the same on every rank, one per rank, or per rank with small integers
// (rank * 16 + e % 7: sums of these with dyadic weights are exact in float).
enum class Initial { kSame, kPerRank, kIntegers };
std::vector<float> InitialModel(int rank, Initial initial);

struct ReferenceConfig {
  GossipSpec spec;
  SyncSpec sync;
  std::string compress;  // choco, dcd, ecd
  uint64_t seed = 0;     // the plan's seed (compressors' streams, graphs)
  LocalStepOptions local;
  Initial initial = Initial::kSame;
};

// Runs `steps` steps of `config` on n models and returns them (kTotal values each), as the
// distributed strategy holds them after Settle.
std::vector<std::vector<float>> RunReference(const ReferenceConfig& config, int n, int steps);

// The same through the gossip strategy of frugal (MakeStrategy), one rank: the test model as
// ModelBuffers, BeforeForward / LocalStep / AfterOptimizerStep for every step and Settle at the
// end, with a runner that calls the transport directly. Returns the final packed model; `state`
// (if not null) receives the VisitState vectors, `report` the Report values.
StatusOr<std::vector<float>> RunStrategy(
    const ReferenceConfig& config, Transport& t, int steps,
    std::vector<std::pair<std::string, std::vector<float>>>* state,
    std::vector<std::pair<std::string, double>>* report);

// The plan of `config` for `workers` workers (checks every rule).
StatusOr<StrategyPlan> PlanOf(const ReferenceConfig& config, int workers);

}  // namespace frugal::gossip_test
