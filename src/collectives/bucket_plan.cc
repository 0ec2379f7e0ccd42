// Bucket formation and the cross-rank check of the resulting plan.
//
// PlanBuckets walks `tensors` in the order given and appends each one to the current bucket
// while the bucket's float data stays within `cap_bytes`; when a tensor does not fit, the
// current bucket is closed and a new one starts with that tensor (so a tensor larger than the
// cap sits alone in its bucket). Offsets are in elements from the start of the bucket. The
// result depends only on the input, so ranks that build the same model agree on it.
//
// VerifySamePlan hashes the plan with FNV-1a over every bucket's id and count and every entry's
// name, offset and count (PlanFingerprint), gathers the 8-byte fingerprints of all ranks with
// Allgatherv and compares them with rank 0's. Every rank sees the same gathered bytes, so every
// rank reaches the same verdict and returns the same error naming the ranks that differ.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/reducer.h"

namespace frugal {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ULL;
constexpr uint64_t kFnvPrime = 1099511628211ULL;

void HashBytes(uint64_t& h, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
}

void HashU64(uint64_t& h, uint64_t v) { HashBytes(h, &v, sizeof(v)); }

}  // namespace

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
    current.entries.push_back(BucketEntry{tensor.name, current.count, tensor.count});
    current.count += tensor.count;
  }
  close();
  return plan;
}

uint64_t PlanFingerprint(std::span<const BucketInfo> plan) {
  uint64_t h = kFnvOffset;
  HashU64(h, plan.size());
  for (const BucketInfo& bucket : plan) {
    HashU64(h, static_cast<uint64_t>(bucket.id));
    HashU64(h, bucket.count);
    HashU64(h, bucket.entries.size());
    for (const BucketEntry& entry : bucket.entries) {
      HashU64(h, entry.name.size());
      HashBytes(h, entry.name.data(), entry.name.size());
      HashU64(h, entry.offset);
      HashU64(h, entry.count);
    }
  }
  return h;
}

Status VerifySamePlan(Transport& t, std::span<const BucketInfo> plan, Duration timeout) {
  const uint64_t mine = PlanFingerprint(plan);
  std::byte in[sizeof(mine)];
  std::memcpy(in, &mine, sizeof(mine));
  std::vector<std::byte> out;
  std::vector<size_t> sizes;
  CollectiveOptions options;
  options.timeout = timeout;
  FRUGAL_RETURN_IF_ERROR(
      Allgatherv(t, in, out, sizes, options).Annotate("gradient bucket plan check"));
  if (sizes.size() != static_cast<size_t>(t.size()) ||
      out.size() != sizeof(mine) * static_cast<size_t>(t.size())) {
    return MalformedError("gradient bucket plan check: unexpected gathered size " +
                          std::to_string(out.size()));
  }
  std::vector<uint64_t> all(static_cast<size_t>(t.size()));
  std::memcpy(all.data(), out.data(), out.size());
  std::string differing;
  for (int r = 1; r < t.size(); ++r) {
    if (all[static_cast<size_t>(r)] != all[0]) {
      differing += (differing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (!differing.empty()) {
    return InvalidArgumentError("the gradient tensors (names, shapes or order) of rank(s) " +
                                differing +
                                " differ from rank 0's; every rank must train the same model");
  }
  return Status::Ok();
}

}  // namespace frugal
