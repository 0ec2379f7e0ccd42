// qsgd: QSGD (Alistarh et al., 2017) with s = `levels` levels per bucket of `bucket` elements.
//
// For each bucket v (the last may be shorter) the encoder stores norm = ||v||_2 (float32) and, for
// each element, its sign and a level in {0, ..., s}: with r = |x| * s / norm, level = floor(r) + 1
// with probability r - floor(r), else floor(r), drawing u uniform in [0, 1) from the rank's
// stream (LaneRng over RngStream(ctx.Key(tensor))). Decoding gives sign * norm * level / s, an
// unbiased estimate of x whose variance per bucket is at most min(d / s^2, sqrt(d) / s) * ||v||^2
// (d = bucket length; Lemma 3.1 of the paper).
//
// Body: nbuckets float32 norms, then numel fixed-width codes of width = 1 + BitsFor(s + 1), packed
// LSB-first: the low BitsFor(s + 1) bits hold the level, the top bit the sign (set only when the
// element is negative and its level is not 0), zero padded to a byte. The decoder checks that
// every norm is finite and >= 0, every level <= s, no sign is set on a level 0 and the padding is
// zero, before it writes anything.
//
// EntropyCodedBits reports the size of the paper's variable-length code instead of the fixed
// width: 32 bits per norm plus, per element, the Elias-gamma code of level + 1 and a sign bit for
// nonzero levels.
#include <bit>
#include <cmath>

#include "compress/quant_util.h"
#include "frugal/bits.h"

namespace frugal::compress_internal {
namespace {

FRUGAL_INLINE double SumSquaresBody(const float* x, size_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      double v = x[i + j];
      acc[j] += v * v;
    }
  }
  for (; i < n; ++i) {
    double v = x[i];
    acc[i % 8] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// codes[i] = level | sign << level_bits.
template <typename Code>
FRUGAL_INLINE void LevelsBody(const float* x, size_t n, float scale, float max_level,
                              const uint32_t* random, int level_bits, Code* codes) {
  for (size_t i = 0; i < n; ++i) {
    float r = std::fabs(x[i]) * scale;
    float fl = std::floor(r);
    float level = fl + (ToUnit(random[i]) < r - fl ? 1.0f : 0.0f);
    level = level > max_level ? max_level : level;
    uint32_t l = static_cast<uint32_t>(static_cast<int32_t>(level));
    uint32_t neg = (x[i] < 0.0f && l != 0) ? 1u : 0u;
    codes[i] = static_cast<Code>(l | (neg << level_bits));
  }
}

// Returns nonzero if a byte code is invalid.
FRUGAL_INLINE uint32_t CheckCodesBody(const uint8_t* codes, size_t n, uint32_t level_mask,
                                      uint32_t max_level) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = codes[i];
    uint32_t level = c & level_mask;
    bad |= (level > max_level ? 1u : 0u) | ((level == 0 && c != 0) ? 1u : 0u);
  }
  return bad;
}

// out[i] += +-unit * level for byte codes (kAdd), or out[i] = +-unit * level (AddOrWrite).
template <bool kAdd>
FRUGAL_INLINE void AddLevelsBody(const uint8_t* codes, size_t n, uint32_t level_mask,
                                 int level_bits, float unit, float* out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = codes[i];
    float v = static_cast<float>(static_cast<int32_t>(c & level_mask)) * unit;
    uint32_t sign = (c >> level_bits) << 31;
    AddOrWrite<kAdd>(out[i], std::bit_cast<float>(std::bit_cast<uint32_t>(v) ^ sign));
  }
}

