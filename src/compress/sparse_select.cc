#include "compress/sparse_select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "frugal/check.h"

// Top-k selection.
//
// Exact (SelectExact): the magnitude keys of all n entries are copied into keys_ and
// std::nth_element puts the k-th largest key at keys_[n - k]; that key is the threshold. The
// entries at or above it are gathered in index order (GatherCandidates) and the ties at the
// threshold are admitted from the smallest index on until k entries are taken
// (TopKOfCandidates). Cost: one copy, one introselect over n keys, one scan.
//
// Sampled (SelectSampled), as Deep Gradient Compression estimates its threshold: sample_n =
// max(min_sample, sample_ratio * n) keys are read at random positions drawn from `rng` (in runs
// of kSampleRun consecutive entries, one cache line each, so that the sample costs one memory
// access per run rather than per key), and the
// ceil(k * sample_n / n)-th largest of the sample (nth_element over sample_n keys only) becomes
// the threshold. One scan gathers the candidates at or above it. More than k candidates are cut
// to exactly k by an exact selection over the candidates alone; between lower_tolerance * k and k
// candidates are accepted as they are; fewer lower the threshold by refine_factor and scan again,
// at most max_refinements times before falling back to exact selection. For a sample of 1% the
// cost is close to one read of x, against a copy and an introselect over all n keys for exact.
//
// The scan (GatherCandidates) tests blocks of kScanBlock keys with a branch-free comparison that
// the compiler vectorises and only walks a block entry by entry when one of its keys passes, so a
// sparse selection costs about a streaming read.
namespace frugal::sparse {
namespace {

constexpr size_t kScanBlock = 16;
// Entries per cache line: the sample is drawn as whole lines of this many consecutive entries.
constexpr size_t kSampleRun = 16;

}  // namespace

size_t KFromRatio(double ratio, size_t n) {
  if (n == 0) return 0;
  FRUGAL_CHECK(ratio > 0 && ratio <= 1, "ratio must be in (0, 1], got ", ratio);
  double k = std::round(ratio * static_cast<double>(n));
  return std::clamp<size_t>(static_cast<size_t>(k), 1, n);
}

size_t TopKSelector::GatherCandidates(std::span<const float> x, uint32_t threshold) {
  const size_t n = x.size();
  if (candidates_.size() < n) candidates_.resize(n);
  uint32_t* out = candidates_.data();
  const float* data = x.data();
  size_t b = 0;
#if defined(__SSE2__)
  // Keys and the threshold are below 2^31 (MagnitudeKey clears the sign bit), so the signed 32-bit
  // comparison orders them correctly and key > threshold - 1 means key >= threshold.
  const __m128i abs_mask = _mm_set1_epi32(0x7fffffff);
  const __m128i limit = _mm_set1_epi32(static_cast<int32_t>(threshold) - 1);
  for (; b + kScanBlock <= n; b += kScanBlock) {
    uint32_t mask = 0;
    for (size_t j = 0; j < kScanBlock; j += 4) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + b + j));
      __m128i hit = _mm_cmpgt_epi32(_mm_and_si128(v, abs_mask), limit);
      mask |= static_cast<uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(hit))) << j;
    }
    while (mask != 0) {
      *out++ = static_cast<uint32_t>(b + static_cast<size_t>(std::countr_zero(mask)));
      mask &= mask - 1;
    }
  }
#else
  for (; b + kScanBlock <= n; b += kScanBlock) {
    uint32_t any = 0;
    for (size_t j = 0; j < kScanBlock; ++j) any |= MagnitudeKey(data[b + j]) >= threshold;
    if (any) {
      for (size_t j = 0; j < kScanBlock; ++j) {
        *out = static_cast<uint32_t>(b + j);
        out += MagnitudeKey(data[b + j]) >= threshold;
      }
    }
  }
#endif
  for (; b < n; ++b) {
    *out = static_cast<uint32_t>(b);
    out += MagnitudeKey(data[b]) >= threshold;
  }
  return static_cast<size_t>(out - candidates_.data());
}

void TopKSelector::TopKOfCandidates(std::span<const float> x, size_t count, size_t k,
                                    SparseVector* out) {
  out->indices.resize(std::min(count, k));
  out->values.resize(out->indices.size());
  if (count <= k) {
    for (size_t i = 0; i < count; ++i) {
      uint32_t index = candidates_[i];
      out->indices[i] = index;
      out->values[i] = x[index];
    }
    return;
  }
  if (keys_.size() < count) keys_.resize(count);
  for (size_t i = 0; i < count; ++i) keys_[i] = MagnitudeKey(x[candidates_[i]]);
  std::nth_element(keys_.begin(), keys_.begin() + static_cast<ptrdiff_t>(count - k),
                   keys_.begin() + static_cast<ptrdiff_t>(count));
  const uint32_t threshold = keys_[count - k];
  size_t greater = 0;
  for (size_t i = count - k; i < count; ++i) greater += keys_[i] > threshold;
  size_t ties = k - greater;
  size_t taken = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t index = candidates_[i];
    uint32_t key = MagnitudeKey(x[index]);
    bool take = key > threshold || (key == threshold && ties > 0);
    if (!take) continue;
    if (key == threshold) --ties;
    out->indices[taken] = index;
    out->values[taken] = x[index];
    ++taken;
  }
  FRUGAL_INTERNAL_ASSERT(taken == k, "top-k took ", taken, " of ", k);
}

