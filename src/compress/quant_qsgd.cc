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
FRUGAL_INLINE void LevelsBody(const float* x, size_t n, float scale, float max_level,
                              const uint32_t* random, int level_bits, uint32_t* codes) {
  for (size_t i = 0; i < n; ++i) {
    float r = std::fabs(x[i]) * scale;
    float fl = std::floor(r);
    float level = fl + (ToUnit(random[i]) < r - fl ? 1.0f : 0.0f);
    level = level > max_level ? max_level : level;
    uint32_t l = static_cast<uint32_t>(static_cast<int32_t>(level));
    uint32_t neg = (x[i] < 0.0f && l != 0) ? 1u : 0u;
    codes[i] = l | (neg << level_bits);
  }
}

double SumSquaresGeneric(const float* x, size_t n) { return SumSquaresBody(x, n); }
void LevelsGeneric(const float* x, size_t n, float scale, float max_level, const uint32_t* random,
                   int level_bits, uint32_t* codes) {
  LevelsBody(x, n, scale, max_level, random, level_bits, codes);
}
#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 double SumSquaresV3(const float* x, size_t n) { return SumSquaresBody(x, n); }
FRUGAL_TARGET_V3 void LevelsV3(const float* x, size_t n, float scale, float max_level,
                               const uint32_t* random, int level_bits, uint32_t* codes) {
  LevelsBody(x, n, scale, max_level, random, level_bits, codes);
}
#endif

class QsgdCompressor final : public QuantizerBase {
 public:
  QsgdCompressor(uint32_t levels, size_t bucket)
      : QuantizerBase("qsgd", CompressorId::kQsgd,
                      CompressorTraits{.unbiased = true, .requantizable = true},
                      fmt::format("bucket={},levels={}", bucket, levels)),
        levels_(levels),
        bucket_(bucket),
        level_bits_(BitsFor(uint64_t{levels} + 1)),
        width_(level_bits_ + 1) {}

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
    RngStream stream(ctx.Key(tensor));
    LaneRng rng(stream);
    size_t padded = (bucket_ + 15) / 16 * 16;
    std::vector<uint32_t> random(padded);
    std::vector<uint32_t> codes(bucket_);
    BitPacker packer(body.data() + 4 * nb);
    const bool v3 = HasX86V3();
    const float max_level = static_cast<float>(levels_);
    for (size_t b = 0; b < nb; ++b) {
      const float* x = input.data() + b * bucket_;
      size_t len = std::min(bucket_, n - b * bucket_);
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
      rng.Fill(random.data(), random.size());
#if defined(FRUGAL_X86)
      if (v3) {
        LevelsV3(x, len, scale, max_level, random.data(), level_bits_, codes.data());
      } else {
        LevelsGeneric(x, len, scale, max_level, random.data(), level_bits_, codes.data());
      }
#else
      LevelsGeneric(x, len, scale, max_level, random.data(), level_bits_, codes.data());
#endif
      for (size_t i = 0; i < len; ++i) packer.Put(codes[i], width_);
    }
    packer.Flush();
    return Status::Ok();
  }

  // Checks the body and returns its norms; kMalformed on any invalid field.
  Status Validate(std::span<const std::byte> body, size_t n) const {
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
    BitUnpacker unpacker(body.data() + 4 * nb, body.data() + body.size());
    const uint32_t sign_bit = 1u << level_bits_;
    for (size_t i = 0; i < n; ++i) {
      uint32_t code = unpacker.Get(width_);
      uint32_t level = code & (sign_bit - 1);
      if (level > levels_ || (level == 0 && code != 0)) {
        return MalformedError(
            fmt::format("qsgd payload: element {} has code {} (levels={})", i, code, levels_));
      }
    }
    if (unpacker.leftover() != 0) return MalformedError("qsgd payload: padding bits are set");
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const size_t n = tensor.numel;
    FRUGAL_RETURN_IF_ERROR(Validate(body, n));
    const size_t nb = NumBuckets(n);
    BitUnpacker unpacker(body.data() + 4 * nb, body.data() + body.size());
    const uint32_t sign_bit = 1u << level_bits_;
    // A table of the values of every code for the current bucket.
    std::vector<float> table(size_t{2} << level_bits_, 0.0f);
    for (size_t b = 0; b < nb; ++b) {
      float norm = LoadF32(body.data() + 4 * b);
      float unit = norm / static_cast<float>(levels_);
      for (uint32_t l = 0; l <= levels_; ++l) {
        table[l] = unit * static_cast<float>(l);
        table[l | sign_bit] = -table[l];
      }
      size_t begin = b * bucket_;
      size_t len = std::min(bucket_, n - begin);
      float* o = output.data() + begin;
      for (size_t i = 0; i < len; ++i) o[i] += table[unpacker.Get(width_)];
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