double SumSquaresGeneric(const float* x, size_t n) { return SumSquaresBody(x, n); }
template <typename Code>
void LevelsGeneric(const float* x, size_t n, float scale, float max_level, const uint32_t* random,
                   int level_bits, Code* codes) {
  LevelsBody(x, n, scale, max_level, random, level_bits, codes);
}
uint32_t CheckCodesGeneric(const uint8_t* c, size_t n, uint32_t mask, uint32_t max_level) {
  return CheckCodesBody(c, n, mask, max_level);
}
template <bool kAdd>
void AddLevelsGeneric(const uint8_t* c, size_t n, uint32_t mask, int bits, float unit, float* out) {
  AddLevelsBody<kAdd>(c, n, mask, bits, unit, out);
}
#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 double SumSquaresV3(const float* x, size_t n) { return SumSquaresBody(x, n); }
// LevelsBody with AVX2, the same operations in the same order.
template <typename Code>
FRUGAL_TARGET_V3 void LevelsV3(const float* x, size_t n, float scale, float max_level,
                               const uint32_t* random, int level_bits, Code* codes) {
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256 vmax = _mm256_set1_ps(max_level);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i izero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 r = _mm256_mul_ps(_mm256_and_ps(v, abs_mask), vscale);
    __m256 fl = _mm256_floor_ps(r);
    __m256 up = _mm256_cmp_ps(ToUnit8(random + i), _mm256_sub_ps(r, fl), _CMP_LT_OQ);
    __m256 level = _mm256_add_ps(fl, _mm256_and_ps(up, one));
    level = _mm256_min_ps(level, vmax);
    __m256i l = _mm256_cvttps_epi32(level);
    __m256i neg = _mm256_andnot_si256(_mm256_cmpeq_epi32(l, izero),
                                      _mm256_castps_si256(_mm256_cmp_ps(v, zero, _CMP_LT_OQ)));
    __m256i code = _mm256_or_si256(
        l, _mm256_sll_epi32(_mm256_srli_epi32(neg, 31), _mm_cvtsi32_si128(level_bits)));
    if constexpr (sizeof(Code) == 1) {
      StoreLowBytes(code, codes + i);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), code);
    }
  }
  LevelsBody(x + i, n - i, scale, max_level, random + i, level_bits, codes + i);
}
FRUGAL_TARGET_V3 uint32_t CheckCodesV3(const uint8_t* c, size_t n, uint32_t mask,
                                       uint32_t max_level) {
  return CheckCodesBody(c, n, mask, max_level);
}
template <bool kAdd>
FRUGAL_TARGET_V3 void AddLevelsV3(const uint8_t* c, size_t n, uint32_t mask, int bits, float unit,
                                  float* out) {
  AddLevelsBody<kAdd>(c, n, mask, bits, unit, out);
}
#endif

template <typename Code>
void Levels(bool v3, const float* x, size_t n, float scale, float max_level, const uint32_t* random,
            int level_bits, Code* codes) {
#if defined(FRUGAL_X86)
  if (v3) return LevelsV3(x, n, scale, max_level, random, level_bits, codes);
#endif
  LevelsGeneric(x, n, scale, max_level, random, level_bits, codes);
}

class QsgdCompressor final : public InPlaceDecoder<QsgdCompressor> {
 public:
  QsgdCompressor(uint32_t levels, size_t bucket)
      : InPlaceDecoder("qsgd", CompressorId::kQsgd,
                       CompressorTraits{.unbiased = true, .requantizable = true},
                       fmt::format("bucket={},levels={}", bucket, levels)),
        levels_(levels),
        bucket_(bucket),
        level_bits_(BitsFor(uint64_t{levels} + 1)),
        width_(level_bits_ + 1) {}

  static constexpr size_t kDecodeBlock = 8192;

