// SC encoding of blocks (see polar_sc.h): the schedule, the two lane types and their loaders.
//
// A group of blocks is encoded in three steps. Load: p = g (+ e) of each block becomes its LLRs
// in lane layout (position-major, one lane per block), checking that every value is finite and
// noting each block's largest magnitude; a block whose maximum is 2^106 or more is loaded again
// scaled by 2^-24, so that no sum of up to 2^20 LLRs overflows (scaling by a power of two changes
// no decision). Run: the schedule's interpreter (polar_sc_body.inc). Extract: the sign-bit masks
// of x become each block's packed codeword; the AVX2 kernel moves eight positions of eight lanes
// at a time with an 8x8 bit transpose.
#include "compress/polar_sc.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace frugal::polar {

// ----- The schedule -----

ScPlan::ScPlan(const InfoSet& set) : m_(set.m) {
  const size_t size = set.size();
  std::vector<uint32_t> prefix(size + 1, 0);
  for (size_t i = 0; i < size; ++i) prefix[i + 1] = prefix[i] + (set.info(i) ? 1u : 0u);
  Build(prefix, 0, m_);
}

void ScPlan::Build(const std::vector<uint32_t>& prefix, uint32_t offset, int log_size) {
  const uint32_t s = uint32_t{1} << log_size;
  const uint32_t info = prefix[offset + s] - prefix[offset];
  const auto lg = static_cast<uint8_t>(log_size);
  if (info == 0) {
    ops_.push_back({Kind::kRate0, lg, offset});
  } else if (info == s) {
    ops_.push_back({Kind::kRate1, lg, offset});
  } else if (info == 1 && prefix[offset + s] - prefix[offset + s - 1] == 1) {
    ops_.push_back({Kind::kRep, lg, offset});
  } else {
    ops_.push_back({Kind::kF, lg, offset});
    Build(prefix, offset, log_size - 1);
    ops_.push_back({Kind::kG, lg, offset});
    Build(prefix, offset + s / 2, log_size - 1);
    ops_.push_back({Kind::kCombine, lg, offset});
  }
}

namespace {

constexpr float kScaleLimit = 0x1p106f;  // a block maximum from which LLRs are scaled
constexpr float kScaleDown = 0x1p-24f;
constexpr uint32_t kSignBit = 0x80000000u;

inline uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

// The LLR of value v (already scaled) at a real position.
inline float MapLlr(float v, LlrMode mode) {
  if (mode == LlrMode::kSign) return v < 0.0f ? -1.0f : 1.0f;
  if (std::fabs(v) < FLT_MIN) return v < 0.0f ? -FLT_MIN : FLT_MIN;
  return v;
}

// ----- Baseline: one block, one float -----

struct V1 {
  float v;
  static V1 Zero() { return {0.0f}; }
  static V1 F(V1 a, V1 b) { return {MinSumF(a.v, b.v)}; }
  static V1 G(V1 b, V1 a, V1 x) { return {b.v + FromBits(Bits(a.v) ^ Bits(x.v))}; }
  static V1 Hard(V1 a) { return {a.v < 0.0f ? FromBits(kSignBit) : 0.0f}; }
  static V1 Xor(V1 a, V1 b) { return {FromBits(Bits(a.v) ^ Bits(b.v))}; }
  static V1 ZeroMask(V1 a) { return {a.v == 0.0f ? FromBits(kSignBit) : 0.0f}; }
  static V1 Or(V1 a, V1 b) { return {FromBits(Bits(a.v) | Bits(b.v))}; }
  static bool Any(V1 m) { return Bits(m.v) != 0; }
};

namespace baseline {
using V = V1;
#define POLAR_TARGET
#include "compress/polar_sc_body.inc"
#undef POLAR_TARGET
}  // namespace baseline

}  // namespace

bool LoadBlockLlrs(const ScBlock& b, size_t size, LlrMode mode, float* llr) {
  float max = 0.0f;
  for (size_t i = 0; i < b.count; ++i) {
    const float p = b.e != nullptr ? b.g[i] + b.e[i] : b.g[i];
    const float a = std::fabs(p);
    if (!(a <= FLT_MAX)) return false;
    max = a > max ? a : max;
  }
  const float scale = max >= kScaleLimit ? kScaleDown : 1.0f;
  for (size_t i = 0; i < size; ++i) {
    if (i < b.count) {
      const float p = b.e != nullptr ? b.g[i] + b.e[i] : b.g[i];
      llr[i] = MapLlr(p * scale, mode);
    } else {
      llr[i] = 0.0f;
    }
  }
  return true;
}

