#include "compress/quant_util.h"

#include <fmt/format.h>

#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace frugal::compress_internal {

namespace {

#if defined(FRUGAL_X86)
// AVX2, FMA, BMI1/2 and F16C from CPUID, and the AVX register state enabled by the OS (XGETBV).
bool DetectX86V3() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
             f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0x6u) != 0x6u) return false;  // SSE and AVX state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool bmi1 = b & (1u << 3), avx2 = b & (1u << 5), bmi2 = b & (1u << 8);
  return bmi1 && avx2 && bmi2;
}
#endif

}  // namespace

bool HasX86V3() {
#if defined(FRUGAL_X86)
  // Computed once; a constant of the machine, not mutable state.
  static const bool has = DetectX86V3();
  return has;
#else
  return false;
#endif
}

Kernels BestKernels() { return HasX86V3() ? Kernels::kX86V3 : Kernels::kBaseline; }

bool UseV3(Kernels k) {
  if (k != Kernels::kX86V3) return false;
  FRUGAL_CHECK(HasX86V3(), "the x86-64-v3 kernels need a CPU with AVX2, FMA, BMI2 and F16C");
  return true;
}

namespace {

// The kernels below are written once as always-inline bodies and instantiated twice: for the
// baseline ISA and for x86-64-v3 (where the compiler vectorizes them). Both instantiations compute
// the same bits: the floating-point operations are the same, in the same order.
// Sign bits (and, with want_l1, sum |p[i]|) of p = x, or of p = x + e when kCompensate (error
// feedback of the scaled sign): eight double accumulators, lane j summing |p[8b + j]|, added in a
// fixed order.
template <bool kCompensate>
FRUGAL_INLINE double PackSignsBody(const float* x, const float* e, size_t n, std::byte* out,
                                   bool want_l1) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  auto at = [&](size_t i) { return kCompensate ? x[i] + e[i] : x[i]; };
  const size_t full = n / 8;
  for (size_t b = 0; b < full; ++b) {
    unsigned byte = 0;
    for (int j = 0; j < 8; ++j) {
      const float p = at(8 * b + j);
      byte |= static_cast<unsigned>(p < 0.0f) << j;
      if (want_l1) acc[j] += static_cast<double>(std::fabs(p));
    }
    out[b] = static_cast<std::byte>(byte);
  }
  if (const size_t rest = n - 8 * full; rest > 0) {
    unsigned byte = 0;
    for (size_t j = 0; j < rest; ++j) {
      const float p = at(8 * full + j);
      byte |= static_cast<unsigned>(p < 0.0f) << j;
      if (want_l1) acc[j] += static_cast<double>(std::fabs(p));
    }
    out[full] = static_cast<std::byte>(byte);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

FRUGAL_INLINE void AddSignsBody(const std::byte* bits, size_t n, float pos, float neg, float* out) {
  size_t full = n / 8;
  for (size_t b = 0; b < full; ++b) {
    unsigned byte = std::to_integer<unsigned>(bits[b]);
    float* o = out + 8 * b;
    for (int j = 0; j < 8; ++j) o[j] += ((byte >> j) & 1u) ? neg : pos;
  }
  for (size_t i = 8 * full; i < n; ++i) {
    out[i] += ((std::to_integer<unsigned>(bits[i / 8]) >> (i % 8)) & 1u) ? neg : pos;
  }
}

FRUGAL_INLINE void SubtractScaledSignsBody(const float* g, float* e, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) {
    const float p = g[i] + e[i];
    e[i] = p - (0.0f + (p < 0.0f ? -scale : scale));
  }
}

double CompensatePackGeneric(const float* g, const float* e, size_t n, std::byte* out) {
  return PackSignsBody<true>(g, e, n, out, true);
}
void SubtractScaledSignsGeneric(const float* g, float* e, size_t n, float scale) {
  SubtractScaledSignsBody(g, e, n, scale);
}

double PackSignsGeneric(const float* x, size_t n, std::byte* out, bool l1) {
  return PackSignsBody<false>(x, nullptr, n, out, l1);
}
void AddSignsGeneric(const std::byte* bits, size_t n, float pos, float neg, float* out) {
  AddSignsBody(bits, n, pos, neg, out);
}

#if defined(FRUGAL_X86)
// PackSignsBody with AVX2, the same accumulation order.
template <bool kCompensate>
FRUGAL_TARGET_V3 FRUGAL_INLINE double PackSignsV3Body(const float* x, const float* e, size_t n,
                                                      std::byte* out, bool want_l1) {
  __m256d acc_lo = _mm256_setzero_pd();
  __m256d acc_hi = _mm256_setzero_pd();
  const __m256 zero = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const size_t full = n / 8;
  for (size_t b = 0; b < full; ++b) {
    __m256 v = _mm256_loadu_ps(x + 8 * b);
    if (kCompensate) v = _mm256_add_ps(v, _mm256_loadu_ps(e + 8 * b));
    out[b] = static_cast<std::byte>(_mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_LT_OQ)));
    if (want_l1) {
      const __m256 a = _mm256_and_ps(v, abs_mask);
      acc_lo = _mm256_add_pd(acc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
      acc_hi = _mm256_add_pd(acc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
    }
  }
  alignas(32) double acc[8];
  _mm256_store_pd(acc, acc_lo);
  _mm256_store_pd(acc + 4, acc_hi);
  if (const size_t rest = n - 8 * full; rest > 0) {
    unsigned byte = 0;
    for (size_t j = 0; j < rest; ++j) {
      const size_t i = 8 * full + j;
      const float p = kCompensate ? x[i] + e[i] : x[i];
      byte |= static_cast<unsigned>(p < 0.0f) << j;
      if (want_l1) acc[j] += static_cast<double>(std::fabs(p));
    }
    out[full] = static_cast<std::byte>(byte);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

FRUGAL_TARGET_V3 double PackSignsV3(const float* x, size_t n, std::byte* out, bool want_l1) {
  return PackSignsV3Body<false>(x, nullptr, n, out, want_l1);
}
FRUGAL_TARGET_V3 double CompensatePackV3(const float* g, const float* e, size_t n, std::byte* out) {
  return PackSignsV3Body<true>(g, e, n, out, true);
}

FRUGAL_TARGET_V3 void SubtractScaledSignsV3(const float* g, float* e, size_t n, float scale) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 vpos = _mm256_add_ps(zero, _mm256_set1_ps(scale));
  const __m256 vneg = _mm256_add_ps(zero, _mm256_set1_ps(-scale));
  const size_t full = n / 8;
  for (size_t b = 0; b < full; ++b) {
    const __m256 p = _mm256_add_ps(_mm256_loadu_ps(g + 8 * b), _mm256_loadu_ps(e + 8 * b));
    const __m256 d = _mm256_blendv_ps(vpos, vneg, _mm256_cmp_ps(p, zero, _CMP_LT_OQ));
    _mm256_storeu_ps(e + 8 * b, _mm256_sub_ps(p, d));
  }
  SubtractScaledSignsBody(g + 8 * full, e + 8 * full, n - 8 * full, scale);
}

FRUGAL_TARGET_V3 void AddSignsV3(const std::byte* bits, size_t n, float pos, float neg,
                                 float* out) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 vpos = _mm256_set1_ps(pos);
  const __m256 vneg = _mm256_set1_ps(neg);
  size_t full = n / 8;
  for (size_t b = 0; b < full; ++b) {
    __m256i byte = _mm256_set1_epi32(std::to_integer<int>(bits[b]));
    __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bit), lane_bit);
    __m256 v = _mm256_blendv_ps(vpos, vneg, _mm256_castsi256_ps(set));
    _mm256_storeu_ps(out + 8 * b, _mm256_add_ps(_mm256_loadu_ps(out + 8 * b), v));
  }
  for (size_t i = 8 * full; i < n; ++i) {
    out[i] += ((std::to_integer<unsigned>(bits[i / 8]) >> (i % 8)) & 1u) ? neg : pos;
  }
}
#endif

}  // namespace

