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
#include <cmath>
#include <limits>

#include "compress/aggregate_util.h"
#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

struct Moments {
  double sum = 0;
  double sum_squares = 0;
  float max_abs = 0;
  bool finite = true;
};

FRUGAL_INLINE Moments MomentsBody(const float* x, size_t n) {
  double s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
  float m[4] = {0, 0, 0, 0}, chk[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      double v = x[i + j];
      s[j] += v;
      q[j] += v * v;
      float a = std::fabs(x[i + j]);
      m[j] = a > m[j] ? a : m[j];
      chk[j] += x[i + j] * 0.0f;
    }
  }
  for (; i < n; ++i) {
    double v = x[i];
    s[0] += v;
    q[0] += v * v;
    float a = std::fabs(x[i]);
    m[0] = a > m[0] ? a : m[0];
    chk[0] += x[i] * 0.0f;
  }
  Moments r;
  r.sum = (s[0] + s[1]) + (s[2] + s[3]);
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

Moments MomentsGeneric(const float* x, size_t n) { return MomentsBody(x, n); }
void TernarizeGeneric(const float* x, size_t n, float bound, float inv, const uint32_t* random,
                      uint8_t* codes) {
  TernarizeBody(x, n, bound, inv, random, codes);
}
#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 Moments MomentsV3(const float* x, size_t n) { return MomentsBody(x, n); }
FRUGAL_TARGET_V3 void TernarizeV3(const float* x, size_t n, float bound, float inv,
                                  const uint32_t* random, uint8_t* codes) {
  TernarizeBody(x, n, bound, inv, random, codes);
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
    Moments m = HasX86V3() ? MomentsV3(input.data(), input.size())
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
    const bool v3 = HasX86V3();
    for (size_t begin = 0; begin < n; begin += kBlock) {
      size_t len = std::min(kBlock, n - begin);
      rng.Fill(random.data(), random.size());
#if defined(FRUGAL_X86)
      if (v3) {
        TernarizeV3(input.data() + begin, len, bound, inv, random.data(), codes.data());
      } else {
        TernarizeGeneric(input.data() + begin, len, bound, inv, random.data(), codes.data());
      }
#else
      TernarizeGeneric(input.data() + begin, len, bound, inv, random.data(), codes.data());
#endif
      // kBlock is a multiple of 4, so every block starts on a byte.
      for (size_t i = 0; i < len; i += 4) {
        unsigned byte = 0;
        for (size_t j = 0; j < 4 && i + j < len; ++j) byte |= unsigned{codes[i + j]} << (2 * j);
        packed[(begin + i) / 4] = static_cast<std::byte>(byte);
      }
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
    for (size_t b = 0; b < (n + 3) / 4; ++b) {
      unsigned byte = std::to_integer<unsigned>(packed[b]);
      // A code 3 has both bits of a pair set.
      if ((byte & (byte >> 1) & 0x55u) != 0) {
        return MalformedError(fmt::format("terngrad payload: invalid code near element {}", 4 * b));
      }
    }
    if (n % 4 != 0 && (std::to_integer<unsigned>(packed[n / 4]) >> (2 * (n % 4))) != 0) {
      return MalformedError("terngrad payload: padding bits are set");
    }
    const float table[4] = {0.0f, s, -s, 0.0f};
    for (size_t i = 0; i < n; ++i) {
      output[i] += table[(std::to_integer<unsigned>(packed[i / 4]) >> (2 * (i % 4))) & 3u];
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
