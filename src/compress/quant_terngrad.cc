// terngrad: TernGrad (Wen et al., 2017). Each element becomes one of {-s, 0, +s}.
//
// Clipping: with clip = c > 0 the input is first clipped to [-c * sigma, c * sigma] (c = 2.5 by
// default, as in the paper), sigma = sqrt(mean(x^2)), the standard deviation of the elements
// around 0 (gradients are centred; unlike the deviation around the mean it does not vanish for a
// constant tensor). clip=0 disables it. The scale s is max |clipped x|. Each element is encoded as
// s * sign(x) * b with b ~ Bernoulli(|clipped x| / s) drawn from the rank's stream, which is an
// unbiased estimate of the clipped element (of x itself when clip=0).
//
// Scalar sharing: TernGrad's Aggregate first agrees on s = max over ranks of each rank's own s
// (one all-gather of a float), so that every rank's payload uses the same scale, then all-gathers
// the payloads and every rank decodes and sums them. Encode alone (other paths, tests) uses the
// rank's own s.
//
// Body: s as float32, then numel 2-bit codes, four per byte LSB-first: 0 -> 0, 1 -> +s, 2 -> -s
// (3 is invalid), zero padded. The decoder checks that s is finite and >= 0, that no code is 3
// and that the padding is zero before it writes anything.
#include <bit>
#include <cmath>
#include <limits>

#include "compress/aggregate_util.h"
#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

struct Moments {
  double sum_squares = 0;
  float max_abs = 0;
  bool finite = true;
};

FRUGAL_INLINE Moments MomentsBody(const float* x, size_t n) {
  double q[4] = {0, 0, 0, 0};
  float m[4] = {0, 0, 0, 0}, chk[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      double v = x[i + j];
      q[j] += v * v;
      float a = std::fabs(x[i + j]);
      m[j] = a > m[j] ? a : m[j];
      chk[j] += x[i + j] * 0.0f;
    }
  }
  for (; i < n; ++i) {
    double v = x[i];
    q[0] += v * v;
    float a = std::fabs(x[i]);
    m[0] = a > m[0] ? a : m[0];
    chk[0] += x[i] * 0.0f;
  }
  Moments r;
  r.sum_squares = (q[0] + q[1]) + (q[2] + q[3]);
  for (int j = 0; j < 4; ++j) {
    r.max_abs = m[j] > r.max_abs ? m[j] : r.max_abs;
    if (chk[j] != 0.0f) r.finite = false;
  }
  return r;
}

// codes[i] in {0, 1, 2} for 0, +s, -s.
FRUGAL_INLINE void TernarizeBody(const float* x, size_t n, float bound, float inv_scale,
                                 const uint32_t* random, uint8_t* codes) {
  for (size_t i = 0; i < n; ++i) {
    float a = std::fabs(x[i]);
    a = a > bound ? bound : a;
    uint8_t keep = ToUnit(random[i]) < a * inv_scale ? 1 : 0;
    codes[i] = keep << (x[i] < 0.0f ? 1 : 0);
  }
}

// Nonzero if some byte holds a pair of bits 11 (code 3).
FRUGAL_INLINE uint32_t InvalidPairsBody(const std::byte* packed, size_t bytes) {
  uint32_t bad = 0;
  for (size_t i = 0; i < bytes; ++i) {
    uint32_t b = std::to_integer<uint32_t>(packed[i]);
    bad |= b & (b >> 1) & 0x55u;
  }
  return bad;
}

// out[i] += 0, +s or -s for codes 0, 1, 2.
FRUGAL_INLINE void AddTernaryBody(const uint8_t* codes, size_t n, float s, float* out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = codes[i];
    float v = c != 0 ? s : 0.0f;
    out[i] += std::bit_cast<float>(std::bit_cast<uint32_t>(v) ^ ((c >> 1) << 31));
  }
}

uint32_t InvalidPairsGeneric(const std::byte* p, size_t bytes) {
  return InvalidPairsBody(p, bytes);
}
void AddTernaryGeneric(const uint8_t* c, size_t n, float s, float* out) {
  AddTernaryBody(c, n, s, out);
}
#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 uint32_t InvalidPairsV3(const std::byte* p, size_t bytes) {
  return InvalidPairsBody(p, bytes);
}
FRUGAL_TARGET_V3 void AddTernaryV3(const uint8_t* c, size_t n, float s, float* out) {
  AddTernaryBody(c, n, s, out);
}
#endif