void PackSigns(Kernels k, const float* x, size_t n, std::byte* out) {
#if defined(FRUGAL_X86)
  if (UseV3(k)) {
    PackSignsV3(x, n, out, false);
    return;
  }
#endif
  PackSignsGeneric(x, n, out, false);
}

double PackSignsL1(Kernels k, const float* x, size_t n, std::byte* out) {
#if defined(FRUGAL_X86)
  if (UseV3(k)) return PackSignsV3(x, n, out, true);
#endif
  return PackSignsGeneric(x, n, out, true);
}

double CompensatePackSignsL1(Kernels k, const float* g, const float* e, size_t n, std::byte* out) {
#if defined(FRUGAL_X86)
  if (UseV3(k)) return CompensatePackV3(g, e, n, out);
#endif
  return CompensatePackGeneric(g, e, n, out);
}

void SubtractScaledSigns(Kernels k, const float* g, float* e, size_t n, float scale) {
#if defined(FRUGAL_X86)
  if (UseV3(k)) {
    SubtractScaledSignsV3(g, e, n, scale);
    return;
  }
#endif
  SubtractScaledSignsGeneric(g, e, n, scale);
}

void AddSigns(Kernels k, const std::byte* bits, size_t n, float pos, float neg, float* out) {
#if defined(FRUGAL_X86)
  if (UseV3(k)) {
    AddSignsV3(bits, n, pos, neg, out);
    return;
  }
#endif
  AddSignsGeneric(bits, n, pos, neg, out);
}

