// fp16 and bf16: each float32 becomes a 16-bit float. Body: numel little-endian uint16 values.
//
// fp16 (IEEE binary16) rounds to nearest even. Finite values beyond the fp16 range saturate to
// +-65504 instead of becoming infinite (an infinity in one rank's gradient would poison the sum);
// NaN stays a NaN. Values below 2^-24 in magnitude round to (signed) zero. The conversion runs on
// F16C (vcvtps2ph) when the CPU has it and in software otherwise; both give the same bits for
// every non-NaN input.
//
// bf16 (bfloat16) keeps the top 16 bits of the float32 after rounding to nearest even on the
// dropped 16 bits; it has float32's range, so only values within half an ulp of FLT_MAX could
// round up to infinity: they saturate to the largest finite bf16. NaN becomes a quiet NaN.
//
// Both are deterministic (biased by at most half an ulp), re-quantizable (the two-phase path
// re-encodes the partial sums) and decoded exactly: every 16-bit pattern is a valid value.
#include <bit>
#include <cmath>

#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

FRUGAL_INLINE uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
FRUGAL_INLINE float FromBits(uint32_t w) { return std::bit_cast<float>(w); }

constexpr float kHalfMax = 65504.0f;

// float32 -> binary16, round to nearest even, after saturation (as vcvtps2ph would on a clamped
// input). The scaling trick is the one of the FP16 library (M. Dukhan).
FRUGAL_INLINE uint16_t HalfFromFloat(float f) {
  if (f > kHalfMax) f = kHalfMax;
  if (f < -kHalfMax) f = -kHalfMax;
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = Bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = FromBits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = Bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

FRUGAL_INLINE float FloatFromHalf(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = FromBits((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = FromBits((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  return FromBits(sign | (two_w < denormalized_cutoff ? Bits(denormalized) : Bits(normalized)));
}

FRUGAL_INLINE uint16_t BfloatFromFloat(float f) {
  uint32_t w = Bits(f);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((w >> 16) | 0x0040u);  // NaN
  uint32_t rounded = (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;
  // Rounding a finite value up to the infinity pattern: saturate to the largest finite bf16.
  if ((rounded & 0x7FFFu) == 0x7F80u && (w & 0x7FFFFFFFu) != 0x7F800000u) rounded -= 1;
  return static_cast<uint16_t>(rounded);
}

FRUGAL_INLINE float FloatFromBfloat(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

void EncodeHalfGeneric(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = HalfFromFloat(x[i]);
}
// The decoders add into out (kAdd) or write 0 + value (AddOrWrite: DecodeOverwrite).
template <bool kAdd>
void DecodeHalfGeneric(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) AddOrWrite<kAdd>(out[i], FloatFromHalf(in[i]));
}
FRUGAL_INLINE void EncodeBfloatBody(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = BfloatFromFloat(x[i]);
}
template <bool kAdd>
FRUGAL_INLINE void DecodeBfloatBody(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) AddOrWrite<kAdd>(out[i], FloatFromBfloat(in[i]));
}

#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 void EncodeHalfV3(const float* x, size_t n, uint16_t* out) {
  const __m256 hi = _mm256_set1_ps(kHalfMax);
  const __m256 lo = _mm256_set1_ps(-kHalfMax);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // min/max return their second operand when either is NaN: a NaN input stays NaN.
    __m256 v = _mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_loadu_ps(x + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) out[i] = HalfFromFloat(x[i]);
}
template <bool kAdd>
FRUGAL_TARGET_V3 void DecodeHalfV3(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    const __m256 base = kAdd ? _mm256_loadu_ps(out + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(out + i, _mm256_add_ps(base, v));
  }
  for (; i < n; ++i) AddOrWrite<kAdd>(out[i], FloatFromHalf(in[i]));
}
FRUGAL_TARGET_V3 void EncodeBfloatV3(const float* x, size_t n, uint16_t* out) {
  EncodeBfloatBody(x, n, out);
}
template <bool kAdd>
FRUGAL_TARGET_V3 void DecodeBfloatV3(const uint16_t* in, size_t n, float* out) {
  DecodeBfloatBody<kAdd>(in, n, out);
}
#endif

enum class Format { kHalf, kBfloat };

class Float16Compressor final : public InPlaceDecoder<Float16Compressor> {
 public:
  explicit Float16Compressor(Format format)
      : InPlaceDecoder(format == Format::kHalf ? "fp16" : "bf16",
                       format == Format::kHalf ? CompressorId::kFp16 : CompressorId::kBf16,
                       CompressorTraits{.requantizable = true}, ""),
        format_(format) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return uint64_t{16} * tensor.numel;
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    std::span<std::byte> body = BeginPayload(*this, tensor, 2 * input.size(), out);
    // The body starts 32 bytes into a vector's storage: 2-byte aligned.
    auto* h = reinterpret_cast<uint16_t*>(body.data());
    bool v3 = kernels() == Kernels::kX86V3;
    if (format_ == Format::kHalf) {
#if defined(FRUGAL_X86)
      if (v3) return EncodeHalfV3(input.data(), input.size(), h), Status::Ok();
#endif
      EncodeHalfGeneric(input.data(), input.size(), h);
    } else {
#if defined(FRUGAL_X86)
      if (v3) return EncodeBfloatV3(input.data(), input.size(), h), Status::Ok();
#endif
      EncodeBfloatBody(input.data(), input.size(), h);
    }
    return Status::Ok();
  }

 private:
  friend InPlaceDecoder;

  // Decode (kAdd) or DecodeOverwrite; checks the body's size before it writes anything.
  template <bool kAdd>
  Status DecodeInto(std::span<const std::byte> payload, const TensorInfo& tensor,
                    std::span<float> output) const {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    if (body.size() != 2 * tensor.numel) {
      return MalformedError(fmt::format("{} payload: body of {} bytes for {} elements", name(),
                                        body.size(), tensor.numel));
    }
    // A payload that came from a receive buffer may not be 2-byte aligned: copy when it is not.
    std::vector<uint16_t> aligned;
    const uint16_t* h = reinterpret_cast<const uint16_t*>(body.data());
    if (!body.empty() && reinterpret_cast<uintptr_t>(body.data()) % alignof(uint16_t) != 0) {
      aligned.resize(tensor.numel);
      std::memcpy(aligned.data(), body.data(), body.size());
      h = aligned.data();
    }
    bool v3 = kernels() == Kernels::kX86V3;
    if (format_ == Format::kHalf) {
#if defined(FRUGAL_X86)
      if (v3) return DecodeHalfV3<kAdd>(h, output.size(), output.data()), Status::Ok();
#endif
      DecodeHalfGeneric<kAdd>(h, output.size(), output.data());
    } else {
#if defined(FRUGAL_X86)
      if (v3) return DecodeBfloatV3<kAdd>(h, output.size(), output.data()), Status::Ok();
#endif
      DecodeBfloatBody<kAdd>(h, output.size(), output.data());
    }
    return Status::Ok();
  }

  Format format_;
};

}  // namespace

void RegisterFloat16(CompressorRegistry& registry) {
  MustRegister(
      registry,
      {.name = "fp16",
       .summary = "IEEE half precision, round to nearest even, saturating",
       .params = "",
       .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
         return std::unique_ptr<Compressor>(std::make_unique<Float16Compressor>(Format::kHalf));
       }});
  MustRegister(
      registry,
      {.name = "bf16",
       .summary = "bfloat16 (float32's range, 8-bit mantissa), round to nearest even",
       .params = "",
       .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
         return std::unique_ptr<Compressor>(std::make_unique<Float16Compressor>(Format::kBfloat));
       }});
}

}  // namespace frugal::compress_internal
