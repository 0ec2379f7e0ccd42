// The x86-64-v3 SC encoders (polar_sc_kernels.h), compiled with target attributes and run only on
// CPUs that have AVX2 (compress_internal::UseV3).
//
// Lanes: eight blocks at once, block b in lane b of every vector, position-major. Load transposes
// 8x8 floats from the eight blocks, checks that every value is finite, maps the LLRs and notes
// each lane's largest magnitude (a lane at 2^106 or more is loaded again scaled by 2^-24); the
// interpreter runs the schedule on vectors; Extract takes the sign bits of eight positions of the
// eight lanes and transposes them (8x8 bits) into each block's codeword.
//
// Contiguous: one block, positions consecutive; each step of a node covers its positions eight
// to a vector and the last few one by one, with the same operation on every element.
#include <algorithm>
#include <bit>
#include <memory>

#include "compress/polar_sc_kernels.h"
#include "compress/quant_util.h"

#if defined(FRUGAL_X86)

namespace frugal::polar::sc_internal {
namespace {

FRUGAL_TARGET_V3 inline __m256 SignMask() {
  return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kSignBit)));
}
FRUGAL_TARGET_V3 inline __m256 F8(__m256 a, __m256 b) {
  const __m256 sign = SignMask();
  const __m256 mag = _mm256_min_ps(_mm256_andnot_ps(sign, a), _mm256_andnot_ps(sign, b));
  return _mm256_or_ps(mag, _mm256_and_ps(_mm256_xor_ps(a, b), sign));
}
FRUGAL_TARGET_V3 inline __m256 G8(__m256 b, __m256 a, __m256 x) {
  return _mm256_add_ps(b, _mm256_xor_ps(a, x));
}
FRUGAL_TARGET_V3 inline __m256 Hard8(__m256 a) {
  return _mm256_and_ps(_mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_LT_OQ), SignMask());
}
FRUGAL_TARGET_V3 inline __m256 ZeroMask8(__m256 a) {
  return _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_EQ_OQ);
}

// ----- lanes -----

namespace lanes {

struct alignas(32) V8 {
  __m256 v;
};
FRUGAL_TARGET_V3 inline V8 F(V8 a, V8 b) { return {F8(a.v, b.v)}; }
FRUGAL_TARGET_V3 inline V8 G(V8 b, V8 a, V8 x) { return {G8(b.v, a.v, x.v)}; }
FRUGAL_TARGET_V3 inline V8 Hard(V8 a) { return {Hard8(a.v)}; }
FRUGAL_TARGET_V3 inline V8 Xor(V8 a, V8 b) { return {_mm256_xor_ps(a.v, b.v)}; }
FRUGAL_TARGET_V3 inline V8 ZeroMask(V8 a) { return {ZeroMask8(a.v)}; }
FRUGAL_TARGET_V3 inline V8 Or(V8 a, V8 b) { return {_mm256_or_ps(a.v, b.v)}; }
FRUGAL_TARGET_V3 inline bool Any(V8 m) { return _mm256_movemask_ps(m.v) != 0; }

using V = V8;
#define POLAR_TARGET FRUGAL_TARGET_V3
#define POLAR_GENERIC_STEPS
#include "compress/polar_sc_body.inc"
#undef POLAR_GENERIC_STEPS
#undef POLAR_TARGET

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

// The 8x8 bit matrix in x (byte = row, bit = column) transposed.
inline uint64_t TransposeBits8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

// Loads eight blocks with per-lane scale factors. Returns each lane's largest input magnitude;
// `finite` becomes false if an input is not finite.
FRUGAL_TARGET_V3 __m256 Load(std::span<const ScBlock> blocks, size_t size, LlrMode mode,
                             __m256 scale, V8* top, bool* finite) {
  const __m256 sign = SignMask();
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

// The codewords of the group's blocks from the sign bits of x.
FRUGAL_TARGET_V3 void Extract(const V8* x, size_t size, size_t blocks, uint64_t* x_words) {
  const size_t words = size / 64 > 1 ? size / 64 : 1;
  for (size_t j = 0; j < size; j += 8) {
    uint64_t rows = 0;
    for (size_t r = 0; r < 8 && j + r < size; ++r) {
      rows |= uint64_t{static_cast<uint8_t>(_mm256_movemask_ps(x[j + r].v))} << (8 * r);
    }
    const uint64_t columns = TransposeBits8(rows);
    for (size_t b = 0; b < blocks; ++b) {
      reinterpret_cast<uint8_t*>(x_words + b * words)[j / 8] =
          static_cast<uint8_t>(columns >> (8 * b));
    }
  }
  if (size < 64) {
    for (size_t b = 0; b < blocks; ++b) x_words[b] &= (uint64_t{1} << size) - 1;
  }
}

}  // namespace lanes

// ----- contiguous -----

namespace contiguous {

FRUGAL_TARGET_V3 inline void FStep(const float* l, size_t h, float* out) {
  size_t i = 0;
  for (; i + 8 <= h; i += 8) {
    _mm256_storeu_ps(out + i, F8(_mm256_loadu_ps(l + i), _mm256_loadu_ps(l + h + i)));
  }
  for (; i < h; ++i) out[i] = F(l[i], l[h + i]);
}
FRUGAL_TARGET_V3 inline void GStep(const float* l, size_t h, const float* x, float* out) {
  size_t i = 0;
  for (; i + 8 <= h; i += 8) {
    _mm256_storeu_ps(
        out + i, G8(_mm256_loadu_ps(l + h + i), _mm256_loadu_ps(l + i), _mm256_loadu_ps(x + i)));
  }
  for (; i < h; ++i) out[i] = G(l[h + i], l[i], x[i]);
}
FRUGAL_TARGET_V3 inline void AddStep(const float* l, size_t h, float* out) {
  size_t i = 0;
  for (; i + 8 <= h; i += 8) {
    _mm256_storeu_ps(out + i,
                     G8(_mm256_loadu_ps(l + h + i), _mm256_loadu_ps(l + i), _mm256_setzero_ps()));
  }
  for (; i < h; ++i) out[i] = G(l[h + i], l[i], 0.0f);
}
FRUGAL_TARGET_V3 inline void CombineStep(float* x, size_t h) {
  size_t i = 0;
  for (; i + 8 <= h; i += 8) {
    _mm256_storeu_ps(x + i, _mm256_xor_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + h + i)));
  }
  for (; i < h; ++i) x[i] = Xor(x[i], x[h + i]);
}
FRUGAL_TARGET_V3 inline void HardStep(const float* l, size_t s, float* x) {
  size_t i = 0;
  for (; i + 8 <= s; i += 8) _mm256_storeu_ps(x + i, Hard8(_mm256_loadu_ps(l + i)));
  for (; i < s; ++i) x[i] = Hard(l[i]);
}
FRUGAL_TARGET_V3 inline bool AnyZero(const float* l, size_t s) {
  __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= s; i += 8) zero = _mm256_or_ps(zero, ZeroMask8(_mm256_loadu_ps(l + i)));
  bool any = _mm256_movemask_ps(zero) != 0;
  for (; i < s; ++i) any |= l[i] == 0.0f;
  return any;
}
FRUGAL_TARGET_V3 inline void Fill(float* x, size_t s, float value) {
  size_t i = 0;
  for (; i + 8 <= s; i += 8) _mm256_storeu_ps(x + i, _mm256_set1_ps(value));
  for (; i < s; ++i) x[i] = value;
}

