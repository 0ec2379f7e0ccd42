// Error feedback (residual memory, Seide et al. 2014; Karimireddy et al. 2019) around any
// compressor C. Per tensor the context keeps a residual e (slot kErrorFeedbackSlot, zeros at
// first). Each step, for the gradient g:
//   p = g + e            compensate
//   payload = C(p)       compress what is owed, not only what is new
//   e = p - D(payload)   remember what the payload did not carry
// so that sum over steps of D(payload_t) + e_T = sum over steps of g_t exactly up to float
// rounding: nothing is lost, it is only delayed. With a custom-aggregate compressor the
// compensation is the same and the compressor reports the residual of its own exchange.
#include <fmt/format.h>

#include <algorithm>

#include "compress/aggregate_util.h"
#include "frugal/compressor.h"

namespace frugal {
namespace compress_internal {

Status EncodeWithFeedback(const Compressor& inner, std::span<const float> input,
                          const TensorInfo& tensor, CompressContext& ctx, std::string_view slot,
                          std::vector<std::byte>& out) {
  FRUGAL_CHECK_EQ(input.size(), tensor.numel, "error feedback of tensor '", tensor.name, "'");
  auto& state = ctx.State<ResidualState>(tensor, slot);
  const size_t n = input.size();
  state.residual.resize(n, 0.0f);
  if (std::optional<Status> fused =
          inner.EncodeWithResidual(input, state.residual, tensor, ctx, out)) {
    return *fused;
  }
  state.compensated.resize(n);
  float* e = state.residual.data();
  float* p = state.compensated.data();
  for (size_t i = 0; i < n; ++i) p[i] = input[i] + e[i];
  FRUGAL_RETURN_IF_ERROR(inner.Encode(state.compensated, tensor, ctx, out));
  Status decoded = ComputeResidual(inner, out, state.compensated, tensor, ctx, state.residual);
  FRUGAL_INTERNAL_ASSERT(decoded.ok(), inner.spec(),
                         " cannot decode its own payload: ", decoded.ToString());
  return Status::Ok();
}

namespace {

// The inner spec without any "ef" parameter, then ef=1; of a composition "a|b", its last stage's.
std::string FeedbackSpec(const std::string& spec) {
  const size_t bar = spec.rfind('|');
  const std::string stages = bar == std::string::npos ? "" : spec.substr(0, bar + 1);
  const std::string inner = bar == std::string::npos ? spec : spec.substr(bar + 1);
  size_t colon = inner.find(':');
  if (colon == std::string::npos) return stages + inner + ":ef=1";
  std::string head = inner.substr(0, colon);
  std::string rest = inner.substr(colon + 1);
  std::vector<std::string> kept;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    std::string item =
        rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty() && item.rfind("ef=", 0) != 0 && item != "ef") kept.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  kept.emplace_back("ef=1");
  return fmt::format("{}{}:{}", stages, head, fmt::join(kept, ","));
}

class ErrorFeedbackCompressor final : public Compressor {
 public:
  explicit ErrorFeedbackCompressor(std::unique_ptr<Compressor> inner)
      : inner_(std::move(inner)), spec_(FeedbackSpec(inner_->spec())) {}

  std::string_view name() const override { return inner_->name(); }
  std::string spec() const override { return spec_; }
  CompressorId id() const override { return inner_->id(); }
  CompressorTraits traits() const override {
    CompressorTraits t = inner_->traits();
    t.unbiased = false;
    t.lossless = false;
    t.needs_error_feedback = false;
    return t;
  }
  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return inner_->BodyBits(tensor);
  }
  std::optional<uint64_t> MaxBodyBits(const TensorInfo& tensor) const override {
    return inner_->MaxBodyBits(tensor);
  }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    return EncodeWithFeedback(*inner_, input, tensor, ctx, kErrorFeedbackSlot, out);
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    return inner_->Decode(payload, tensor, ctx, output);
  }
  Status DecodeOverwrite(std::span<const std::byte> payload, const TensorInfo& tensor,
                         CompressContext& ctx, std::span<float> output) const override {
    return inner_->DecodeOverwrite(payload, tensor, ctx, output);
  }
  Status DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                      CompressContext& ctx, float scale, std::span<float> output) const override {
    return inner_->DecodeScaled(payload, tensor, ctx, scale, output);
  }

  Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                   const TensorInfo& tensor, CompressContext& ctx,
                   const AggregateOptions& options) const override {
    if (!inner_->traits().custom_aggregate) {
      return Compressor::Aggregate(t, data, residual, tensor, ctx, options);
    }
    FRUGAL_CHECK_EQ(data.size(), tensor.numel, "error feedback of tensor '", tensor.name, "'");
    auto& state = ctx.State<ResidualState>(tensor, kErrorFeedbackSlot);
    state.residual.resize(data.size(), 0.0f);
    for (size_t i = 0; i < data.size(); ++i) data[i] += state.residual[i];
    FRUGAL_RETURN_IF_ERROR(inner_->Aggregate(t, data, state.residual, tensor, ctx, options));
    if (!residual.empty())
      std::copy(state.residual.begin(), state.residual.end(), residual.begin());
    return Status::Ok();
  }

  std::optional<std::vector<uint64_t>> AggregateAllreduceFloats(const TensorInfo& tensor,
                                                                uint64_t step) const override {
    return inner_->AggregateAllreduceFloats(tensor, step);
  }
  std::optional<uint64_t> EntropyCodedBits(std::span<const std::byte> payload) const override {
    return inner_->EntropyCodedBits(payload);
  }
  uint32_t WireCheck(const TensorInfo& tensor) const override { return inner_->WireCheck(tensor); }
  const Compressor* inner() const override { return inner_.get(); }

 private:
  std::unique_ptr<Compressor> inner_;
  std::string spec_;
};

}  // namespace
}  // namespace compress_internal

std::unique_ptr<Compressor> WithErrorFeedback(std::unique_ptr<Compressor> inner) {
  FRUGAL_CHECK(inner != nullptr, "WithErrorFeedback(nullptr)");
  FRUGAL_CHECK(inner->inner() == nullptr, "compressor ", inner->spec(),
               " already has error feedback");
  return std::make_unique<compress_internal::ErrorFeedbackCompressor>(std::move(inner));
}

}  // namespace frugal
