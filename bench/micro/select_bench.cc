// Micro-benchmarks of the top-k selection behind the sparsifiers: exact selection, DGC's sampled
// threshold and a fixed threshold, at the ratios the sparsifiers are used with.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <span>
#include <vector>

#include "compress/sparse_select.h"
#include "micro/inputs.h"

namespace frugal::micro {
namespace {

using sparse::SparseVector;
using sparse::TopKSelector;

constexpr size_t kNumel = 1 << 22;

// Argument: k per million entries.
void Ratios(benchmark::internal::Benchmark* b) {
  for (int per_million : {1000, 10000}) b->Arg(per_million);
}

size_t K(const benchmark::State& state) {
  return sparse::KFromRatio(static_cast<double>(state.range(0)) / 1e6, kNumel);
}

// Times `select(x, selector, out)` on kNumel Normal(0, 1) values.
template <typename Select>
void TimeSelection(benchmark::State& state, Select select) {
  std::vector<float> x = GaussianFloats(kNumel, 1);
  TopKSelector selector;
  SparseVector out;
  for (auto _ : state) {
    select(x, selector, &out);
    benchmark::DoNotOptimize(out.indices.data());
  }
  SetFloatBytes(state, kNumel);
}

void BM_SelectExact(benchmark::State& state) {
  TimeSelection(state, [&](std::span<const float> x, TopKSelector& selector, SparseVector* out) {
    selector.SelectExact(x, K(state), out);
  });
}
BENCHMARK(BM_SelectExact)->Apply(Ratios);

void BM_SelectSampled(benchmark::State& state) {
  RngStream rng(RngKey{.seed = 2, .rank = 0, .step = 0, .tensor = 0});
  TimeSelection(state, [&](std::span<const float> x, TopKSelector& selector, SparseVector* out) {
    selector.SelectSampled(x, K(state), rng, sparse::SampledSelectOptions{}, out);
  });
}
BENCHMARK(BM_SelectSampled)->Apply(Ratios);

// |x| >= 2.576 keeps about 1% of Normal(0, 1) entries.
void BM_SelectAtLeast(benchmark::State& state) {
  TimeSelection(state, [](std::span<const float> x, TopKSelector& selector, SparseVector* out) {
    selector.SelectAtLeast(x, 2.576f, out);
  });
}
BENCHMARK(BM_SelectAtLeast);

}  // namespace
}  // namespace frugal::micro
