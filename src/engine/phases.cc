// Timed compressors for the engine's timeline.
//
// TimedCompressor forwards every method of Compressor to the compressor it wraps; Encode, Decode,
// DecodeOverwrite and the fused error-feedback encoder (EncodeWithResidual) also record
// [begin, end) with the tensor's name in the PhaseRecorder, so a timed compressor takes the same
// paths as an untimed one.
// WithPhaseTiming copies every entry of a registry with its factory wrapped so that the compressor
// it builds is wrapped in a TimedCompressor; CompressorRegistry::Create then adds error feedback
// around it (the timed compressor has no inner(), exactly like the compressor it wraps), so the
// residual arithmetic is unchanged and only the leaf encode/decode calls are timed.
#include <memory>
#include <utility>

#include "frugal/engine_phases.h"

namespace frugal {
namespace {

class TimedCompressor final : public Compressor {
 public:
  TimedCompressor(std::unique_ptr<Compressor> inner, PhaseRecorder& recorder)
      : inner_(std::move(inner)), recorder_(recorder) {}

  std::string_view name() const override { return inner_->name(); }
  std::string spec() const override { return inner_->spec(); }
  CompressorId id() const override { return inner_->id(); }
  CompressorTraits traits() const override { return inner_->traits(); }
  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override {
    return inner_->BodyBits(tensor);
  }
  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    const auto begin = Clock::now();
    Status status = inner_->Encode(input, tensor, ctx, out);
    recorder_.Record("compress", tensor.name, begin, Clock::now());
    return status;
  }
  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    const auto begin = Clock::now();
    Status status = inner_->Decode(payload, tensor, ctx, output);
    recorder_.Record("decompress", tensor.name, begin, Clock::now());
    return status;
  }
  Status DecodeOverwrite(std::span<const std::byte> payload, const TensorInfo& tensor,
                         CompressContext& ctx, std::span<float> output) const override {
    const auto begin = Clock::now();
    Status status = inner_->DecodeOverwrite(payload, tensor, ctx, output);
    recorder_.Record("decompress", tensor.name, begin, Clock::now());
    return status;
  }
  // Error feedback's fused encoder (one "compress" phase); nullopt, untimed, where the wrapped
  // compressor has none, so that error feedback falls back to the timed Encode and Decode.
  std::optional<Status> EncodeWithResidual(std::span<const float> input, std::span<float> residual,
                                           const TensorInfo& tensor, CompressContext& ctx,
                                           std::vector<std::byte>& out) const override {
    const auto begin = Clock::now();
    std::optional<Status> status = inner_->EncodeWithResidual(input, residual, tensor, ctx, out);
    if (status) recorder_.Record("compress", tensor.name, begin, Clock::now());
    return status;
  }
  Status Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                   const TensorInfo& tensor, CompressContext& ctx,
                   const AggregateOptions& options) const override {
    return inner_->Aggregate(t, data, residual, tensor, ctx, options);
  }
  std::optional<uint64_t> EntropyCodedBits(std::span<const std::byte> payload) const override {
    return inner_->EntropyCodedBits(payload);
  }

 private:
  std::unique_ptr<Compressor> inner_;
  PhaseRecorder& recorder_;
};

}  // namespace

void PhaseRecorder::Record(std::string_view name, std::string_view tensor, Clock::time_point begin,
                           Clock::time_point end) {
  std::lock_guard<std::mutex> lock(mutex_);
  phases_.push_back(Phase{std::string(name), std::string(tensor), begin, end});
}

std::vector<Phase> PhaseRecorder::Drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Phase> out;
  out.swap(phases_);
  return out;
}

CompressorRegistry WithPhaseTiming(const CompressorRegistry& base, PhaseRecorder& recorder) {
  CompressorRegistry timed;
  for (const std::string& name : base.Names()) {
    CompressorEntry entry = *base.Find(name);
    CompressorFactory factory = entry.factory;
    entry.factory = [factory,
                     &recorder](CompressorParams& params) -> StatusOr<std::unique_ptr<Compressor>> {
      FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> compressor, factory(params));
      return std::unique_ptr<Compressor>(
          std::make_unique<TimedCompressor>(std::move(compressor), recorder));
    };
    Status status = timed.Register(std::move(entry));
    FRUGAL_INTERNAL_ASSERT(status.ok(), status.ToString());
  }
  return timed;
}

}  // namespace frugal