Moments MomentsGeneric(const float* x, size_t n) { return MomentsBody(x, n); }
void TernarizeGeneric(const float* x, size_t n, float bound, float inv, const uint32_t* random,
                      uint8_t* codes) {
  TernarizeBody(x, n, bound, inv, random, codes);
}
#if defined(FRUGAL_X86)
// MomentsBody with AVX2 (four lanes, as there).
FRUGAL_TARGET_V3 Moments MomentsV3(const float* x, size_t n) {
  __m256d q = _mm256_setzero_pd();
  __m128 m = _mm_setzero_ps(), chk = _mm_setzero_ps();
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 zero = _mm_setzero_ps();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 v = _mm_loadu_ps(x + i);
    __m256d d = _mm256_cvtps_pd(v);
    q = _mm256_add_pd(q, _mm256_mul_pd(d, d));
    m = _mm_max_ps(_mm_and_ps(v, abs_mask), m);
    chk = _mm_add_ps(chk, _mm_mul_ps(v, zero));
  }
  alignas(32) double qa[4];
  alignas(16) float ma[4], ca[4];
  _mm256_store_pd(qa, q);
  _mm_store_ps(ma, m);
  _mm_store_ps(ca, chk);
  for (; i < n; ++i) {
    double v = x[i];
    qa[0] += v * v;
    float a = std::fabs(x[i]);
    ma[0] = a > ma[0] ? a : ma[0];
    ca[0] += x[i] * 0.0f;
  }
  Moments r;
  r.sum_squares = (qa[0] + qa[1]) + (qa[2] + qa[3]);
  for (int j = 0; j < 4; ++j) {
    r.max_abs = ma[j] > r.max_abs ? ma[j] : r.max_abs;
    if (ca[j] != 0.0f) r.finite = false;
  }
  return r;
}

