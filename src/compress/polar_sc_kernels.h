// The pieces of SC encoding shared by the kernels of polar_sc.cc (baseline) and polar_sc_avx2.cc
// (x86-64-v3): the LLR map, the element operations on one float, and the AVX2 encoders. Internal
// to frugal_compress.
#pragma once

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <span>

#include "compress/polar_sc.h"

namespace frugal::polar::sc_internal {

inline constexpr float kScaleLimit = 0x1p106f;  // a block maximum from which LLRs are scaled
inline constexpr float kScaleDown = 0x1p-24f;
inline constexpr uint32_t kSignBit = 0x80000000u;

// The LLR of value v (already scaled) at a real position.
inline float MapLlr(float v, LlrMode mode) {
  if (mode == LlrMode::kSign) return v < 0.0f ? -1.0f : 1.0f;
  if (std::fabs(v) < FLT_MIN) return v < 0.0f ? -FLT_MIN : FLT_MIN;
  return v;
}

// The element operations on one float; partial sums are sign-bit masks (-0.0f for 1).
inline float F(float a, float b) { return MinSumF(a, b); }
inline float G(float b, float a, float x) {
  return b + std::bit_cast<float>(std::bit_cast<uint32_t>(a) ^ std::bit_cast<uint32_t>(x));
}
inline float Hard(float a) { return a < 0.0f ? -0.0f : 0.0f; }
inline float Xor(float a, float b) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(a) ^ std::bit_cast<uint32_t>(b));
}
inline float ZeroMask(float a) { return a == 0.0f ? -0.0f : 0.0f; }
inline float Or(float a, float b) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(a) | std::bit_cast<uint32_t>(b));
}
inline bool Any(float m) { return std::bit_cast<uint32_t>(m) != 0; }

#if defined(__x86_64__) || defined(__i386__)
// Eight blocks at a time, one per AVX2 lane (position-major layout).
bool EncodeLanes(const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
                 std::span<uint64_t> x_words);
// One block at a time, its positions eight to a vector in the steps of nodes of 16 or more.
bool EncodeContiguous(const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
                      std::span<uint64_t> x_words);
#endif

}  // namespace frugal::polar::sc_internal
