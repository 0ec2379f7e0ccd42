#include "compress/polar_vector.h"

#include <bit>
#include <cstdint>

namespace frugal::polar {
namespace {

using compress_internal::UseV3;

inline bool BitAt(const std::byte* bits, size_t i) {
  return (std::to_integer<unsigned>(bits[i / 8]) >> (i % 8)) & 1u;
}

inline float Flip(float v, bool flip) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(v) ^ (flip ? 0x80000000u : 0u));
}

inline double Combine(const double (&acc)[8]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double SignedSumGeneric(const float* g, const float* e, const std::byte* bits, size_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    const float p = e != nullptr ? g[i] + e[i] : g[i];
    acc[i % 8] += static_cast<double>(Flip(p, BitAt(bits, i)));
  }
  return Combine(acc);
}

void SubtractCodewordGeneric(const float* g, float* e, const std::byte* bits, size_t n,
                             float alpha) {
  for (size_t i = 0; i < n; ++i) {
    const float p = g[i] + e[i];
    e[i] = p - (0.0f + (BitAt(bits, i) ? -alpha : alpha));
  }
}

#if defined(FRUGAL_X86)
// The lanes of byte `b` as masks: lane j all ones when bit j is set.
FRUGAL_TARGET_V3 inline __m256 LaneMask(std::byte b) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i set = _mm256_and_si256(_mm256_set1_epi32(std::to_integer<int>(b)), lane_bit);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(set, lane_bit));
}

FRUGAL_TARGET_V3 double SignedSumV3(const float* g, const float* e, const std::byte* bits,
                                    size_t n) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  const size_t full = n / 8;
  for (size_t b = 0; b < full; ++b) {
    __m256 p = _mm256_loadu_ps(g + 8 * b);
    if (e != nullptr) p = _mm256_add_ps(p, _mm256_loadu_ps(e + 8 * b));
    p = _mm256_xor_ps(p, _mm256_and_ps(LaneMask(bits[b]), sign));
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
  }
  alignas(32) double acc[8];
  _mm256_store_pd(acc, lo);
  _mm256_store_pd(acc + 4, hi);
  for (size_t i = 8 * full; i < n; ++i) {
    const float p = e != nullptr ? g[i] + e[i] : g[i];
    acc[i % 8] += static_cast<double>(Flip(p, BitAt(bits, i)));
  }
  return Combine(acc);
}

FRUGAL_TARGET_V3 void SubtractCodewordV3(const float* g, float* e, const std::byte* bits, size_t n,
                                         float alpha) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 pos = _mm256_add_ps(zero, _mm256_set1_ps(alpha));
  const __m256 neg = _mm256_add_ps(zero, _mm256_set1_ps(-alpha));
  const size_t full = n / 8;
  for (size_t b = 0; b < full; ++b) {
    const __m256 p = _mm256_add_ps(_mm256_loadu_ps(g + 8 * b), _mm256_loadu_ps(e + 8 * b));
    const __m256 d = _mm256_blendv_ps(pos, neg, LaneMask(bits[b]));
    _mm256_storeu_ps(e + 8 * b, _mm256_sub_ps(p, d));
  }
  for (size_t i = 8 * full; i < n; ++i) {
    const float p = g[i] + e[i];
    e[i] = p - (0.0f + (BitAt(bits, i) ? -alpha : alpha));
  }
}

#endif

}  // namespace

double SignedSum(Kernels k, const float* g, const float* e, const std::byte* bits, size_t n) {
#if defined(FRUGAL_X86)
  if (UseV3(k)) return SignedSumV3(g, e, bits, n);
#endif
  return SignedSumGeneric(g, e, bits, n);
}

void SubtractCodeword(Kernels k, const float* g, float* e, const std::byte* bits, size_t n,
                      float alpha) {
#if defined(FRUGAL_X86)
  if (UseV3(k)) {
    SubtractCodewordV3(g, e, bits, n, alpha);
    return;
  }
#endif
  SubtractCodewordGeneric(g, e, bits, n, alpha);
}

}  // namespace frugal::polar