Status CheckSignPadding(const std::byte* bits, size_t n, std::string_view what) {
  if (n % 8 == 0) return Status::Ok();
  unsigned last = std::to_integer<unsigned>(bits[n / 8]);
  if ((last >> (n % 8)) != 0) {
    return MalformedError(fmt::format("{} payload: padding bits of the sign plane are set", what));
  }
  return Status::Ok();
}

namespace {

uint64_t ByteMask(int width) { return 0x0101010101010101ull * ((1ull << width) - 1); }

FRUGAL_INLINE uint64_t GatherGeneric(uint64_t x, int width) {
  uint64_t v = 0;
  for (int j = 0; j < 8; ++j) v |= ((x >> (8 * j)) & ((1ull << width) - 1)) << (j * width);
  return v;
}
FRUGAL_INLINE uint64_t ScatterGeneric(uint64_t v, int width) {
  uint64_t x = 0;
  for (int j = 0; j < 8; ++j) x |= ((v >> (j * width)) & ((1ull << width) - 1)) << (8 * j);
  return x;
}

// Groups of eight codes occupy exactly `width` bytes, so every group starts on a byte. GATHER(x)
// turns eight code bytes into 8 * width packed bits; SCATTER(v) is its inverse. (Macros, not
// lambdas: the BMI2 instructions must be expanded inside the function compiled for them.)
#define FRUGAL_PACK_BODY(GATHER)                                                 \
  const size_t total = CodeBytes(n, width);                                      \
  size_t g = 0;                                                                  \
  for (; 8 * g + 8 <= n; ++g) {                                                  \
    uint64_t x;                                                                  \
    std::memcpy(&x, codes + 8 * g, 8);                                           \
    uint64_t v = GATHER(x);                                                      \
    size_t at = g * static_cast<size_t>(width);                                  \
    /* Bytes beyond `width` are zero and rewritten by the next group. */         \
    std::memcpy(out + at, &v, at + 8 <= total ? 8 : static_cast<size_t>(width)); \
  }                                                                              \
  if (size_t rest = n - 8 * g; rest > 0) {                                       \
    uint64_t x = 0;                                                              \
    std::memcpy(&x, codes + 8 * g, rest);                                        \
    uint64_t v = GATHER(x);                                                      \
    size_t at = g * static_cast<size_t>(width);                                  \
    std::memcpy(out + at, &v, total - at);                                       \
  }

#define FRUGAL_UNPACK_BODY(SCATTER)                                             \
  const size_t total = CodeBytes(n, width);                                     \
  const uint64_t low = width == 8 ? ~0ull : (1ull << (8 * width)) - 1;          \
  size_t g = 0;                                                                 \
  for (; 8 * g + 8 <= n; ++g) {                                                 \
    size_t at = g * static_cast<size_t>(width);                                 \
    uint64_t v = 0;                                                             \
    std::memcpy(&v, in + at, at + 8 <= total ? 8 : static_cast<size_t>(width)); \
    uint64_t x = SCATTER(v & low);                                              \
    std::memcpy(codes + 8 * g, &x, 8);                                          \
  }                                                                             \
  if (size_t rest = n - 8 * g; rest > 0) {                                      \
    size_t at = g * static_cast<size_t>(width);                                 \
    uint64_t v = 0;                                                             \
    std::memcpy(&v, in + at, total - at);                                       \
    uint64_t x = SCATTER(v);                                                    \
    std::memcpy(codes + 8 * g, &x, rest);                                       \
  }

void PackGeneric(const uint8_t* codes, size_t n, int width, std::byte* out) {
#define FRUGAL_GATHER(x) GatherGeneric(x, width)
  FRUGAL_PACK_BODY(FRUGAL_GATHER)
#undef FRUGAL_GATHER
}
void UnpackGeneric(const std::byte* in, size_t n, int width, uint8_t* codes){
#define FRUGAL_SCATTER(v) ScatterGeneric(v, width)
    FRUGAL_UNPACK_BODY(FRUGAL_SCATTER)
#undef FRUGAL_SCATTER
}

#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 void PackV3(const uint8_t* codes, size_t n, int width, std::byte* out) {
  const uint64_t mask = ByteMask(width);
#define FRUGAL_GATHER(x) _pext_u64(x, mask)
  FRUGAL_PACK_BODY(FRUGAL_GATHER)
#undef FRUGAL_GATHER
}
FRUGAL_TARGET_V3 void UnpackV3(const std::byte* in, size_t n, int width, uint8_t* codes) {
  const uint64_t mask = ByteMask(width);
#define FRUGAL_SCATTER(v) _pdep_u64(v, mask)
  FRUGAL_UNPACK_BODY(FRUGAL_SCATTER)
#undef FRUGAL_SCATTER
}
#endif
#undef FRUGAL_PACK_BODY
#undef FRUGAL_UNPACK_BODY

}  // namespace