namespace {

bool EncodeBaseline(const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
                    std::span<uint64_t> x_words) {
  const size_t size = plan.size();
  const size_t words = std::max<size_t>(1, size / 64);
  std::vector<float> llr(size);
  std::vector<V1> top(size), levels(size), x(size);
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (!LoadBlockLlrs(blocks[b], size, mode, llr.data())) return false;
    for (size_t i = 0; i < size; ++i) top[i].v = llr[i];
    baseline::RunPlan(plan, top.data(), levels.data(), x.data());
    uint64_t* out = x_words.data() + b * words;
    for (size_t w = 0; w < words; ++w) out[w] = 0;
    for (size_t i = 0; i < size; ++i) out[i / 64] |= uint64_t{Bits(x[i].v) >> 31} << (i % 64);
  }
  return true;
}

#if defined(FRUGAL_X86)
// ----- x86-64-v3: eight blocks, one per AVX2 lane -----

struct alignas(32) V8 {
  __m256 v;
  FRUGAL_TARGET_V3 static __m256 SignMask() {
    return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kSignBit)));
  }
  FRUGAL_TARGET_V3 static V8 Zero() { return {_mm256_setzero_ps()}; }
  FRUGAL_TARGET_V3 static V8 F(V8 a, V8 b) {
    const __m256 sign = SignMask();
    const __m256 mag = _mm256_min_ps(_mm256_andnot_ps(sign, a.v), _mm256_andnot_ps(sign, b.v));
    return {_mm256_or_ps(mag, _mm256_and_ps(_mm256_xor_ps(a.v, b.v), sign))};
  }
  FRUGAL_TARGET_V3 static V8 G(V8 b, V8 a, V8 x) {
    return {_mm256_add_ps(b.v, _mm256_xor_ps(a.v, x.v))};
  }
  FRUGAL_TARGET_V3 static V8 Hard(V8 a) {
    return {_mm256_and_ps(_mm256_cmp_ps(a.v, _mm256_setzero_ps(), _CMP_LT_OQ), SignMask())};
  }
  FRUGAL_TARGET_V3 static V8 Xor(V8 a, V8 b) { return {_mm256_xor_ps(a.v, b.v)}; }
  FRUGAL_TARGET_V3 static V8 ZeroMask(V8 a) {
    return {_mm256_cmp_ps(a.v, _mm256_setzero_ps(), _CMP_EQ_OQ)};
  }
  FRUGAL_TARGET_V3 static V8 Or(V8 a, V8 b) { return {_mm256_or_ps(a.v, b.v)}; }
  FRUGAL_TARGET_V3 static bool Any(V8 m) { return _mm256_movemask_ps(m.v) != 0; }
};

namespace avx2 {
using V = V8;
#define POLAR_TARGET FRUGAL_TARGET_V3
#include "compress/polar_sc_body.inc"
#undef POLAR_TARGET
}  // namespace avx2

FRUGAL_TARGET_V3 inline void Transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Byte r of the result holds bit c of byte c ... : the 8x8 bit matrix (byte = row, bit = column)
// transposed.
inline uint64_t TransposeBits8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

