// Compression of pushes and pulls (see codec.h).
#include "ps/codec.h"

#include <fmt/format.h>

#include <algorithm>

namespace frugal::ps_internal {

StatusOr<std::unique_ptr<Compressor>> MakeKeyCompressor(std::string_view spec,
                                                        KeyErrorFeedback error_feedback,
                                                        std::string_view flag) {
  const CompressorRegistry registry = DefaultCompressorRegistry();
  StatusOr<std::unique_ptr<Compressor>> made = registry.Create(spec);
  if (made.ok() && error_feedback == KeyErrorFeedback::kWithout && (*made)->inner() != nullptr) {
    // The inner compressor's canonical spec, with ef=0 for those wrapped by default (efsign).
    const std::string inner = (*made)->inner()->spec();
    const bool has_ef =
        inner.find(":ef=") != std::string::npos || inner.find(",ef=") != std::string::npos;
    made = registry.Create(
        has_ef ? inner : inner + (inner.find(':') == std::string::npos ? ":ef=0" : ",ef=0"));
  }
  if (!made.ok()) {
    return InvalidArgumentError(fmt::format("{} {}: {}", flag, spec, made.status().message()));
  }
  std::unique_ptr<Compressor> compressor = std::move(*made);
  const CompressorTraits traits =
      compressor->inner() != nullptr ? compressor->inner()->traits() : compressor->traits();
  if (traits.custom_aggregate || traits.sign_vote) {
    return InvalidArgumentError(fmt::format(
        "{} {}: {} combines the payloads of all ranks ({}); a parameter server decodes each "
        "worker's payload on its own (use e.g. topk, qsgd or efsign)",
        flag, spec, compressor->name(),
        traits.custom_aggregate ? "its own aggregation" : "majority vote"));
  }
  if (error_feedback == KeyErrorFeedback::kAdd && compressor->inner() == nullptr) {
    compressor = WithErrorFeedback(std::move(compressor));
  }
  return compressor;
}

Status CheckCompression(const ParameterServerConfig& config) {
  if (config.pull_compress.empty() || config.consistency == PsConsistency::kBsp ||
      config.consistency == PsConsistency::kLag) {
    return Status::Ok();
  }
  return InvalidArgumentError(
      "compressed pulls send each version's change once to every worker, so they need every "
      "worker to pull every version (bsp, lag); ssp, asp and backup let workers skip versions");
}

}  // namespace frugal::ps_internal

namespace frugal {

Status CheckParameterServerCompression(const ParameterServerConfig& config) {
  using ps_internal::KeyErrorFeedback;
  FRUGAL_RETURN_IF_ERROR(ps_internal::CheckCompression(config));
  if (!config.push_compress.empty()) {
    FRUGAL_RETURN_IF_ERROR(ps_internal::MakeKeyCompressor(
                               config.push_compress, KeyErrorFeedback::kAsSpecified, "--compress")
                               .status());
  }
  if (!config.pull_compress.empty()) {
    FRUGAL_RETURN_IF_ERROR(ps_internal::MakeKeyCompressor(
                               config.pull_compress, KeyErrorFeedback::kWithout, "--compress-pull")
                               .status());
  }
  return Status::Ok();
}

}  // namespace frugal

namespace frugal::ps_internal {

TensorInfo KeyTensor(const KeyPart& part) { return TensorInfo(part.name, part.count); }

PushEncoder::PushEncoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int worker,
                         int workers)
    : compressor_(std::move(compressor)), ctx_(seed, worker, workers) {}

Status PushEncoder::Encode(const KeyPart& part, uint64_t step, std::span<const float> gradient,
                           std::vector<std::byte>& out) {
  ctx_.set_step(step);
  return compressor_->Encode(gradient, KeyTensor(part), ctx_, out)
      .Annotate(fmt::format("compressing the push of key '{}'", part.name));
}

PushDecoder::PushDecoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int workers)
    : compressor_(std::move(compressor)) {
  for (int w = 0; w < workers; ++w) ctx_.emplace_back(seed, w, workers);
}

Status PushDecoder::Decode(const KeyPart& part, int worker, uint64_t step,
                           std::span<const std::byte> payload, std::span<float> out) {
  CompressContext& ctx = ctx_[static_cast<size_t>(worker)];
  ctx.set_step(step);
  return compressor_->DecodeOverwrite(payload, KeyTensor(part), ctx, out)
      .Annotate(fmt::format("the compressed push of key '{}'", part.name));
}

