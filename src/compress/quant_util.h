// Building blocks shared by the quantizers: a base class for the boilerplate of the Compressor
// interface, bit-plane packing of signs, fixed-width bit packing, lane-parallel uniform random
// numbers and run-time dispatch to AVX2 kernels. Internal to frugal_compress.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/compress_wire.h"
#include "frugal/compressor.h"
#include "frugal/random.h"

#if defined(__x86_64__) || defined(__i386__)
#define FRUGAL_X86 1
#include <immintrin.h>
#endif

namespace frugal::compress_internal {

// The kernels of the quantizers come in two sets that give the same bits: kBaseline, for any CPU,
// and kX86V3, for CPUs with AVX2, FMA, BMI2 and F16C (x86-64-v3), compiled with FRUGAL_TARGET_V3.
// Each quantizer runs the best set of this CPU unless told otherwise (QuantizerBase::set_kernels),
// so that tests can run both sets on one machine and compare them.
enum class Kernels { kBaseline, kX86V3 };

// True when the CPU has AVX2, FMA, BMI2 and F16C (x86-64-v3).
bool HasX86V3();
// kX86V3 when the CPU has it, else kBaseline.
Kernels BestKernels();
// Whether kernel set `k` is the x86-64-v3 one; a CheckError when it is and the CPU lacks it.
bool UseV3(Kernels k);

#if defined(FRUGAL_X86)
#define FRUGAL_TARGET_V3 __attribute__((target("avx2,fma,bmi,bmi2,f16c,popcnt")))
#else
#define FRUGAL_TARGET_V3
#endif

// Kernel bodies written once and instantiated for the baseline ISA and for FRUGAL_TARGET_V3.
#define FRUGAL_INLINE inline __attribute__((always_inline))

// The store of a decoder body instantiated for Decode (kAdd: out += v) and for DecodeOverwrite
// (out = 0.0f + v: what adding v into a zeroed output gives, bit for bit; -0.0f becomes +0.0f).
template <bool kAdd>
FRUGAL_INLINE void AddOrWrite(float& out, float v) {
  if constexpr (kAdd) {
    out += v;
  } else {
    out = 0.0f + v;
  }
}

#if defined(FRUGAL_X86)
// Stores the low bytes of eight 32-bit lanes (each in [0, 255]) as 8 consecutive bytes.
FRUGAL_TARGET_V3 inline void StoreLowBytes(__m256i lanes, void* out) {
  __m128i words =
      _mm_packus_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
  _mm_storel_epi64(static_cast<__m128i*>(out), _mm_packus_epi16(words, words));
}
// ToUnit of eight random integers.
FRUGAL_TARGET_V3 inline __m256 ToUnit8(const uint32_t* random) {
  __m256i r = _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(random)), 8);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(r), _mm256_set1_ps(1.0f / 16777216.0f));
}
#endif

// The fixed parts of a quantizer: name, id, traits and the canonical parameter list.
class QuantizerBase : public Compressor {
 public:
  // `params` is the canonical "key=value,key=value" list (sorted by key), empty for none.
  QuantizerBase(std::string_view name, CompressorId id, CompressorTraits traits, std::string params)
      : name_(name), id_(id), traits_(traits), params_(std::move(params)) {}

  std::string_view name() const override { return name_; }
  std::string spec() const override { return params_.empty() ? name_ : name_ + ":" + params_; }
  CompressorId id() const override { return id_; }
  CompressorTraits traits() const override { return traits_; }

  // The kernel set Encode and Decode run: BestKernels() unless set. Not while another thread
  // encodes or decodes with this compressor. kX86V3 on a CPU without it is a CheckError.
  Kernels kernels() const { return kernels_; }
  void set_kernels(Kernels kernels) {
    FRUGAL_CHECK(kernels == Kernels::kBaseline || HasX86V3(),
                 "the x86-64-v3 kernels need a CPU with AVX2, FMA, BMI2 and F16C");
    kernels_ = kernels;
  }