  size_t NumBuckets(size_t numel) const { return (numel + bucket_ - 1) / bucket_; }
  size_t CodeBytes(size_t numel) const { return (numel * width_ + 7) / 8; }
  int width() const { return width_; }

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * (4 * NumBuckets(tensor.numel) + CodeBytes(tensor.numel));
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    const size_t n = input.size();
    const size_t nb = NumBuckets(n);
    std::span<std::byte> body = BeginPayload(*this, tensor, 4 * nb + CodeBytes(n), out);
    std::byte* packed = body.data() + 4 * nb;
    RngStream stream(ctx.Key(tensor));
    LaneRng rng(stream);
    std::vector<uint32_t> random((bucket_ + 15) / 16 * 16);
    const bool v3 = kernels() == Kernels::kX86V3;
    const float max_level = static_cast<float>(levels_);
    // Codes of up to 8 bits are packed by blocks of 8 buckets (a multiple of 8 codes, so every
    // block starts on a byte); wider ones go through the bit packer.
    const bool narrow = width_ <= 8;
    const size_t block = narrow ? 8 * bucket_ : bucket_;
    std::vector<uint8_t> narrow_codes(narrow ? block : 0);
    std::vector<uint32_t> wide_codes(narrow ? 0 : block);
    BitPacker packer(packed);
    for (size_t begin = 0; begin < n; begin += block) {
      const size_t block_len = std::min(block, n - begin);
      for (size_t off = 0; off < block_len; off += bucket_) {
        const size_t b = (begin + off) / bucket_;
        const float* x = input.data() + begin + off;
        const size_t len = std::min(bucket_, block_len - off);
#if defined(FRUGAL_X86)
        double ss = v3 ? SumSquaresV3(x, len) : SumSquaresGeneric(x, len);
#else
        double ss = SumSquaresGeneric(x, len);
#endif
        float norm = static_cast<float>(std::sqrt(ss));
        if (!std::isfinite(norm)) {
          return InvalidArgumentError(fmt::format(
              "qsgd: tensor '{}' has non-finite values (or a norm beyond float32) in bucket {}",
              tensor.name, b));
        }
        StoreF32(body.data() + 4 * b, norm);
        float scale = norm > 0.0f ? max_level / norm : 0.0f;
        rng.Fill(kernels(), random.data(), random.size());
        if (narrow) {
          Levels(v3, x, len, scale, max_level, random.data(), level_bits_,
                 narrow_codes.data() + off);
        } else {
          Levels(v3, x, len, scale, max_level, random.data(), level_bits_, wide_codes.data());
          for (size_t i = 0; i < len; ++i) packer.Put(wide_codes[i], width_);
        }
      }
      if (narrow)
        PackCodes(kernels(), narrow_codes.data(), block_len, width_, packed + begin * width_ / 8);
    }
    if (!narrow) packer.Flush();
    return Status::Ok();
  }

  // The body's size and norms; kMalformed on the first invalid one.
  Status ValidateNorms(std::span<const std::byte> body, size_t n) const {
    const size_t nb = NumBuckets(n);
    if (body.size() != 4 * nb + CodeBytes(n)) {
      return MalformedError(fmt::format("qsgd payload: body of {} bytes, expected {}", body.size(),
                                        4 * nb + CodeBytes(n)));
    }
    for (size_t b = 0; b < nb; ++b) {
      float norm = LoadF32(body.data() + 4 * b);
      if (!std::isfinite(norm) || norm < 0.0f) {
        return MalformedError(fmt::format("qsgd payload: bucket {} has norm {}", b, norm));
      }
    }
    return Status::Ok();
  }

  // Codes of up to 8 bits (width_ <= 8): unpacks all n codes of a body whose size is checked into
  // codes[0, n) and checks them and the padding; kMalformed on the first invalid block.
  Status UnpackChecked(const std::byte* packed, size_t n, uint8_t* codes) const {
    const bool v3 = kernels() == Kernels::kX86V3;
    const uint32_t level_mask = (1u << level_bits_) - 1;
    for (size_t begin = 0; begin < n; begin += kDecodeBlock) {
      size_t len = std::min(kDecodeBlock, n - begin);
      uint8_t* block = codes + begin;
      UnpackCodes(kernels(), packed + begin * width_ / 8, len, width_, block);
#if defined(FRUGAL_X86)
      uint32_t bad = v3 ? CheckCodesV3(block, len, level_mask, levels_)
                        : CheckCodesGeneric(block, len, level_mask, levels_);
#else
      uint32_t bad = CheckCodesGeneric(block, len, level_mask, levels_);
#endif
      if (bad != 0) {
        return MalformedError(
            fmt::format("qsgd payload: invalid code among elements [{}, {}) (levels={})", begin,
                        begin + len, levels_));
      }
    }
    if (!CodePaddingIsZero(packed, n, width_)) {
      return MalformedError("qsgd payload: padding bits are set");
    }
    return Status::Ok();
  }

  // Codes wider than 8 bits: checks every code and the padding.
  Status CheckWideCodes(std::span<const std::byte> body, size_t n) const {
    const uint32_t level_mask = (1u << level_bits_) - 1;
    BitUnpacker unpacker(body.data() + 4 * NumBuckets(n), body.data() + body.size());
    for (size_t i = 0; i < n; ++i) {
      uint32_t code = unpacker.Get(width_);
      uint32_t level = code & level_mask;
      if (level > levels_ || (level == 0 && code != 0)) {
        return MalformedError(
            fmt::format("qsgd payload: element {} has code {} (levels={})", i, code, levels_));
      }
    }
    if (unpacker.leftover() != 0) return MalformedError("qsgd payload: padding bits are set");
    return Status::Ok();
  }

  // Checks every field of the body; kMalformed on the first invalid one.
  Status Validate(std::span<const std::byte> body, size_t n) const {
    FRUGAL_RETURN_IF_ERROR(ValidateNorms(body, n));
    if (width_ > 8) return CheckWideCodes(body, n);
    std::vector<uint8_t> codes(n);
    return UnpackChecked(body.data() + 4 * NumBuckets(n), n, codes.data());
  }

  // Decode (kAdd) or DecodeOverwrite: validates everything before it writes anything. Codes of
  // up to 8 bits are unpacked once, into a buffer of the thread's that the check and the
  // decoding both read (one byte per element of the largest tensor the thread has decoded, kept
  // for the next call).
  template <bool kAdd>
  Status DecodeInto(std::span<const std::byte> payload, const TensorInfo& tensor,
                    std::span<float> output) const {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const size_t n = tensor.numel;
    FRUGAL_RETURN_IF_ERROR(ValidateNorms(body, n));
    const size_t nb = NumBuckets(n);
    const std::byte* packed = body.data() + 4 * nb;
    const uint32_t level_mask = (1u << level_bits_) - 1;
    if (width_ <= 8) {
      thread_local std::vector<uint8_t> codes;
      if (codes.size() < n) codes.resize(n);
      FRUGAL_RETURN_IF_ERROR(UnpackChecked(packed, n, codes.data()));
      const bool v3 = kernels() == Kernels::kX86V3;
      for (size_t b = 0; b < nb; ++b) {
        const size_t begin = b * bucket_;
        const size_t len = std::min(bucket_, n - begin);
        const float unit = LoadF32(body.data() + 4 * b) / static_cast<float>(levels_);
#if defined(FRUGAL_X86)
        if (v3) {
          AddLevelsV3<kAdd>(codes.data() + begin, len, level_mask, level_bits_, unit,
                            output.data() + begin);
          continue;
        }
#endif
        AddLevelsGeneric<kAdd>(codes.data() + begin, len, level_mask, level_bits_, unit,
                               output.data() + begin);
      }
      return Status::Ok();
    }
    FRUGAL_RETURN_IF_ERROR(CheckWideCodes(body, n));
    BitUnpacker unpacker(packed, body.data() + body.size());
    const uint32_t sign_bit = 1u << level_bits_;
    for (size_t b = 0; b < nb; ++b) {
      float unit = LoadF32(body.data() + 4 * b) / static_cast<float>(levels_);
      size_t begin = b * bucket_;
      size_t len = std::min(bucket_, n - begin);
      float* o = output.data() + begin;
      for (size_t i = 0; i < len; ++i) {
        uint32_t code = unpacker.Get(width_);
        float v = static_cast<float>(static_cast<int32_t>(code & level_mask)) * unit;
        AddOrWrite<kAdd>(o[i], (code & sign_bit) ? -v : v);
      }
    }
    return Status::Ok();
  }

  std::optional<uint64_t> EntropyCodedBits(std::span<const std::byte> payload) const override {
    StatusOr<WireHeader> header = ReadWireHeader(payload);
    if (!header.ok() || header->id != static_cast<uint8_t>(id()) || !BodyFits(header->numel)) {
      return std::nullopt;
    }
    std::span<const std::byte> body = payload.subspan(kWireHeaderBytes);
    size_t n = header->numel;
    if (!Validate(body, n).ok()) return std::nullopt;
    const size_t nb = NumBuckets(n);
    BitUnpacker unpacker(body.data() + 4 * nb, body.data() + body.size());
    uint64_t bits = 32 * nb;
    const uint32_t mask = (1u << level_bits_) - 1;
    for (size_t i = 0; i < n; ++i) {
      uint32_t level = unpacker.Get(width_) & mask;
      bits += EliasGammaLength(uint64_t{level} + 1) + (level != 0 ? 1 : 0);
    }
    return bits;
  }

 private:
  uint32_t levels_;
  size_t bucket_;
  int level_bits_;
  int width_;
};

}  // namespace

void RegisterQsgd(CompressorRegistry& registry) {
  MustRegister(
      registry,
      {.name = "qsgd",
       .summary = "QSGD: s levels per bucket (L2 norm), stochastic rounding, fixed-width codes",
       .params = "levels=15 bucket=512",
       .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
         FRUGAL_ASSIGN_OR_RETURN(int64_t levels, p.Int("levels", 15, 1, 65535));
         FRUGAL_ASSIGN_OR_RETURN(int64_t bucket, p.Int("bucket", 512, 1, int64_t{1} << 24));
         return std::unique_ptr<Compressor>(std::make_unique<QsgdCompressor>(
             static_cast<uint32_t>(levels), static_cast<size_t>(bucket)));
       }});
}

}  // namespace frugal::compress_internal