PullEncoder::PullEncoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int server,
                         int servers)
    : compressor_(std::move(compressor)), ctx_(seed, server, servers) {}

void PullEncoder::Start(const KeyPart& part, std::span<const float> values) {
  Stream& s = streams_[part.key];
  s.part = &part;
  s.x_hat.assign(values.begin(), values.end());
  s.version = 0;
  s.payload.clear();
}

StatusOr<std::span<const std::byte>> PullEncoder::Payload(const KeyPart& part, uint64_t version,
                                                          std::span<const float> x) {
  auto it = streams_.find(part.key);
  FRUGAL_INTERNAL_ASSERT(it != streams_.end(), "no pull stream for key ", part.name);
  Stream& s = it->second;
  if (version < s.version || (version == s.version && s.payload.empty())) {
    return FailedPreconditionError(
        fmt::format("compressed pull of key '{}' at version {}; the workers' copy is at version {}",
                    part.name, version, s.version));
  }
  if (version > s.version) {
    const TensorInfo tensor = KeyTensor(part);
    s.change.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) s.change[i] = x[i] - s.x_hat[i];
    ctx_.set_step(version);
    FRUGAL_RETURN_IF_ERROR(
        compressor_->Encode(s.change, tensor, ctx_, s.payload)
            .Annotate(fmt::format("compressing the parameters of key '{}'", part.name)));
    FRUGAL_RETURN_IF_ERROR(compressor_->Decode(s.payload, tensor, ctx_, s.x_hat));
    s.version = version;
  }
  return std::span<const std::byte>(s.payload);
}

uint64_t PullEncoder::version(uint32_t key) const {
  auto it = streams_.find(key);
  return it == streams_.end() ? 0 : it->second.version;
}

void PushDecoder::VisitState(StateVisitor& visitor) {
  for (size_t w = 0; w < ctx_.size(); ++w) {
    StateVisitor::Scope scope(visitor, std::to_string(w));
    ctx_[w].VisitState(visitor);
  }
}

void PullEncoder::VisitState(StateVisitor& visitor) {
  for (auto& [key, s] : streams_) {
    StateVisitor::Scope scope(visitor, s.part->name);
    visitor.Floats("x_hat", s.x_hat);
    visitor.U64("version", s.version);
    if (visitor.loading()) s.payload.clear();
  }
  StateVisitor::Scope scope(visitor, "compressor");
  ctx_.VisitState(visitor);
}

PullDecoder::PullDecoder(std::unique_ptr<Compressor> compressor, uint64_t seed, int servers)
    : compressor_(std::move(compressor)) {
  for (int s = 0; s < servers; ++s) ctx_.emplace_back(seed, s, servers);
}

void PullDecoder::Start(const KeyPart& part, std::span<const float> values) {
  Copy& c = copies_[part.key];
  c.x.assign(values.begin(), values.end());
  c.version = 0;
  names_[part.key] = part.name;
}

Status PullDecoder::Apply(const KeyPart& part, int server, uint64_t version,
                          std::span<const std::byte> payload, std::span<float> out) {
  auto it = copies_.find(part.key);
  FRUGAL_INTERNAL_ASSERT(it != copies_.end(), "no copy of key ", part.name);
  Copy& c = it->second;
  if (version != c.version + 1) {
    return MalformedError(fmt::format(
        "a compressed change of key '{}' to version {}, but this worker holds version {}",
        part.name, version, c.version));
  }
  CompressContext& ctx = ctx_[static_cast<size_t>(server)];
  ctx.set_step(version);
  FRUGAL_RETURN_IF_ERROR(compressor_->Decode(payload, KeyTensor(part), ctx, c.x)
                             .Annotate(fmt::format("the parameters of key '{}'", part.name)));
  c.version = version;
  std::copy(c.x.begin(), c.x.end(), out.begin());
  return Status::Ok();
}

void PullDecoder::VisitState(StateVisitor& visitor) {
  for (auto& [key, c] : copies_) {
    StateVisitor::Scope scope(visitor, names_[key]);
    visitor.Floats("x", c.x);
    visitor.U64("version", c.version);
  }
}

}  // namespace frugal::ps_internal
