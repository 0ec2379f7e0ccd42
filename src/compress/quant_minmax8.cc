// minmax8: per-chunk min-max quantization to uint8 (Bagua's ByteGrad).
//
// The input is cut into chunks of `chunk` elements (the last may be shorter). For each chunk the
// encoder finds lo = min and hi = max and maps x to q = round((x - lo) * 255 / (hi - lo)) in
// [0, 255]; with rounding=stochastic, q = floor((x - lo) * 255 / (hi - lo) + u) with u uniform in
// [0, 1) from the rank's stream, which makes the decoder's lo + q * (hi - lo) / 255 an unbiased
// estimate of x. A chunk whose values are all equal has hi == lo and decodes exactly.
//
// Body: nchunks pairs (lo, hi) of float32, then numel bytes q. Decoding validates that every lo
// and hi is finite, lo <= hi and hi - lo is finite before it writes anything. Non-finite input
// cannot be represented: Encode returns kInvalidArgument.
#include <cmath>

#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

struct ChunkRange {
  float lo;
  float hi;
  bool finite;
};

FRUGAL_INLINE ChunkRange RangeBody(const float* x, size_t n) {
  float lo[8], hi[8], chk[8];
  for (int j = 0; j < 8; ++j) {
    lo[j] = n > 0 ? x[0] : 0.0f;
    hi[j] = lo[j];
    chk[j] = 0.0f;
  }
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      float v = x[i + j];
      lo[j] = v < lo[j] ? v : lo[j];
      hi[j] = v > hi[j] ? v : hi[j];
      chk[j] += v * 0.0f;  // NaN for inf and NaN
    }
  }
  for (; i < n; ++i) {
    float v = x[i];
    lo[0] = v < lo[0] ? v : lo[0];
    hi[0] = v > hi[0] ? v : hi[0];
    chk[0] += v * 0.0f;
  }
  ChunkRange r{lo[0], hi[0], true};
  for (int j = 0; j < 8; ++j) {
    r.lo = lo[j] < r.lo ? lo[j] : r.lo;
    r.hi = hi[j] > r.hi ? hi[j] : r.hi;
    if (chk[j] != 0.0f) r.finite = false;
  }
  return r;
}

// q[i] = floor((x[i] - lo) * inv + offset[i]) clamped to [0, 255]; offset is 0.5 (nearest) or a
// uniform number (stochastic).
FRUGAL_INLINE void QuantizeBody(const float* x, size_t n, float lo, float inv, const float* offset,
                                float fixed_offset, uint8_t* q) {
  for (size_t i = 0; i < n; ++i) {
    float t = (x[i] - lo) * inv + (offset != nullptr ? offset[i] : fixed_offset);
    t = t < 0.0f ? 0.0f : t;
    t = t > 255.0f ? 255.0f : t;
    q[i] = static_cast<uint8_t>(static_cast<int32_t>(t));
  }
}

// out[i] += lo + q[i] * step (kAdd), or out[i] = lo + q[i] * step (AddOrWrite).
template <bool kAdd>
FRUGAL_INLINE void DequantizeBody(const uint8_t* q, size_t n, float lo, float step, float* out) {
  for (size_t i = 0; i < n; ++i) AddOrWrite<kAdd>(out[i], lo + static_cast<float>(q[i]) * step);
}

ChunkRange RangeGeneric(const float* x, size_t n) { return RangeBody(x, n); }
void QuantizeGeneric(const float* x, size_t n, float lo, float inv, const float* offset, float fo,
                     uint8_t* q) {
  QuantizeBody(x, n, lo, inv, offset, fo, q);
}
template <bool kAdd>
void DequantizeGeneric(const uint8_t* q, size_t n, float lo, float step, float* out) {
  DequantizeBody<kAdd>(q, n, lo, step, out);
}
#if defined(FRUGAL_X86)
// RangeBody with AVX2 (eight lanes, as there).
FRUGAL_TARGET_V3 ChunkRange RangeV3(const float* x, size_t n) {
  if (n < 8) return RangeBody(x, n);
  __m256 lo = _mm256_set1_ps(x[0]), hi = lo, chk = _mm256_setzero_ps();
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    lo = _mm256_min_ps(v, lo);
    hi = _mm256_max_ps(v, hi);
    chk = _mm256_add_ps(chk, _mm256_mul_ps(v, zero));
  }
  alignas(32) float l[8], h[8], c[8];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(h, hi);
  _mm256_store_ps(c, chk);
  for (; i < n; ++i) {
    float v = x[i];
    l[0] = v < l[0] ? v : l[0];
    h[0] = v > h[0] ? v : h[0];
    c[0] += v * 0.0f;
  }
  ChunkRange r{l[0], h[0], true};
  for (int j = 0; j < 8; ++j) {
    r.lo = l[j] < r.lo ? l[j] : r.lo;
    r.hi = h[j] > r.hi ? h[j] : r.hi;
    if (c[j] != 0.0f) r.finite = false;
  }
  return r;
}

// QuantizeBody with AVX2.
FRUGAL_TARGET_V3 void QuantizeV3(const float* x, size_t n, float lo, float inv, const float* offset,
                                 float fixed_offset, uint8_t* q) {
  const __m256 vlo = _mm256_set1_ps(lo);
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256 vfixed = _mm256_set1_ps(fixed_offset);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 top = _mm256_set1_ps(255.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 off = offset != nullptr ? _mm256_loadu_ps(offset + i) : vfixed;
    __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vlo), vinv), off);
    t = _mm256_min_ps(_mm256_max_ps(t, zero), top);
    StoreLowBytes(_mm256_cvttps_epi32(t), q + i);
  }
  QuantizeBody(x + i, n - i, lo, inv, offset != nullptr ? offset + i : nullptr, fixed_offset,
               q + i);
}
template <bool kAdd>
FRUGAL_TARGET_V3 void DequantizeV3(const uint8_t* q, size_t n, float lo, float step, float* out) {
  DequantizeBody<kAdd>(q, n, lo, step, out);
}
#endif