// TernarizeBody with AVX2.
FRUGAL_TARGET_V3 void TernarizeV3(const float* x, size_t n, float bound, float inv,
                                  const uint32_t* random, uint8_t* codes) {
  const __m256 vbound = _mm256_set1_ps(bound);
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i one = _mm256_set1_epi32(1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 a = _mm256_min_ps(_mm256_and_ps(v, abs_mask), vbound);
    __m256i keep =
        _mm256_castps_si256(_mm256_cmp_ps(ToUnit8(random + i), _mm256_mul_ps(a, vinv), _CMP_LT_OQ));
    __m256i neg = _mm256_castps_si256(_mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    // 1 for a kept positive, 2 for a kept negative.
    __m256i code = _mm256_and_si256(keep, _mm256_sub_epi32(one, neg));  // neg is 0 or -1
    StoreLowBytes(code, codes + i);
  }
  TernarizeBody(x + i, n - i, bound, inv, random + i, codes + i);
}
#endif

constexpr size_t kBlock = 4096;

class TernGradCompressor final : public QuantizerBase {
 public:
  explicit TernGradCompressor(double clip)
      : QuantizerBase("terngrad", CompressorId::kTernGrad,
                      CompressorTraits{.unbiased = clip == 0, .custom_aggregate = true},
                      fmt::format("clip={}", clip)),
        clip_(clip) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * (4 + (tensor.numel + 3) / 4);
  }

  // The clipping bound (c * sigma, or +inf without clipping) and this rank's own scale; NaN scale
  // for non-finite input.
  std::pair<float, float> Bound(std::span<const float> input) const {
    if (input.empty()) return {0.0f, 0.0f};
#if defined(FRUGAL_X86)
    Moments m = (kernels() == Kernels::kX86V3) ? MomentsV3(input.data(), input.size())
                                               : MomentsGeneric(input.data(), input.size());
#else
    Moments m = MomentsGeneric(input.data(), input.size());
#endif
    if (!m.finite) return {0.0f, std::numeric_limits<float>::quiet_NaN()};
    float bound = std::numeric_limits<float>::infinity();
    if (clip_ > 0) {
      double n = static_cast<double>(input.size());
      bound = static_cast<float>(clip_ * std::sqrt(m.sum_squares / n));
    }
    return {bound, std::min(bound, m.max_abs)};
  }

  Status EncodeWithScale(std::span<const float> input, const TensorInfo& tensor,
                         CompressContext& ctx, float bound, float scale,
                         std::vector<std::byte>& out) const {
    const size_t n = input.size();
    std::span<std::byte> body = BeginPayload(*this, tensor, 4 + (n + 3) / 4, out);
    StoreF32(body.data(), scale);
    std::byte* packed = body.data() + 4;
    float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    RngStream stream(ctx.Key(tensor));
    LaneRng rng(stream);
    std::vector<uint32_t> random(kBlock);
    std::vector<uint8_t> codes(kBlock);
    const bool v3 = kernels() == Kernels::kX86V3;
    for (size_t begin = 0; begin < n; begin += kBlock) {
      size_t len = std::min(kBlock, n - begin);
      rng.Fill(kernels(), random.data(), random.size());
#if defined(FRUGAL_X86)
      if (v3) {
        TernarizeV3(input.data() + begin, len, bound, inv, random.data(), codes.data());
      } else {
        TernarizeGeneric(input.data() + begin, len, bound, inv, random.data(), codes.data());
      }
#else
      TernarizeGeneric(input.data() + begin, len, bound, inv, random.data(), codes.data());
#endif
      // kBlock is a multiple of 8 codes, so every block starts on a byte.
      PackCodes(kernels(), codes.data(), len, 2, packed + begin / 4);
    }
    return Status::Ok();
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    auto [bound, scale] = Bound(input);
    if (std::isnan(scale)) {
      return InvalidArgumentError(
          fmt::format("terngrad: tensor '{}' has non-finite values", tensor.name));
    }
    return EncodeWithScale(input, tensor, ctx, bound, scale, out);
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const size_t n = tensor.numel;
    if (body.size() != 4 + (n + 3) / 4) {
      return MalformedError(fmt::format("terngrad payload: body of {} bytes, expected {}",
                                        body.size(), 4 + (n + 3) / 4));
    }
    float s = LoadF32(body.data());
    if (!std::isfinite(s) || s < 0.0f) {
      return MalformedError(fmt::format("terngrad payload: scale {}", s));
    }
    const std::byte* packed = body.data() + 4;
    const bool v3 = kernels() == Kernels::kX86V3;
#if defined(FRUGAL_X86)
    uint32_t bad =
        v3 ? InvalidPairsV3(packed, (n + 3) / 4) : InvalidPairsGeneric(packed, (n + 3) / 4);
#else
    uint32_t bad = InvalidPairsGeneric(packed, (n + 3) / 4);
#endif
    if (bad != 0) return MalformedError("terngrad payload: a code is 3");
    if (!CodePaddingIsZero(packed, n, 2)) {
      return MalformedError("terngrad payload: padding bits are set");
    }
    std::vector<uint8_t> codes(kBlock);
    for (size_t begin = 0; begin < n; begin += kBlock) {
      size_t len = std::min(kBlock, n - begin);
      UnpackCodes(kernels(), packed + begin / 4, len, 2, codes.data());
#if defined(FRUGAL_X86)
      if (v3) {
        AddTernaryV3(codes.data(), len, s, output.data() + begin);
        continue;
      }
#endif
      AddTernaryGeneric(codes.data(), len, s, output.data() + begin);
    }
    return Status::Ok();
  }

  Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                   const TensorInfo& tensor, CompressContext& ctx,
                   const AggregateOptions& options) const override {
    CheckInput(data.size(), tensor);
    auto [bound, own_scale] = Bound(data);
    // Every rank takes part in the exchange of scales even with a non-finite input, so that all
    // of them fail together instead of leaving the others waiting.
    FRUGAL_ASSIGN_OR_RETURN(float scale, AllMax(t, own_scale, options.timeout));
    if (std::isnan(scale)) {
      return InvalidArgumentError(
          fmt::format("terngrad: tensor '{}' has non-finite values on some rank", tensor.name));
    }
    std::vector<std::byte> payload;
    FRUGAL_RETURN_IF_ERROR(EncodeWithScale(data, tensor, ctx, bound, scale, payload));
    if (!residual.empty()) {
      FRUGAL_RETURN_IF_ERROR(ComputeResidual(*this, payload, data, tensor, ctx, residual));
    }
    return AllgatherDecodeSum(t, *this, payload, tensor, ctx, options.op, options.timeout, data);
  }

 private:
  double clip_;
};

}  // namespace

void RegisterTernGrad(CompressorRegistry& registry) {
  MustRegister(
      registry,
      {.name = "terngrad",
       .summary = "TernGrad: {-s, 0, s} with clipping at clip*sigma and s shared (max) by ranks",
       .params = "clip=2.5 (0: no clipping)",
       .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
         FRUGAL_ASSIGN_OR_RETURN(double clip, p.Double("clip", 2.5, 0.0, 1000.0));
         return std::unique_ptr<Compressor>(std::make_unique<TernGradCompressor>(clip));
       }});
}

}  // namespace frugal::compress_internal
