// natural: natural compression (Horvath et al., 2019), stochastic rounding to a power of two.
//
// A float32 x = +-2^(E - 127) * (1 + M / 2^23) (E its biased exponent, M its mantissa) lies between
// 2^(E-127) and 2^(E-126). The encoder rounds |x| up to the larger with probability M / 2^23 and
// down otherwise, so E[decoded] = x: in bits, E' = E + (u < M) with u a uniform 23-bit integer
// from the rank's stream. The same rule rounds subnormals (E = 0) to 0 or 2^-126 without bias.
// Only the sign and E' travel: 9 bits per element. |x| >= 2^127 cannot round up within float32's
// range and is kept at 2^127 (E' <= 254); non-finite input cannot be represented
// (kInvalidArgument).
//
// Body: numel exponent bytes E' (0 means zero, 255 is invalid), then the sign plane (numel bits,
// LSB-first, zero padded). The decoder checks both before it writes anything and adds
// +-2^(E' - 127).
#include <bit>

#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

// exps[i] = rounded exponent; returns a nonzero value when some input was not finite.
FRUGAL_INLINE uint32_t ExponentsBody(const float* x, size_t n, const uint32_t* random,
                                     uint8_t* exps) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t w = std::bit_cast<uint32_t>(x[i]);
    uint32_t e = (w >> 23) & 0xFFu;
    uint32_t m = w & 0x7FFFFFu;
    bad |= e == 0xFFu ? 1u : 0u;
    uint32_t up = (random[i] & 0x7FFFFFu) < m ? 1u : 0u;
    uint32_t r = e + up;
    r = r > 254u ? 254u : r;
    exps[i] = static_cast<uint8_t>(r);
  }
  return bad;
}

// out[i] += +-2^(e - 127), 0 for e == 0; signs[i] is 0 or 1.
FRUGAL_INLINE void AddPowersBody(const uint8_t* exps, const uint8_t* signs, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t e = exps[i];
    uint32_t w = (uint32_t{signs[i]} << 31) | (e << 23);
    out[i] += e == 0 ? 0.0f : std::bit_cast<float>(w);
  }
}

// Nonzero if some exponent is 255.
FRUGAL_INLINE uint32_t InvalidExponentsBody(const uint8_t* exps, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad |= exps[i] == 0xFFu ? 1u : 0u;
  return bad;
}

uint32_t ExponentsGeneric(const float* x, size_t n, const uint32_t* r, uint8_t* e) {
  return ExponentsBody(x, n, r, e);
}
void AddPowersGeneric(const uint8_t* e, const uint8_t* s, size_t n, float* out) {
  AddPowersBody(e, s, n, out);
}
uint32_t InvalidExponentsGeneric(const uint8_t* e, size_t n) { return InvalidExponentsBody(e, n); }
#if defined(FRUGAL_X86)
FRUGAL_TARGET_V3 uint32_t ExponentsV3(const float* x, size_t n, const uint32_t* r, uint8_t* e) {
  return ExponentsBody(x, n, r, e);
}
FRUGAL_TARGET_V3 void AddPowersV3(const uint8_t* e, const uint8_t* s, size_t n, float* out) {
  AddPowersBody(e, s, n, out);
}
FRUGAL_TARGET_V3 uint32_t InvalidExponentsV3(const uint8_t* e, size_t n) {
  return InvalidExponentsBody(e, n);
}
#endif

constexpr size_t kBlock = 4096;

class NaturalCompressor final : public QuantizerBase {
 public:
  NaturalCompressor()
      : QuantizerBase("natural", CompressorId::kNatural,
                      CompressorTraits{.unbiased = true, .requantizable = true}, "") {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * (tensor.numel + SignBytes(tensor.numel));
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    const size_t n = input.size();
    std::span<std::byte> body = BeginPayload(*this, tensor, n + SignBytes(n), out);
    auto* exps = reinterpret_cast<uint8_t*>(body.data());
    RngStream stream(ctx.Key(tensor));
    LaneRng rng(stream);
    std::vector<uint32_t> random(kBlock);
    const bool v3 = kernels() == Kernels::kX86V3;
    uint32_t bad = 0;
    for (size_t begin = 0; begin < n; begin += kBlock) {
      size_t len = std::min(kBlock, n - begin);
      rng.Fill(kernels(), random.data(), random.size());
#if defined(FRUGAL_X86)
      bad |= v3 ? ExponentsV3(input.data() + begin, len, random.data(), exps + begin)
                : ExponentsGeneric(input.data() + begin, len, random.data(), exps + begin);
#else
      bad |= ExponentsGeneric(input.data() + begin, len, random.data(), exps + begin);
#endif
    }
    if (bad != 0) {
      return InvalidArgumentError(
          fmt::format("natural: tensor '{}' has non-finite values", tensor.name));
    }
    PackSigns(kernels(), input.data(), n, body.data() + n);
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const size_t n = tensor.numel;
    if (body.size() != n + SignBytes(n)) {
      return MalformedError(fmt::format("natural payload: body of {} bytes, expected {}",
                                        body.size(), n + SignBytes(n)));
    }
    const auto* exps = reinterpret_cast<const uint8_t*>(body.data());
    const bool v3 = kernels() == Kernels::kX86V3;
#if defined(FRUGAL_X86)
    uint32_t invalid = v3 ? InvalidExponentsV3(exps, n) : InvalidExponentsGeneric(exps, n);
#else
    uint32_t invalid = InvalidExponentsGeneric(exps, n);
#endif
    if (invalid != 0) return MalformedError("natural payload: exponent 255 is not a value");
    FRUGAL_RETURN_IF_ERROR(CheckSignPadding(body.data() + n, n, "natural"));
    std::vector<uint8_t> signs(kBlock);
    for (size_t begin = 0; begin < n; begin += kBlock) {
      size_t len = std::min(kBlock, n - begin);
      UnpackCodes(kernels(), body.data() + n + begin / 8, len, 1, signs.data());
#if defined(FRUGAL_X86)
      if (v3) {
        AddPowersV3(exps + begin, signs.data(), len, output.data() + begin);
        continue;
      }
#endif
      AddPowersGeneric(exps + begin, signs.data(), len, output.data() + begin);
    }
    return Status::Ok();
  }
};

}  // namespace

void RegisterNatural(CompressorRegistry& registry) {
  MustRegister(registry,
               {.name = "natural",
                .summary = "natural compression: unbiased rounding to powers of two (9 bits)",
                .params = "",
                .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
                  return std::unique_ptr<Compressor>(std::make_unique<NaturalCompressor>());
                }});
}

}  // namespace frugal::compress_internal
