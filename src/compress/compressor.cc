#include "frugal/compressor.h"

#include <fmt/format.h>

#include <algorithm>

#include "frugal/compress_wire.h"

namespace frugal {

TensorInfo::TensorInfo(std::string name_in, size_t numel_in, std::vector<int64_t> shape_in)
    : name(std::move(name_in)), id(TensorId(name)), numel(numel_in), shape(std::move(shape_in)) {
  if (!shape.empty()) {
    size_t product = 1;
    for (int64_t d : shape) {
      FRUGAL_CHECK_GE(d, 0, "negative dimension in the shape of tensor '", name, "'");
      product *= static_cast<size_t>(d);
    }
    FRUGAL_CHECK_EQ(product, numel, "shape of tensor '", name, "' does not match its numel");
  }
}

size_t TensorInfo::rows() const {
  if (shape.size() < 2 || numel == 0) return numel;
  return static_cast<size_t>(shape[0]);
}

size_t TensorInfo::cols() const {
  if (shape.size() < 2 || numel == 0) return numel == 0 ? 0 : 1;
  return numel / static_cast<size_t>(shape[0]);
}

CompressContext::CompressContext(uint64_t seed, int rank, int world_size)
    : seed_(seed), rank_(rank), world_size_(world_size) {
  FRUGAL_CHECK_GE(world_size, 1);
  FRUGAL_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " of ", world_size);
}

void CompressContext::Erase(std::string_view tensor_name) {
  std::erase_if(states_, [&](const auto& item) { return item.first.first == tensor_name; });
  std::erase_if(pending_, [&](const auto& item) { return item.first.first == tensor_name; });
}

// Saved as <tensor>/<slot>/numel plus the state's own fields; pending records go back as loaded.
void CompressContext::VisitState(StateVisitor& visitor) {
  if (visitor.loading()) {
    for (const std::string& tensor : visitor.Children()) {
      StateVisitor::Scope t(visitor, tensor);
      for (const std::string& slot : visitor.Children()) {
        StateVisitor::Scope s(visitor, slot);
        pending_[SlotKey(tensor, slot)] = visitor.TakeSubtree();
      }
    }
    return;
  }
  std::map<SlotKey, StateRecords> saved = pending_;
  for (auto& [key, entry] : states_) {
    StateSaver saver;
    entry.state->VisitState(saver);
    FRUGAL_INTERNAL_ASSERT(saver.ok(), saver.status().ToString());
    if (saver.records().empty()) continue;  // scratch
    uint64_t numel = entry.numel;
    saver.U64("numel", numel);
    FRUGAL_INTERNAL_ASSERT(saver.ok(), "state slot '", key.second, "' has a field named numel");
    saved[key] = std::move(saver.records());
  }
  for (const auto& [key, records] : saved) {
    StateVisitor::Scope t(visitor, key.first);
    StateVisitor::Scope s(visitor, key.second);
    visitor.PutSubtree(records);
  }
}

void CompressContext::RestorePending(const SlotKey& key, TensorState& state, size_t numel) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  const StateRecords records = std::move(it->second);
  pending_.erase(it);
  StateLoader loader(records);
  uint64_t saved_numel = 0;
  loader.U64("numel", saved_numel);
  FRUGAL_CHECK(loader.ok() && saved_numel == numel, "checkpoint state of tensor '", key.first,
               "' (slot '", key.second, "'): ",
               loader.ok() ? fmt::format("{} elements saved, the tensor has {}", saved_numel, numel)
                           : loader.status().message());
  state.VisitState(loader);
  const Status status = loader.Finish();
  FRUGAL_CHECK(status.ok(), "checkpoint state of tensor '", key.first, "' (slot '", key.second,
               "'): ", status.message());
}

std::string_view AggregationPathName(AggregationPath path) {
  switch (path) {
    case AggregationPath::kAuto:
      return "auto";
    case AggregationPath::kAllreduce:
      return "allreduce";
    case AggregationPath::kAllgather:
      return "allgather";
    case AggregationPath::kTwoPhase:
      return "twophase";
    case AggregationPath::kSignVote:
      return "vote";
    case AggregationPath::kCustom:
      return "custom";
  }
  return "?";
}

StatusOr<AggregationPath> ParseAggregationPath(std::string_view name) {
  for (AggregationPath p :
       {AggregationPath::kAuto, AggregationPath::kAllreduce, AggregationPath::kAllgather,
        AggregationPath::kTwoPhase, AggregationPath::kSignVote, AggregationPath::kCustom}) {
    if (AggregationPathName(p) == name) return p;
  }
  return InvalidArgumentError(
      fmt::format("unknown aggregation path '{}' (accepted: auto, allreduce, allgather, "
                  "twophase, vote, custom)",
                  name));
}

Status Compressor::DecodeOverwrite(std::span<const std::byte> payload, const TensorInfo& tensor,
                                   CompressContext& ctx, std::span<float> output) const {
  std::fill(output.begin(), output.end(), 0.0f);
  return Decode(payload, tensor, ctx, output);
}

namespace {
// The dense decode of DecodeScaled's default (slot kScaledDecodeSlot): scratch, visits nothing.
struct ScaledDecodeScratch : TensorState {
  std::vector<float> values;
};
constexpr std::string_view kScaledDecodeSlot = "decode.scaled";
}  // namespace

Status Compressor::DecodeScaled(std::span<const std::byte> payload, const TensorInfo& tensor,
                                CompressContext& ctx, float scale, std::span<float> output) const {
  if (scale == 1.0f) return Decode(payload, tensor, ctx, output);
  FRUGAL_CHECK_EQ(output.size(), tensor.numel, "buffer size vs. numel of tensor '", tensor.name,
                  "'");
  std::vector<float>& decoded = ctx.State<ScaledDecodeScratch>(tensor, kScaledDecodeSlot).values;
  decoded.resize(tensor.numel);
  FRUGAL_RETURN_IF_ERROR(DecodeOverwrite(payload, tensor, ctx, decoded));
  for (size_t e = 0; e < output.size(); ++e) output[e] += scale * decoded[e];
  return Status::Ok();
}

Status Compressor::Aggregate(Transport& t, std::span<float> data, std::span<float> residual,
                             const TensorInfo& tensor, CompressContext& ctx,
                             const AggregateOptions& options) const {
  return FailedPreconditionError(
      fmt::format("compressor {} has no aggregation of its own", spec()));
}

std::optional<uint64_t> Compressor::WireBits(const TensorInfo& tensor) const {
  std::optional<uint64_t> body = BodyBits(tensor);
  if (!body) return std::nullopt;
  return kWireHeaderBytes * 8 + *body;
}

}  // namespace frugal