 protected:
  // CheckError unless input and tensor agree.
  static void CheckInput(size_t size, const TensorInfo& tensor) {
    FRUGAL_CHECK_EQ(size, tensor.numel, "buffer size vs. numel of tensor '", tensor.name, "'");
  }

 private:
  std::string name_;
  CompressorId id_;
  CompressorTraits traits_;
  std::string params_;
  Kernels kernels_ = BestKernels();
};

// A quantizer that decodes with one template for both ways, Derived::DecodeInto<kAdd>(payload,
// tensor, output): adding into the output (Decode) or writing 0 + value (DecodeOverwrite,
// AddOrWrite), without zero-filling it first.
template <typename Derived>
class InPlaceDecoder : public QuantizerBase {
 public:
  using QuantizerBase::QuantizerBase;

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const final {
    return static_cast<const Derived&>(*this).template DecodeInto<true>(payload, tensor, output);
  }
  Status DecodeOverwrite(std::span<const std::byte> payload, const TensorInfo& tensor,
                         CompressContext& ctx, std::span<float> output) const final {
    return static_cast<const Derived&>(*this).template DecodeInto<false>(payload, tensor, output);
  }
};

inline size_t SignBytes(size_t n) { return (n + 7) / 8; }

inline void StoreF32(std::byte* at, float v) { std::memcpy(at, &v, sizeof v); }
inline float LoadF32(const std::byte* at) {
  float v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

// Each kernel below runs the given kernel set; the overloads without one run BestKernels().

// bit i of out = (x[i] < 0): sign(0) = sign(-0) = sign(NaN) = +. Writes SignBytes(n) bytes; the
// padding bits of the last byte are 0. Returns sum |x[i]| when `l1` is requested.
void PackSigns(Kernels k, const float* x, size_t n, std::byte* out);
double PackSignsL1(Kernels k, const float* x, size_t n, std::byte* out);
inline void PackSigns(const float* x, size_t n, std::byte* out) {
  PackSigns(BestKernels(), x, n, out);
}

// Error feedback of the scaled sign in two read passes and one write, so that nothing changes
// until the scale is known to be finite. Pass 1: with p[i] = g[i] + e[i], bit i of out =
// (p[i] < 0) as PackSigns; returns sum |p[i]| with PackSignsL1's summation order.
double CompensatePackSignsL1(Kernels k, const float* g, const float* e, size_t n, std::byte* out);
// Pass 2: e[i] = p[i] - (0 + (p[i] < 0 ? -scale : scale)) with p[i] = g[i] + e[i] again: the
// residual after a decode of the signs into zeros.
void SubtractScaledSigns(Kernels k, const float* g, float* e, size_t n, float scale);

// out[i] += bit i ? neg : pos.
void AddSigns(Kernels k, const std::byte* bits, size_t n, float pos, float neg, float* out);
inline void AddSigns(const std::byte* bits, size_t n, float pos, float neg, float* out) {
  AddSigns(BestKernels(), bits, n, pos, neg, out);
}

// kMalformed when the padding bits after bit n of a sign plane are not zero.
Status CheckSignPadding(const std::byte* bits, size_t n, std::string_view what);

// Packs n codes, each below 2^width (1 <= width <= 8), LSB-first into exactly
// CodeBytes(n, width) bytes; the padding bits of the last byte are zero. With BMI2, eight codes at
// a time go through pext.
inline size_t CodeBytes(size_t n, int width) { return (n * static_cast<size_t>(width) + 7) / 8; }
void PackCodes(Kernels k, const uint8_t* codes, size_t n, int width, std::byte* out);
inline void PackCodes(const uint8_t* codes, size_t n, int width, std::byte* out) {
  PackCodes(BestKernels(), codes, n, width, out);
}
// The inverse: reads exactly CodeBytes(n, width) bytes.
void UnpackCodes(Kernels k, const std::byte* in, size_t n, int width, uint8_t* codes);
inline void UnpackCodes(const std::byte* in, size_t n, int width, uint8_t* codes) {
  UnpackCodes(BestKernels(), in, n, width, codes);
}
// Whether the bits after the n-th code in the last byte are all zero.
bool CodePaddingIsZero(const std::byte* in, size_t n, int width);

// Appends fixed-width fields (width <= 32) LSB-first into a byte buffer that has room for them.
class BitPacker {
 public:
  explicit BitPacker(std::byte* out) : out_(out) {}
  void Put(uint32_t value, int width) {
    acc_ |= static_cast<uint64_t>(value) << fill_;
    fill_ += width;
    if (fill_ >= 32) {
      uint32_t low = static_cast<uint32_t>(acc_);
      std::memcpy(out_, &low, 4);
      out_ += 4;
      acc_ >>= 32;
      fill_ -= 32;
    }
  }
  // Writes the remaining bits (zero padded to a byte); returns the end of what was written.
  std::byte* Flush() {
    while (fill_ > 0) {
      *out_++ = static_cast<std::byte>(acc_ & 0xff);
      acc_ >>= 8;
      fill_ = fill_ > 8 ? fill_ - 8 : 0;
    }
    return out_;
  }

 private:
  std::byte* out_;
  uint64_t acc_ = 0;
  int fill_ = 0;
};

// Reads fixed-width fields (width <= 32) LSB-first from a buffer whose size was checked.
class BitUnpacker {
 public:
  BitUnpacker(const std::byte* in, const std::byte* end) : in_(in), end_(end) {}
  uint32_t Get(int width) {
    while (fill_ < width) {
      uint64_t byte = in_ < end_ ? std::to_integer<uint64_t>(*in_++) : 0;
      acc_ |= byte << fill_;
      fill_ += 8;
    }
    uint32_t v = static_cast<uint32_t>(acc_ & ((uint64_t{1} << width) - 1));
    acc_ >>= width;
    fill_ -= width;
    return v;
  }
  // The bits left in the accumulator after the last field (padding), which must be zero.
  uint64_t leftover() const { return acc_; }

 private:
  const std::byte* in_;
  const std::byte* end_;
  uint64_t acc_ = 0;
  int fill_ = 0;
};

// Eight interleaved xoshiro256** generators seeded from one RngStream, so that blocks of uniform
// numbers can be made with SIMD. Deterministic for a given stream.
class LaneRng {
 public:
  static constexpr int kLanes = 8;
  explicit LaneRng(RngStream& seed_stream);
  // Fills out[0, count) with 32-bit uniform integers; count a multiple of 2 * kLanes.
  void Fill(Kernels k, uint32_t* out, size_t count);

 private:
  alignas(64) uint64_t s_[4][kLanes];
};

// Uniform float in [0, 1) from the top 24 bits of a 32-bit random integer.
inline float ToUnit(uint32_t r) { return static_cast<float>(r >> 8) * (1.0f / 16777216.0f); }

// Registration of each quantizer file's compressors (called by RegisterQuantizers).
void RegisterNone(CompressorRegistry& registry);
void RegisterFloat16(CompressorRegistry& registry);  // fp16, bf16
void RegisterMinMax8(CompressorRegistry& registry);
void RegisterQsgd(CompressorRegistry& registry);
void RegisterTernGrad(CompressorRegistry& registry);
void RegisterOneBit(CompressorRegistry& registry);
void RegisterSign(CompressorRegistry& registry);  // sign, signum, efsign
void RegisterNatural(CompressorRegistry& registry);

// Registers an entry; a duplicate name is a bug of frugal itself.
void MustRegister(CompressorRegistry& registry, CompressorEntry entry);

// Body-size arithmetic that refuses to overflow: kMalformed when numel is absurd for a payload.
inline bool BodyFits(uint64_t numel) { return numel <= (uint64_t{1} << 40); }

}  // namespace frugal::compress_internal
