// Composition of compressors: "s1 | s2 | ... | sn" (CompressorRegistry::Create with a '|').
//
// Stage 1 encodes the tensor; every stage but the last must end its body with float32 values
// (traits().ends_with_floats: none, randomk, topk), and the next stage encodes those values as a
// tensor of their own (named "<tensor>|<i>"), in their place: "topk:ratio=0.01 | polar:rate=0.5"
// sends the indices of the top 1% and polar codes their values. Decoding runs backwards: the last
// stage decodes the values, which are put back behind the previous stage's prefix to rebuild its
// payload, which that stage decodes, and so on down to the output.
//
// Body: for each stage i < n, u64 V_i (the values stage i left for stage i+1, at most its input's
// elements), u64 P_i (the bytes of stage i's body before its values), those P_i bytes; then the
// last stage's whole payload, header included. Each rebuilt payload and the last one are
// validated by their own stage's decoder; the composition checks V_i and P_i against the input
// sizes and the bytes that are left, so a malformed payload is kMalformed and the output is
// untouched. The payload is what goes on the wire, so it is counted exactly. The later stages'
// state in the context (random-k's drawn indices) lives for one call: their tensors change.
//
// Rules: no empty stage; every stage but the last ends its body with float values; no stage
// moves its own data (custom aggregation: powersgd, gtopk, terngrad), votes signs (sign, signum)
// or keeps momentum and residual per coordinate (dgc), since a stage after the first sees other
// coordinates at every step. Error feedback applies to the whole composition: the "ef" of the
// last stage (explicit, or its default: on for polar and efsign) wraps it, and "ef" on an earlier
// stage is refused. A composition is unbiased, lossless or re-quantizable when all its stages are,
// needs error feedback when one stage does, and has a data-dependent size.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "compress/register.h"
#include "frugal/compress_wire.h"
#include "frugal/compressor.h"

namespace frugal {
namespace {

void PutU64(std::vector<std::byte>& out, uint64_t v) {
  const size_t at = out.size();
  out.resize(at + 8);
  std::memcpy(out.data() + at, &v, 8);
}

uint64_t GetU64(const std::byte* at) {
  uint64_t v;
  std::memcpy(&v, at, 8);
  return v;
}

class Composition final : public Compressor {
 public:
  explicit Composition(std::vector<std::unique_ptr<Compressor>> stages)
      : stages_(std::move(stages)) {
    std::vector<std::string> specs;
    for (const auto& s : stages_) specs.push_back(s->spec());
    spec_ = fmt::format("{}", fmt::join(specs, "|"));
    traits_ = CompressorTraits{
        .unbiased = true, .lossless = true, .requantizable = true, .variable_size = true};
    for (const auto& s : stages_) {
      const CompressorTraits t = s->traits();
      traits_.unbiased &= t.unbiased;
      traits_.lossless &= t.lossless;
      traits_.requantizable &= t.requantizable;
      traits_.needs_error_feedback |= t.needs_error_feedback;
    }
  }

  std::string_view name() const override { return "composition"; }
  std::string spec() const override { return spec_; }
  CompressorId id() const override { return CompressorId::kComposite; }
  CompressorTraits traits() const override { return traits_; }
  std::optional<uint64_t> BodyBits(const TensorInfo& tensor) const override { return std::nullopt; }

  Status Encode(std::span<const float> input, const TensorInfo& tensor, CompressContext& ctx,
                std::vector<std::byte>& out) const override {
    FRUGAL_CHECK_EQ(input.size(), tensor.numel, "buffer size vs. numel of tensor '", tensor.name,
                    "'");
    std::vector<std::byte> body, payload;
    std::vector<float> values;
    std::span<const float> x = input;
    TensorInfo info = tensor;
    for (size_t i = 0; i + 1 < stages_.size(); ++i) {
      FRUGAL_RETURN_IF_ERROR(stages_[i]->Encode(x, info, ctx, payload));
      const std::optional<uint64_t> count = stages_[i]->TrailingFloats(payload, info);
      const size_t body_bytes = payload.size() - kWireHeaderBytes;
      FRUGAL_INTERNAL_ASSERT(count.has_value() && *count <= info.numel && 4 * *count <= body_bytes,
                             stages_[i]->spec(), " did not end its payload with float values");
      const size_t prefix = body_bytes - 4 * *count;
      PutU64(body, *count);
      PutU64(body, prefix);
      body.insert(body.end(), payload.begin() + kWireHeaderBytes,
                  payload.begin() + static_cast<std::ptrdiff_t>(kWireHeaderBytes + prefix));
      values.resize(*count);
      if (*count > 0) {
        std::memcpy(values.data(), payload.data() + kWireHeaderBytes + prefix, 4 * *count);
      }
      x = values;
      info = StageTensor(tensor, i + 1, *count);
    }
    FRUGAL_RETURN_IF_ERROR(stages_.back()->Encode(x, info, ctx, payload));
    EraseStageStates(tensor, ctx);
    body.insert(body.end(), payload.begin(), payload.end());
    std::span<std::byte> dst = BeginPayload(*this, tensor, body.size(), out);
    if (!body.empty()) std::memcpy(dst.data(), body.data(), body.size());
    return Status::Ok();
  }