void TopKSelector::SelectExact(std::span<const float> x, size_t k, SparseVector* out) {
  const size_t n = x.size();
  FRUGAL_CHECK(n <= UINT32_MAX, "tensor of ", n, " elements is too large for 32-bit indices");
  k = std::min(k, n);
  out->clear();
  if (k == 0) return;
  if (k == n) {
    out->indices.resize(n);
    std::iota(out->indices.begin(), out->indices.end(), 0u);
    out->values.assign(x.begin(), x.end());
    return;
  }
  if (keys_.size() < n) keys_.resize(n);
  for (size_t i = 0; i < n; ++i) keys_[i] = MagnitudeKey(x[i]);
  std::nth_element(keys_.begin(), keys_.begin() + static_cast<ptrdiff_t>(n - k),
                   keys_.begin() + static_cast<ptrdiff_t>(n));
  const uint32_t threshold = keys_[n - k];
  size_t count = GatherCandidates(x, threshold);
  TopKOfCandidates(x, count, k, out);
}

SelectStats TopKSelector::SelectSampled(std::span<const float> x, size_t k, RngStream& rng,
                                        const SampledSelectOptions& options, SparseVector* out) {
  const size_t n = x.size();
  FRUGAL_CHECK(n <= UINT32_MAX, "tensor of ", n, " elements is too large for 32-bit indices");
  FRUGAL_CHECK(options.sample_ratio > 0 && options.sample_ratio <= 1, "sample ratio ",
               options.sample_ratio);
  FRUGAL_CHECK(options.lower_tolerance > 0 && options.lower_tolerance <= 1, "lower tolerance ",
               options.lower_tolerance);
  FRUGAL_CHECK(options.refine_factor > 0 && options.refine_factor < 1, "refine factor ",
               options.refine_factor);
  k = std::min(k, n);
  size_t sample_n = std::max<size_t>(
      options.min_sample,
      static_cast<size_t>(std::ceil(options.sample_ratio * static_cast<double>(n))));
  if (k == 0 || k == n || sample_n >= n) {
    // Sampling would read as much as exact selection does.
    SelectExact(x, k, out);
    return SelectStats{.candidates = out->size(), .refinements = 0, .exact_fallback = true};
  }
  if (keys_.size() < sample_n) keys_.resize(sample_n);
  for (size_t j = 0; j < sample_n; j += kSampleRun) {
    size_t start = rng.Below(n - kSampleRun + 1);
    size_t run = std::min(kSampleRun, sample_n - j);
    for (size_t i = 0; i < run; ++i) keys_[j + i] = MagnitudeKey(x[start + i]);
  }
  size_t sample_k = static_cast<size_t>(
      std::ceil(static_cast<double>(k) * static_cast<double>(sample_n) / static_cast<double>(n)));
  sample_k = std::clamp<size_t>(sample_k, 1, sample_n);
  std::nth_element(keys_.begin(), keys_.begin() + static_cast<ptrdiff_t>(sample_n - sample_k),
                   keys_.begin() + static_cast<ptrdiff_t>(sample_n));
  return SelectFromThreshold(x, k, KeyToFloat(keys_[sample_n - sample_k]), options, out);
}

SelectStats TopKSelector::SelectFromThreshold(std::span<const float> x, size_t k, float threshold,
                                              const SampledSelectOptions& options,
                                              SparseVector* out) {
  const size_t n = x.size();
  FRUGAL_CHECK(n <= UINT32_MAX, "tensor of ", n, " elements is too large for 32-bit indices");
  SelectStats stats;
  k = std::min(k, n);
  out->clear();
  if (k == 0) return stats;
  uint32_t key = MagnitudeKey(threshold);
  const size_t lower =
      static_cast<size_t>(std::ceil(options.lower_tolerance * static_cast<double>(k)));
  for (int attempt = 0; attempt <= options.max_refinements; ++attempt) {
    size_t count = GatherCandidates(x, key);
    stats.candidates = count;
    if (count >= lower) {
      TopKOfCandidates(x, count, k, out);
      return stats;
    }
    if (attempt == options.max_refinements) break;
    // key > 0 here: key 0 admits all n >= k entries.
    uint32_t lowered = MagnitudeKey(KeyToFloat(key) * static_cast<float>(options.refine_factor));
    key = std::min(lowered, key - 1);
    ++stats.refinements;
  }
  SelectExact(x, k, out);
  stats.candidates = out->size();
  stats.exact_fallback = true;
  return stats;
}

void TopKSelector::SelectAtLeast(std::span<const float> x, float tau, SparseVector* out) {
  FRUGAL_CHECK(x.size() <= UINT32_MAX, "tensor of ", x.size(),
               " elements is too large for 32-bit indices");
  FRUGAL_CHECK(tau >= 0, "threshold must be >= 0, got ", tau);
  size_t count = GatherCandidates(x, MagnitudeKey(tau));
  TopKOfCandidates(x, count, count, out);
}

SparseVector ReferenceTopK(std::span<const float> x, size_t k) {
  std::vector<uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    uint32_t ka = MagnitudeKey(x[a]);
    uint32_t kb = MagnitudeKey(x[b]);
    return ka != kb ? ka > kb : a < b;
  });
  order.resize(std::min(k, x.size()));
  std::sort(order.begin(), order.end());
  SparseVector result;
  result.indices = order;
  for (uint32_t index : order) result.values.push_back(x[index]);
  return result;
}

}  // namespace frugal::sparse