void PackCodes(Kernels k, const uint8_t* codes, size_t n, int width, std::byte* out) {
  FRUGAL_CHECK(width >= 1 && width <= 8, "code width ", width);
#if defined(FRUGAL_X86)
  if (UseV3(k)) return PackV3(codes, n, width, out);
#endif
  PackGeneric(codes, n, width, out);
}

void UnpackCodes(Kernels k, const std::byte* in, size_t n, int width, uint8_t* codes) {
  FRUGAL_CHECK(width >= 1 && width <= 8, "code width ", width);
#if defined(FRUGAL_X86)
  if (UseV3(k)) return UnpackV3(in, n, width, codes);
#endif
  UnpackGeneric(in, n, width, codes);
}

bool CodePaddingIsZero(const std::byte* in, size_t n, int width) {
  size_t bits = n * static_cast<size_t>(width);
  if (bits % 8 == 0) return true;
  return (std::to_integer<unsigned>(in[bits / 8]) >> (bits % 8)) == 0;
}

LaneRng::LaneRng(RngStream& seed_stream) {
  for (int l = 0; l < kLanes; ++l) {
    for (int w = 0; w < 4; ++w) s_[w][l] = seed_stream.NextU64();
    if ((s_[0][l] | s_[1][l] | s_[2][l] | s_[3][l]) == 0) s_[0][l] = 1;  // never all zero
  }
}