class MinMax8Compressor final : public InPlaceDecoder<MinMax8Compressor> {
 public:
  MinMax8Compressor(size_t chunk, bool stochastic)
      : InPlaceDecoder(
            "minmax8", CompressorId::kMinMax8,
            CompressorTraits{.unbiased = stochastic, .requantizable = true},
            fmt::format("chunk={},rounding={}", chunk, stochastic ? "stochastic" : "nearest")),
        chunk_(chunk),
        stochastic_(stochastic) {}

  size_t NumChunks(size_t numel) const { return (numel + chunk_ - 1) / chunk_; }

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * (8 * NumChunks(tensor.numel) + tensor.numel);
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    const size_t n = input.size();
    const size_t nchunks = NumChunks(n);
    std::span<std::byte> body = BeginPayload(*this, tensor, 8 * nchunks + n, out);
    auto* q = reinterpret_cast<uint8_t*>(body.data() + 8 * nchunks);
    const bool v3 = kernels() == Kernels::kX86V3;
    std::optional<RngStream> stream;
    std::optional<LaneRng> rng;
    std::vector<uint32_t> random;
    std::vector<float> offset;
    if (stochastic_) {
      stream.emplace(ctx.Key(tensor));
      rng.emplace(*stream);
      size_t padded = (chunk_ + 15) / 16 * 16;
      random.resize(padded);
      offset.resize(padded);
    }
    for (size_t c = 0; c < nchunks; ++c) {
      const float* x = input.data() + c * chunk_;
      size_t len = std::min(chunk_, n - c * chunk_);
#if defined(FRUGAL_X86)
      ChunkRange r = v3 ? RangeV3(x, len) : RangeGeneric(x, len);
#else
      ChunkRange r = RangeGeneric(x, len);
#endif
      float span = r.hi - r.lo;
      if (!r.finite || !std::isfinite(span)) {
        return InvalidArgumentError(fmt::format(
            "minmax8: tensor '{}' has non-finite values or a range beyond float32 in chunk {}",
            tensor.name, c));
      }
      StoreF32(body.data() + 8 * c, r.lo);
      StoreF32(body.data() + 8 * c + 4, r.hi);
      float inv = span > 0.0f ? 255.0f / span : 0.0f;
      const float* off = nullptr;
      if (stochastic_) {
        rng->Fill(kernels(), random.data(), random.size());
        for (size_t i = 0; i < len; ++i) offset[i] = ToUnit(random[i]);
        off = offset.data();
      }
#if defined(FRUGAL_X86)
      if (v3) {
        QuantizeV3(x, len, r.lo, inv, off, 0.5f, q + c * chunk_);
        continue;
      }
#endif
      QuantizeGeneric(x, len, r.lo, inv, off, 0.5f, q + c * chunk_);
    }
    return Status::Ok();
  }

 private:
  friend InPlaceDecoder;

  // Decode (kAdd) or DecodeOverwrite: validates every range before it writes anything.
  template <bool kAdd>
  Status DecodeInto(std::span<const std::byte> payload, const TensorInfo& tensor,
                    std::span<float> output) const {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const size_t n = tensor.numel;
    const size_t nchunks = NumChunks(n);
    if (body.size() != 8 * nchunks + n) {
      return MalformedError(fmt::format("minmax8 payload: body of {} bytes, expected {}",
                                        body.size(), 8 * nchunks + n));
    }
    for (size_t c = 0; c < nchunks; ++c) {
      float lo = LoadF32(body.data() + 8 * c);
      float hi = LoadF32(body.data() + 8 * c + 4);
      if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo <= hi) || !std::isfinite(hi - lo)) {
        return MalformedError(
            fmt::format("minmax8 payload: chunk {} has an invalid range [{}, {}]", c, lo, hi));
      }
    }
    const auto* q = reinterpret_cast<const uint8_t*>(body.data() + 8 * nchunks);
    const bool v3 = kernels() == Kernels::kX86V3;
    for (size_t c = 0; c < nchunks; ++c) {
      float lo = LoadF32(body.data() + 8 * c);
      float hi = LoadF32(body.data() + 8 * c + 4);
      float step = (hi - lo) / 255.0f;
      size_t len = std::min(chunk_, n - c * chunk_);
#if defined(FRUGAL_X86)
      if (v3) {
        DequantizeV3<kAdd>(q + c * chunk_, len, lo, step, output.data() + c * chunk_);
        continue;
      }
#endif
      DequantizeGeneric<kAdd>(q + c * chunk_, len, lo, step, output.data() + c * chunk_);
    }
    return Status::Ok();
  }

  size_t chunk_;
  bool stochastic_;
};

}  // namespace

void RegisterMinMax8(CompressorRegistry& registry) {
  MustRegister(registry,
               {.name = "minmax8",
                .summary = "per-chunk min/max uint8 quantization (Bagua ByteGrad)",
                .params = "chunk=1024 rounding=nearest|stochastic",
                .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
                  FRUGAL_ASSIGN_OR_RETURN(int64_t chunk, p.Int("chunk", 1024, 1, int64_t{1} << 24));
                  FRUGAL_ASSIGN_OR_RETURN(
                      std::string rounding,
                      p.Choice("rounding", "nearest", {"nearest", "stochastic"}));
                  return std::unique_ptr<Compressor>(std::make_unique<MinMax8Compressor>(
                      static_cast<size_t>(chunk), rounding == "stochastic"));
                }});
}

}  // namespace frugal::compress_internal