  Status Decode(std::span<const std::byte> payload, const TensorInfo& tensor, CompressContext& ctx,
                std::span<float> output) const override {
    FRUGAL_CHECK_EQ(output.size(), tensor.numel, "buffer size vs. numel of tensor '", tensor.name,
                    "'");
    FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body, OpenPayload(payload, *this, tensor));
    const size_t n = stages_.size();
    std::vector<TensorInfo> infos = {tensor};
    std::vector<std::span<const std::byte>> prefixes;
    size_t at = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (body.size() - at < 16) {
        return MalformedError(fmt::format("composition payload: stage {} header cut short", i + 1));
      }
      const uint64_t count = GetU64(body.data() + at);
      const uint64_t prefix = GetU64(body.data() + at + 8);
      at += 16;
      if (count > infos.back().numel) {
        return MalformedError(
            fmt::format("composition payload: stage {} leaves {} values of {} elements", i + 1,
                        count, infos.back().numel));
      }
      if (prefix > body.size() - at) {
        return MalformedError(
            fmt::format("composition payload: stage {} announces {} bytes, {} are left", i + 1,
                        prefix, body.size() - at));
      }
      prefixes.push_back(body.subspan(at, prefix));
      at += prefix;
      infos.push_back(StageTensor(tensor, i + 1, count));
    }
    std::vector<float> values(infos.back().numel, 0.0f);
    FRUGAL_RETURN_IF_ERROR(stages_.back()
                               ->Decode(body.subspan(at), infos.back(), ctx, values)
                               .Annotate(fmt::format("composition stage {}", n)));
    std::vector<std::byte> rebuilt;
    for (size_t i = n - 1; i-- > 0;) {
      const std::span<const std::byte> prefix = prefixes[i];
      std::span<std::byte> dst =
          BeginPayload(*stages_[i], infos[i], prefix.size() + 4 * values.size(), rebuilt);
      if (!prefix.empty()) std::memcpy(dst.data(), prefix.data(), prefix.size());
      if (!values.empty()) {
        std::memcpy(dst.data() + prefix.size(), values.data(), 4 * values.size());
      }
      Status decoded;
      if (i == 0) {
        decoded = stages_[0]->Decode(rebuilt, infos[0], ctx, output);
      } else {
        std::vector<float> next(infos[i].numel, 0.0f);
        decoded = stages_[i]->Decode(rebuilt, infos[i], ctx, next);
        values.swap(next);
      }
      FRUGAL_RETURN_IF_ERROR(decoded.Annotate(fmt::format("composition stage {}", i + 1)));
    }
    EraseStageStates(tensor, ctx);
    return Status::Ok();
  }

 private:
  // A later stage codes other coordinates at every step (and, after a sampled top-k, another
  // number of them): what it kept in the context for its tensor is dropped after each use.
  void EraseStageStates(const TensorInfo& tensor, CompressContext& ctx) const {
    for (size_t i = 1; i < stages_.size(); ++i) ctx.Erase(StageTensor(tensor, i, 0).name);
  }

  static TensorInfo StageTensor(const TensorInfo& tensor, size_t stage, size_t numel) {
    return TensorInfo(fmt::format("{}|{}", tensor.name, stage), numel);
  }

  std::vector<std::unique_ptr<Compressor>> stages_;
  std::string spec_;
  CompressorTraits traits_;
};

}  // namespace

namespace compress_internal {

StatusOr<std::unique_ptr<Compressor>> CreateComposition(const CompressorRegistry& registry,
                                                        std::string_view spec) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t bar = spec.find('|', start);
    parts.push_back(spec.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  auto refuse = [&](std::string_view why) {
    return InvalidArgumentError(fmt::format("composition '{}': {}", spec, why));
  };
  std::vector<std::unique_ptr<Compressor>> stages;
  bool ef = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].find_first_not_of(" \t") == std::string_view::npos) {
      return refuse(fmt::format("stage {} is empty", i + 1));
    }
    FRUGAL_ASSIGN_OR_RETURN(CompressorParams params, CompressorParams::Parse(parts[i]));
    const CompressorEntry* entry = registry.Find(params.name());
    if (entry == nullptr) {
      return NotFoundError(fmt::format("unknown compressor '{}' (accepted: {})", params.name(),
                                       fmt::join(registry.Names(), ", ")));
    }
    const bool last = i + 1 == parts.size();
    if (!last && params.Has("ef")) {
      return refuse(fmt::format(
          "error feedback applies to the whole composition; write ef on its last stage, not on "
          "{}",
          params.name()));
    }
    FRUGAL_ASSIGN_OR_RETURN(bool stage_ef, params.Bool("ef", entry->error_feedback_by_default));
    if (last) ef = stage_ef;
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> stage, entry->factory(params));
    FRUGAL_RETURN_IF_ERROR(params.Finish());
    const CompressorTraits t = stage->traits();
    if (t.custom_aggregate) {
      return refuse(
          fmt::format("{} moves its own data between ranks and cannot be a stage", params.name()));
    }
    if (t.sign_vote) {
      return refuse(
          fmt::format("{} is aggregated by a vote of signs and cannot be a stage", params.name()));
    }
    if (params.name() == "dgc") {
      return refuse("dgc keeps momentum and residual per coordinate, which a stage does not see");
    }
    if (!last && !t.ends_with_floats) {
      return refuse(fmt::format(
          "{} does not end its payload with float values for a next stage (first stages: none, "
          "randomk, topk)",
          params.name()));
    }
    stages.push_back(std::move(stage));
  }
  std::unique_ptr<Compressor> composition = std::make_unique<Composition>(std::move(stages));
  if (ef) composition = WithErrorFeedback(std::move(composition));
  return composition;
}

}  // namespace compress_internal
}  // namespace frugal