namespace {

FRUGAL_INLINE void LaneFillBody(uint64_t (&s)[4][LaneRng::kLanes], uint32_t* out, size_t count) {
  constexpr int kL = LaneRng::kLanes;
  for (size_t k = 0; k + 2 * kL <= count; k += 2 * kL) {
    for (int l = 0; l < kL; ++l) {
      uint64_t s1 = s[1][l];
      uint64_t m = (s1 << 2) + s1;        // s1 * 5
      uint64_t r = (m << 7) | (m >> 57);  // rotl(., 7)
      uint64_t result = (r << 3) + r;     // * 9
      uint64_t t = s1 << 17;
      s[2][l] ^= s[0][l];
      s[3][l] ^= s[1][l];
      s[1][l] ^= s[2][l];
      s[0][l] ^= s[3][l];
      s[2][l] ^= t;
      s[3][l] = (s[3][l] << 45) | (s[3][l] >> 19);
      out[k + l] = static_cast<uint32_t>(result);
      out[k + kL + l] = static_cast<uint32_t>(result >> 32);
    }
  }
}

void LaneFillGeneric(uint64_t (&s)[4][LaneRng::kLanes], uint32_t* out, size_t count) {
  LaneFillBody(s, out, count);
}
#if defined(FRUGAL_X86)
// The same generator on two AVX2 registers of four 64-bit lanes (lanes 0-3 and 4-7).
FRUGAL_TARGET_V3 void LaneFillV3(uint64_t (&s)[4][LaneRng::kLanes], uint32_t* out, size_t count) {
  constexpr int kL = LaneRng::kLanes;
  __m256i st[4][2];
  for (int w = 0; w < 4; ++w) {
    for (int h = 0; h < 2; ++h) {
      st[w][h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&s[w][4 * h]));
    }
  }
  for (size_t k = 0; k + 2 * kL <= count; k += 2 * kL) {
    __m256i result[2];
    for (int h = 0; h < 2; ++h) {
      __m256i s0 = st[0][h], s1 = st[1][h], s2 = st[2][h], s3 = st[3][h];
      __m256i m = _mm256_add_epi64(_mm256_slli_epi64(s1, 2), s1);
      __m256i r = _mm256_or_si256(_mm256_slli_epi64(m, 7), _mm256_srli_epi64(m, 57));
      result[h] = _mm256_add_epi64(_mm256_slli_epi64(r, 3), r);
      __m256i t = _mm256_slli_epi64(s1, 17);
      s2 = _mm256_xor_si256(s2, s0);
      s3 = _mm256_xor_si256(s3, s1);
      s1 = _mm256_xor_si256(s1, s2);
      s0 = _mm256_xor_si256(s0, s3);
      s2 = _mm256_xor_si256(s2, t);
      s3 = _mm256_or_si256(_mm256_slli_epi64(s3, 45), _mm256_srli_epi64(s3, 19));
      st[0][h] = s0;
      st[1][h] = s1;
      st[2][h] = s2;
      st[3][h] = s3;
    }
    // Low halves of lanes 0..7, then high halves, in lane order.
    __m256 a = _mm256_castsi256_ps(result[0]);
    __m256 b = _mm256_castsi256_ps(result[1]);
    __m256i lo = _mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    __m256i hi = _mm256_castps_si256(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    lo = _mm256_permute4x64_epi64(lo, _MM_SHUFFLE(3, 1, 2, 0));
    hi = _mm256_permute4x64_epi64(hi, _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k + kL), hi);
  }
  for (int w = 0; w < 4; ++w) {
    for (int h = 0; h < 2; ++h) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&s[w][4 * h]), st[w][h]);
    }
  }
}
#endif

}  // namespace

void LaneRng::Fill(Kernels k, uint32_t* out, size_t count) {
  FRUGAL_CHECK(count % (2 * kLanes) == 0, "LaneRng::Fill count ", count);
#if defined(FRUGAL_X86)
  if (UseV3(k)) {
    LaneFillV3(s_, out, count);
    return;
  }
#endif
  LaneFillGeneric(s_, out, count);
}

}  // namespace frugal::compress_internal