using V = float;
#define POLAR_TARGET FRUGAL_TARGET_V3
#include "compress/polar_sc_body.inc"
#undef POLAR_TARGET

// Byte j of the codeword from the sign bits of positions 8j .. 8j + 7 (size >= 8).
FRUGAL_TARGET_V3 void Extract(const float* x, size_t size, uint8_t* bytes) {
  for (size_t j = 0; j < size; j += 8) {
    bytes[j / 8] = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_loadu_ps(x + j)));
  }
}

}  // namespace contiguous

FRUGAL_TARGET_V3 bool EncodeLanesV3(const ScPlan& plan, LlrMode mode,
                                    std::span<const ScBlock> blocks, std::span<uint64_t> x_words) {
  if (blocks.empty()) return true;
  const size_t size = plan.size();
  const size_t words = std::max<size_t>(1, size / 64);
  const size_t padded = size < 8 ? 8 : size;
  // Every element is written before it is read.
  const auto top = std::make_unique_for_overwrite<lanes::V8[]>(padded);
  const auto levels = std::make_unique_for_overwrite<lanes::V8[]>(padded);
  const auto x = std::make_unique_for_overwrite<lanes::V8[]>(padded);
  const __m256 limit = _mm256_set1_ps(kScaleLimit);
  const __m256 ones = _mm256_set1_ps(1.0f);
  for (size_t first = 0; first < blocks.size(); first += 8) {
    const std::span<const ScBlock> group =
        blocks.subspan(first, std::min<size_t>(8, blocks.size() - first));
    bool finite = true;
    const __m256 max = lanes::Load(group, size, mode, ones, top.get(), &finite);
    if (!finite) return false;
    const __m256 large = _mm256_cmp_ps(max, limit, _CMP_GE_OQ);
    if (_mm256_movemask_ps(large) != 0) {
      lanes::Load(group, size, mode, _mm256_blendv_ps(ones, _mm256_set1_ps(kScaleDown), large),
                  top.get(), &finite);
    }
    lanes::RunPlan(plan, top.get(), levels.get(), x.get());
    lanes::Extract(x.get(), size, group.size(), x_words.data() + first * words);
  }
  return true;
}

FRUGAL_TARGET_V3 bool EncodeContiguousV3(const ScPlan& plan, LlrMode mode,
                                         std::span<const ScBlock> blocks,
                                         std::span<uint64_t> x_words) {
  if (blocks.empty()) return true;
  const size_t size = plan.size();
  const size_t words = std::max<size_t>(1, size / 64);
  const auto top = std::make_unique_for_overwrite<float[]>(size);
  const auto levels = std::make_unique_for_overwrite<float[]>(size);
  const auto x = std::make_unique_for_overwrite<float[]>(size);
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (!LoadBlockLlrs(blocks[b], size, mode, top.get())) return false;
    contiguous::RunPlan(plan, top.get(), levels.get(), x.get());
    auto* bytes = reinterpret_cast<uint8_t*>(x_words.data() + b * words);
    if (size < 8) {
      bytes[0] = 0;
      for (size_t i = 0; i < size; ++i) {
        bytes[0] |= static_cast<uint8_t>((std::bit_cast<uint32_t>(x[i]) >> 31) << i);
      }
      x_words[b * words] &= 0xff;
      continue;
    }
    contiguous::Extract(x.get(), size, bytes);
    if (size < 64) x_words[b * words] &= (uint64_t{1} << size) - 1;
  }
  return true;
}

}  // namespace

bool EncodeLanes(const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
                 std::span<uint64_t> x_words) {
  return EncodeLanesV3(plan, mode, blocks, x_words);
}

bool EncodeContiguous(const ScPlan& plan, LlrMode mode, std::span<const ScBlock> blocks,
                      std::span<uint64_t> x_words) {
  return EncodeContiguousV3(plan, mode, blocks, x_words);
}

}  // namespace frugal::polar::sc_internal

#endif
