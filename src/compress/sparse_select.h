// Selection of the large-magnitude entries of a float buffer: exact top-k, DGC's sampled-threshold
// top-k, and a fixed threshold. Internal to frugal_compress (sparsification compressors, gTop-k,
// sketches).
//
// Magnitudes are compared as the bit patterns of |x| read as uint32, which orders every finite
// value, infinities and NaNs totally and deterministically (a NaN counts as larger than +inf).
// Ties at the k-th magnitude are broken by the smaller index. Results list indices in increasing
// order with the values x[index].
//
// A TopKSelector keeps scratch buffers between calls so that selecting on a large tensor every
// step does not allocate. Not thread safe (one object, one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/random.h"

namespace frugal::sparse {

// A sparse vector: strictly increasing indices and their values.
struct SparseVector {
  std::vector<uint32_t> indices;
  std::vector<float> values;

  size_t size() const { return indices.size(); }
  void clear() {
    indices.clear();
    values.clear();
  }
};

// Magnitude key of a float: its bits with the sign cleared.
inline uint32_t MagnitudeKey(float x) {
  uint32_t bits;
  __builtin_memcpy(&bits, &x, sizeof(bits));
  return bits & 0x7fffffffu;
}
inline float KeyToFloat(uint32_t key) {
  float f;
  __builtin_memcpy(&f, &key, sizeof(f));
  return f;
}

struct SampledSelectOptions {
  double sample_ratio = 0.01;    // fraction of the entries sampled to estimate the threshold
  size_t min_sample = 1000;      // ... but at least this many (all entries when fewer)
  double lower_tolerance = 0.8;  // accept a count in [lower_tolerance * k, k]
  int max_refinements = 4;       // threshold lowerings before falling back to exact selection
  double refine_factor = 0.8;    // each lowering multiplies the threshold by this
};

// What a sampled selection did, for tests and benchmarks.
struct SelectStats {
  size_t candidates = 0;        // entries at or above the final threshold
  int refinements = 0;          // times the threshold was lowered
  bool exact_fallback = false;  // exact selection was used (small input or refinements exhausted)
};

class TopKSelector {
 public:
  // Exactly min(k, x.size()) entries of largest magnitude.
  void SelectExact(std::span<const float> x, size_t k, SparseVector* out);

  // DGC's estimate: the k-th largest magnitude of a random sample sets a threshold; the entries
  // at or above it are gathered; more than k are cut to the exact top-k of those candidates, fewer
  // than lower_tolerance*k lower the threshold. Returns between ceil(lower_tolerance*k) and
  // k entries (exactly k after a fallback). The sample is drawn from `rng`.
  SelectStats SelectSampled(std::span<const float> x, size_t k, RngStream& rng,
                            const SampledSelectOptions& options, SparseVector* out);

  // The selection that follows the estimate, from a given first threshold (>= 0): gather, cut or
  // accept, or lower the threshold and gather again.
  SelectStats SelectFromThreshold(std::span<const float> x, size_t k, float threshold,
                                  const SampledSelectOptions& options, SparseVector* out);

  // Every entry with |x| >= tau (tau >= 0).
  void SelectAtLeast(std::span<const float> x, float tau, SparseVector* out);

 private:
  // Gathers the indices with key >= threshold into candidates_; returns their count.
  size_t GatherCandidates(std::span<const float> x, uint32_t threshold);
  // From candidates_ (increasing), keeps the k of largest magnitude into `out`.
  void TopKOfCandidates(std::span<const float> x, size_t count, size_t k, SparseVector* out);

  std::vector<uint32_t> keys_;
  std::vector<uint32_t> candidates_;
};

// Exact top-k with the tie rule above, by a plain full sort. The reference for tests.
SparseVector ReferenceTopK(std::span<const float> x, size_t k);

// k from a ratio: max(1, round(ratio * n)) clipped to n (0 when n == 0).
size_t KFromRatio(double ratio, size_t n);

}  // namespace frugal::sparse
