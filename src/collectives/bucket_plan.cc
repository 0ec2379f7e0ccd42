// Bucket formation and the cross-rank check of the resulting plan.
//
// PlanBuckets walks `tensors` in the order given and appends each one to the current bucket
// while the bucket's float data stays within `cap_bytes`; when a tensor does not fit, the
// current bucket is closed and a new one starts with that tensor (so a tensor larger than the
// cap sits alone in its bucket); each entry keeps its tensor's shape. Offsets are in elements
// from the start of the bucket. The result depends only on the input, so ranks that build the
// same model agree on it.
//
// VerifySamePlan hashes the plan with FNV-1a over every bucket's id and count and every entry's
// name, offset and count (PlanFingerprint) and compares the fingerprints of all ranks with rank
// 0's (RanksDifferingFromRankZero): every rank reaches the same verdict and returns the same
// error naming the ranks that differ.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/fingerprint.h"
#include "frugal/hash.h"
#include "frugal/reducer.h"

namespace frugal {

FusedPart FusedPartOf(const BucketEntry& entry) {
  return entry.tensor_count == 0 ? FusedPart{entry.count, 0, entry.count}
                                 : FusedPart{entry.count, entry.tensor_offset, entry.tensor_count};
}

std::vector<FusedPart> FusedPartsOf(std::span<const BucketEntry> entries) {
  std::vector<FusedPart> parts;
  parts.reserve(entries.size());
  for (const BucketEntry& entry : entries) parts.push_back(FusedPartOf(entry));
  return parts;
}

std::vector<BucketInfo> PlanBuckets(std::span<const TensorSpec> tensors, size_t cap_bytes) {
  FRUGAL_CHECK_GT(cap_bytes, size_t{0}, "bucket cap");
  std::vector<BucketInfo> plan;
  BucketInfo current;
  auto close = [&]() {
    if (current.entries.empty()) return;
    current.id = static_cast<int>(plan.size());
    current.name = "bucket" + std::to_string(current.id);
    plan.push_back(std::move(current));
    current = BucketInfo();
  };
  for (const TensorSpec& tensor : tensors) {
    if (tensor.count == 0) continue;
    const size_t bytes = tensor.count * sizeof(float);
    if (!current.entries.empty() && (current.count * sizeof(float) + bytes) > cap_bytes) close();
    current.entries.push_back(BucketEntry{tensor.name, current.count, tensor.count, tensor.shape});
    current.count += tensor.count;
  }
  close();
  return plan;
}

uint64_t PlanFingerprint(std::span<const BucketInfo> plan) {
  Fnv1a h;
  h.AddU64(plan.size());
  for (const BucketInfo& bucket : plan) {
    h.AddU64(static_cast<uint64_t>(bucket.id)).AddU64(bucket.count).AddU64(bucket.entries.size());
    for (const BucketEntry& entry : bucket.entries) {
      h.AddU64(entry.name.size()).Add(entry.name).AddU64(entry.offset).AddU64(entry.count);
    }
  }
  return h.value();
}

Status VerifySamePlan(Transport& t, std::span<const BucketInfo> plan, Duration timeout) {
  CollectiveOptions options;
  options.timeout = timeout;
  auto gathered = RanksDifferingFromRankZero(t, PlanFingerprint(plan), options);
  if (!gathered.ok()) return gathered.status().Annotate("gradient bucket plan check");
  std::string differing;
  for (int r : *gathered) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  if (!differing.empty()) {
    return InvalidArgumentError("the gradient tensors (names, shapes or order) of rank(s) " +
                                differing +
                                " differ from rank 0's; every rank must train the same model");
  }
  return Status::Ok();
}

}  // namespace frugal
