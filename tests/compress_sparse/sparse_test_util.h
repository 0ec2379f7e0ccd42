// Helpers shared by the sparse compressors' tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "frugal/random.h"

namespace frugal::sparse_test {

// n values drawn from Normal(0, 1), reproducible from `seed` (the stream of RngKey{seed}).
inline std::vector<float> Gaussian(size_t n, uint64_t seed) {
  RngStream rng({.seed = seed});
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(rng.Normal());
  return x;
}

}  // namespace frugal::sparse_test
