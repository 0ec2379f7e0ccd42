// Model averaging (see model_average.h).
#include "strategy/model_average.h"

#include <algorithm>
#include <cstring>

#include "frugal/check.h"
#include "frugal/collectives.h"

namespace frugal::strategy_internal {

void Pack(std::span<const NamedBuffer> buffers, std::vector<float>& flat) {
  size_t total = 0;
  for (const NamedBuffer& b : buffers) total += b.data.size();
  flat.resize(total);
  size_t offset = 0;
  for (const NamedBuffer& b : buffers) {
    std::copy(b.data.begin(), b.data.end(), flat.begin() + static_cast<long>(offset));
    offset += b.data.size();
  }
}

void Unpack(std::span<const float> flat, std::span<const NamedBuffer> buffers) {
  size_t offset = 0;
  for (const NamedBuffer& b : buffers) {
    std::copy(flat.begin() + static_cast<long>(offset),
              flat.begin() + static_cast<long>(offset + b.data.size()), b.data.begin());
    offset += b.data.size();
  }
}

namespace {

BucketInfo BucketOf(std::string name, std::span<const NamedBuffer> buffers, uint64_t step) {
  BucketInfo bucket;
  bucket.name = std::move(name);
  bucket.step = step;
  for (const NamedBuffer& b : buffers) {
    bucket.entries.push_back({b.name, bucket.count, b.data.size(), {}});
    bucket.count += b.data.size();
  }
  return bucket;
}

}  // namespace

std::vector<NamedBuffer> AveragedBuffers(const ModelBuffers& model, AverageParts parts,
                                         bool parameters) {
  std::vector<NamedBuffer> out;
  if (parameters) out = model.parameters;
  if (parts.buffers) out.insert(out.end(), model.buffers.begin(), model.buffers.end());
  if (parts.momenta) out.insert(out.end(), model.momenta.begin(), model.momenta.end());
  return out;
}

Status AverageExactly(Transport& t, std::span<const NamedBuffer> buffers, Duration timeout) {
  if (t.size() == 1) return Status::Ok();
  std::vector<float> flat;
  Pack(buffers, flat);
  if (flat.empty()) return Status::Ok();
  AllreduceOptions options;
  options.op = ReduceOp::kAverage;
  options.timeout = timeout;
  FRUGAL_RETURN_IF_ERROR(Allreduce(t, std::span<float>(flat), options));
  Unpack(flat, buffers);
  return Status::Ok();
}

Status ModelAverager::Average(Transport& t, uint64_t step, ModelBuffers& model, AverageParts parts,
                              Duration timeout) {
  return deltas_ ? AverageDeltas(t, step, model, parts, timeout) : AverageDense(step, model, parts);
}

Status ModelAverager::AverageDense(uint64_t step, ModelBuffers& model, AverageParts parts) {
  const std::vector<NamedBuffer> all = AveragedBuffers(model, parts, /*parameters=*/true);
  Pack(all, flat_);
  if (flat_.empty()) return Status::Ok();
  const BucketInfo bucket = BucketOf("model", all, step);
  FRUGAL_RETURN_IF_ERROR(reducer_.Reduce(bucket, flat_));
  Unpack(flat_, all);
  return Status::Ok();
}

Status ModelAverager::AverageDeltas(Transport& t, uint64_t step, ModelBuffers& model,
                                    AverageParts parts, Duration timeout) {
  Pack(model.parameters, flat_);
  FRUGAL_INTERNAL_ASSERT(anchor_.size() == flat_.size(), "model averaged before SetAnchor");
  for (size_t i = 0; i < flat_.size(); ++i) flat_[i] -= anchor_[i];
  const BucketInfo bucket = BucketOf("model-delta", model.parameters, step);
  FRUGAL_RETURN_IF_ERROR(reducer_.Reduce(bucket, flat_));
  for (size_t i = 0; i < flat_.size(); ++i) anchor_[i] += flat_[i];
  Unpack(anchor_, model.parameters);
  const std::vector<NamedBuffer> rest = AveragedBuffers(model, parts, /*parameters=*/false);
  return AverageExactly(t, rest, timeout);
}

void ModelAverager::SetAnchor(const ModelBuffers& model) {
  if (deltas_) Pack(model.parameters, anchor_);
}

void ModelAverager::VisitState(
    const std::function<void(std::string_view, std::span<float>)>& visit) {
  if (deltas_) visit("anchor", anchor_);
}

}  // namespace frugal::strategy_internal