// Loads up to eight blocks into lane layout with per-lane scale factors. Returns the per-lane
// maximum magnitude of the inputs; `finite` becomes false if one is not finite.
FRUGAL_TARGET_V3 __m256 LoadEight(std::span<const ScBlock> blocks, size_t size, LlrMode mode,
                                  __m256 scale, V8* top, bool* finite) {
  const __m256 sign = V8::SignMask();
  const __m256 flt_max = _mm256_set1_ps(FLT_MAX), flt_min = _mm256_set1_ps(FLT_MIN);
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  alignas(32) int32_t count_lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t b = 0; b < blocks.size(); ++b) count_lanes[b] = static_cast<int32_t>(blocks[b].count);
  const __m256i counts = _mm256_load_si256(reinterpret_cast<const __m256i*>(count_lanes));
  __m256 max = zero, bad = zero;
  alignas(32) float partial[8];
  for (size_t j = 0; j < size; j += 8) {
    __m256 r[8];
    for (size_t b = 0; b < 8; ++b) {
      const ScBlock* block = b < blocks.size() ? &blocks[b] : nullptr;
      if (block != nullptr && j + 8 <= block->count) {
        r[b] = _mm256_loadu_ps(block->g + j);
        if (block->e != nullptr) r[b] = _mm256_add_ps(r[b], _mm256_loadu_ps(block->e + j));
      } else {
        for (size_t i = 0; i < 8; ++i) {
          const size_t at = j + i;
          partial[i] = block != nullptr && at < block->count
                           ? (block->e != nullptr ? block->g[at] + block->e[at] : block->g[at])
                           : 0.0f;
        }
        r[b] = _mm256_load_ps(partial);
      }
    }
    Transpose8(r);
    const size_t positions = size - j < 8 ? size - j : 8;
    for (size_t i = 0; i < positions; ++i) {
      const __m256 abs = _mm256_andnot_ps(sign, r[i]);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(abs, flt_max, _CMP_NLE_UQ));
      max = _mm256_max_ps(max, abs);
      const __m256 p = _mm256_mul_ps(r[i], scale);
      const __m256 negative = _mm256_cmp_ps(p, zero, _CMP_LT_OQ);
      __m256 llr;
      if (mode == LlrMode::kSign) {
        llr = _mm256_blendv_ps(one, _mm256_xor_ps(one, sign), negative);
      } else {
        const __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, p), flt_min, _CMP_LT_OQ);
        const __m256 floor = _mm256_blendv_ps(flt_min, _mm256_xor_ps(flt_min, sign), negative);
        llr = _mm256_blendv_ps(p, floor, tiny);
      }
      const __m256i real =
          _mm256_cmpgt_epi32(counts, _mm256_set1_epi32(static_cast<int32_t>(j + i)));
      top[j + i].v = _mm256_and_ps(llr, _mm256_castsi256_ps(real));
    }
  }
  *finite = _mm256_movemask_ps(bad) == 0;
  return max;
}

FRUGAL_TARGET_V3 bool EncodeAvx2(const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
                                 std::span<uint64_t> x_words) {
  const size_t size = plan.size();
  const size_t words = std::max<size_t>(1, size / 64);
  const size_t padded = size < 8 ? 8 : size;
  std::vector<V8> top(padded), levels(padded), x(padded);
  const __m256 limit = _mm256_set1_ps(kScaleLimit);
  const __m256 ones = _mm256_set1_ps(1.0f);
  for (size_t first = 0; first < blocks.size(); first += 8) {
    const std::span<const ScBlock> group =
        blocks.subspan(first, blocks.size() - first < 8 ? blocks.size() - first : 8);
    bool finite = true;
    const __m256 max = LoadEight(group, size, mode, ones, top.data(), &finite);
    if (!finite) return false;
    const __m256 large = _mm256_cmp_ps(max, limit, _CMP_GE_OQ);
    if (_mm256_movemask_ps(large) != 0) {
      LoadEight(group, size, mode, _mm256_blendv_ps(ones, _mm256_set1_ps(kScaleDown), large),
                top.data(), &finite);
    }
    avx2::RunPlan(plan, top.data(), levels.data(), x.data());
    for (size_t j = 0; j < size; j += 8) {
      uint64_t rows = 0;
      for (size_t r = 0; r < 8 && j + r < size; ++r) {
        rows |= uint64_t{static_cast<uint8_t>(_mm256_movemask_ps(x[j + r].v))} << (8 * r);
      }
      const uint64_t columns = TransposeBits8(rows);
      for (size_t b = 0; b < group.size(); ++b) {
        auto* bytes = reinterpret_cast<uint8_t*>(x_words.data() + (first + b) * words);
        bytes[j / 8] = static_cast<uint8_t>(columns >> (8 * b));
      }
    }
    if (size < 64) {
      for (size_t b = 0; b < group.size(); ++b) x_words[first + b] &= (uint64_t{1} << size) - 1;
    }
  }
  return true;
}
#endif

}  // namespace

bool ScEncode(Kernels k, const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
              std::span<uint64_t> x_words) {
  const size_t words = std::max<size_t>(1, plan.size() / 64);
  FRUGAL_CHECK_GE(x_words.size(), blocks.size() * words, "codeword words for the blocks");
  for (const ScBlock& b : blocks) FRUGAL_CHECK_LE(b.count, plan.size(), "block of a polar code");
#if defined(FRUGAL_X86)
  if (compress_internal::UseV3(k)) return EncodeAvx2(plan, mode, blocks, x_words);
#endif
  return EncodeBaseline(plan, mode, blocks, x_words);
}

}  // namespace frugal::polar
