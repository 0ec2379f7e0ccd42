#include "frugal/compressor.h"

#include <fmt/format.h>

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
  for (auto it = states_.begin(); it != states_.end();) {
    if (it->first.first == tensor_name) {
      it = states_.erase(it);
    } else {
      ++it;
    }
  }
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
