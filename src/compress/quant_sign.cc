// The sign family: sign (signSGD), signum (sign of momentum) and efsign (scaled sign, EF-signSGD).
//
// sign(x) is pinned for the whole family: +1 for x >= 0 (including -0 and NaN), -1 for x < 0.
//
// sign: body = the sign plane (numel bits, element order, LSB-first, zero padded); decodes to
// +-1. Aggregated by majority vote (signSGD with majority vote, Bernstein et al., 2018): every
// rank decodes and sums the +-1 votes and takes the sign of the sum, 0 where the vote is tied.
//
// signum: as sign, of the momentum m = beta * m + (1 - beta) * g kept per tensor in the context
// (slot "signum"), the worker side of Signum with majority vote.
//
// efsign: body = scale (float32) then the sign plane, with scale = ||p||_1 / numel; decodes to
// +-scale (Karimireddy et al., 2019). It is defined with error feedback: the registry wraps it
// (ef defaults to 1; "efsign:ef=0" is the bare scaled sign). Re-quantizable, so the two-phase
// path with server-side error feedback applies (1-bit Adam's compressed all-reduce).
//
// Decoders check the padding bits and, for efsign, that the scale is finite and >= 0.
#include <cmath>

#include "compress/quant_util.h"

namespace frugal::compress_internal {
namespace {

struct MomentumState : TensorState {
  std::vector<float> momentum;
  void VisitState(StateVisitor& visitor) override { visitor.FloatVector("momentum", momentum); }
};

class SignCompressor final : public QuantizerBase {
 public:
  // beta < 0: plain sign; otherwise signum with that momentum.
  explicit SignCompressor(double beta)
      : QuantizerBase(
            beta < 0 ? "sign" : "signum", beta < 0 ? CompressorId::kSign : CompressorId::kSignum,
            CompressorTraits{.sign_vote = true}, beta < 0 ? "" : fmt::format("beta={}", beta)),
        beta_(static_cast<float>(beta)) {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * SignBytes(tensor.numel);
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    std::span<std::byte> body = BeginPayload(*this, tensor, SignBytes(input.size()), out);
    if (beta_ < 0) {
      PackSigns(kernels(), input.data(), input.size(), body.data());
      return Status::Ok();
    }
    auto& state = ctx.State<MomentumState>(tensor, "signum");
    state.momentum.resize(input.size(), 0.0f);
    float* m = state.momentum.data();
    const float beta = beta_;
    const float one_minus = 1.0f - beta_;
    for (size_t i = 0; i < input.size(); ++i) m[i] = beta * m[i] + one_minus * input[i];
    PackSigns(kernels(), m, input.size(), body.data());
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    if (body.size() != SignBytes(tensor.numel)) {
      return MalformedError(fmt::format("{} payload: body of {} bytes, expected {}", name(),
                                        body.size(), SignBytes(tensor.numel)));
    }
    FRUGAL_RETURN_IF_ERROR(CheckSignPadding(body.data(), tensor.numel, name()));
    AddSigns(kernels(), body.data(), tensor.numel, 1.0f, -1.0f, output.data());
    return Status::Ok();
  }

 private:
  float beta_;
};

class ScaledSignCompressor final : public QuantizerBase {
 public:
  ScaledSignCompressor()
      : QuantizerBase("efsign", CompressorId::kEfSign,
                      CompressorTraits{.requantizable = true, .needs_error_feedback = true},
                      "ef=0") {}

  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return 8 * (4 + SignBytes(tensor.numel));
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    const size_t n = input.size();
    std::span<std::byte> body = BeginPayload(*this, tensor, 4 + SignBytes(n), out);
    return StoreScale(PackSignsL1(kernels(), input.data(), n, body.data() + 4), tensor, body)
        .status();
  }

  // EF-signSGD in two passes instead of the generic five: the signs and ||p||_1 of p = g + e,
  // then e = p - (+-scale) with p computed again (cheaper than storing it). Bit for bit the
  // generic path's payload and residual (same summation order, same float operations).
  std::optional<Status> EncodeWithResidual(std::span<const float> input, std::span<float> residual,
                                           const TensorInfo& tensor, CompressContext& ctx,
                                           std::vector<std::byte>& out) const override {
    CheckInput(input.size(), tensor);
    CheckInput(residual.size(), tensor);
    const size_t n = input.size();
    std::span<std::byte> body = BeginPayload(*this, tensor, 4 + SignBytes(n), out);
    FRUGAL_ASSIGN_OR_RETURN(
        float scale, StoreScale(CompensatePackSignsL1(kernels(), input.data(), residual.data(), n,
                                                      body.data() + 4),
                                tensor, body));
    SubtractScaledSigns(kernels(), input.data(), residual.data(), n, scale);
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    CheckInput(output.size(), tensor);
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    if (body.size() != 4 + SignBytes(tensor.numel)) {
      return MalformedError(fmt::format("efsign payload: body of {} bytes, expected {}",
                                        body.size(), 4 + SignBytes(tensor.numel)));
    }
    float scale = LoadF32(body.data());
    if (!std::isfinite(scale) || scale < 0.0f) {
      return MalformedError(fmt::format("efsign payload: scale {}", scale));
    }
    FRUGAL_RETURN_IF_ERROR(CheckSignPadding(body.data() + 4, tensor.numel, "efsign"));
    AddSigns(kernels(), body.data() + 4, tensor.numel, scale, -scale, output.data());
    return Status::Ok();
  }

 private:
  // scale = ||p||_1 / numel into the first 4 bytes of the body; kInvalidArgument (nothing else
  // changed) when it is not finite.
  static StatusOr<float> StoreScale(double l1, const TensorInfo& tensor,
                                    std::span<std::byte> body) {
    const size_t n = tensor.numel;
    const float scale = n > 0 ? static_cast<float>(l1 / static_cast<double>(n)) : 0.0f;
    if (!std::isfinite(scale)) {
      return InvalidArgumentError(
          fmt::format("efsign: tensor '{}' has non-finite values", tensor.name));
    }
    StoreF32(body.data(), scale);
    return scale;
  }
};

}  // namespace

void RegisterSign(CompressorRegistry& registry) {
  MustRegister(registry,
               {.name = "sign",
                .summary = "signSGD: one bit per element, majority vote across ranks",
                .params = "",
                .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
                  return std::unique_ptr<Compressor>(std::make_unique<SignCompressor>(-1.0));
                }});
  MustRegister(registry,
               {.name = "signum",
                .summary = "Signum: sign of the worker's momentum, majority vote across ranks",
                .params = "beta=0.9",
                .factory = [](CompressorParams& p) -> StatusOr<std::unique_ptr<Compressor>> {
                  FRUGAL_ASSIGN_OR_RETURN(double beta, p.Double("beta", 0.9, 0.0, 0.999999));
                  return std::unique_ptr<Compressor>(std::make_unique<SignCompressor>(beta));
                }});
  MustRegister(registry,
               {.name = "efsign",
                .summary = "EF-signSGD: sign scaled by ||p||_1/d, with error feedback (ef=0: "
                           "without)",
                .params = "ef=1",
                .factory = [](CompressorParams&) -> StatusOr<std::unique_ptr<Compressor>> {
                  return std::unique_ptr<Compressor>(std::make_unique<ScaledSignCompressor>());
                },
                .error_feedback_by_default = true});
}

}  // namespace frugal::compress_internal
