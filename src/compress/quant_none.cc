// none: the identity compressor. Body: numel little-endian float32 values. Lossless, and
// summable: the element-wise sum of the bodies of several ranks is the body of their sum, so the
// all-reduce path moves it as it is (this is dense data-parallel training).
#include <cstring>

#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

class NoneCompressor final : public QuantizerBase {
 public:
  NoneCompressor()
      : QuantizerBase("none", CompressorId::kNone,
                      CompressorTraits{.unbiased = true,
                                       .lossless = true,
                                       .summable = true,
                                       .requantizable = true,
                                       .ends_with_floats = true},
                      "") {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return uint64_t{32} * tensor.numel;
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    std::span<std::byte> body = BeginPayload(*this, tensor, input.size_bytes(), out);
    if (!input.empty()) std::memcpy(body.data(), input.data(), input.size_bytes());
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    if (body.size() != 4 * tensor.numel) {
      return MalformedError(
          fmt::format("none payload: body of {} bytes for {} elements", body.size(), tensor.numel));
    }
    const std::byte* b = body.data();
    for (size_t i = 0; i < output.size(); ++i) output[i] += LoadF32(b + 4 * i);
    return Status::Ok();
  }

  std::optional<uint64_t> TrailingFloats(std::span<const std::byte> payload,
                                         const TensorInfo& tensor) const override {
    return tensor.numel;
  }
};

}  // namespace

void RegisterNone(CompressorRegistry& registry) {
  MustRegister(registry,
               {.name = "none",
                .summary = "no compression: float32 values, all-reduced as they are",
                .params = "",
                .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
                  return std::unique_ptr<Compressor>(std::make_unique<NoneCompressor>());
                }});
}

}  // namespace frugal::compress_internal
