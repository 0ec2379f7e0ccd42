// Inputs and size ranges shared by the micro-benchmarks.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "frugal/random.h"

namespace frugal::micro {

// Normal(0, 1) values, reproducible from `seed`.
inline std::vector<float> GaussianFloats(size_t n, uint64_t seed) {
  RngStream rng(RngKey{.seed = seed, .rank = 0, .step = 0, .tensor = 0});
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.Normal());
  return v;
}

// Float counts from 64 Ki (in cache) to 4 Mi (16 MB, beyond the last-level cache).
inline void FloatSizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 22}) b->Arg(n);
}

// Reports GB/s of float input.
inline void SetFloatBytes(benchmark::State& state, size_t n) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(float)));
}

}  // namespace frugal::micro
