// Names of the all-reduce algorithms, the block partition shared by the ring-style algorithms, and
// the Allreduce entry point: it checks lengths (when asked) with CheckSameLength, handles the
// trivial cases (one rank, empty buffer) and dispatches to the algorithm's own file.
#include "frugal/collectives.h"

#include <fmt/format.h>

#include "collectives/internal.h"

namespace frugal {

std::string_view AllreduceAlgorithmName(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kRecursiveDoubling:
      return "rd";
    case AllreduceAlgorithm::kRabenseifner:
      return "rabenseifner";
    case AllreduceAlgorithm::kBinaryTree:
      return "tree";
    case AllreduceAlgorithm::kDoubleBinaryTree:
      return "dbtree";
    case AllreduceAlgorithm::kHierarchical:
      return "hier";
    case AllreduceAlgorithm::kTorus2D:
      return "torus";
    case AllreduceAlgorithm::kDirect:
      return "direct";
  }
  return "unknown";
}

std::vector<AllreduceAlgorithm> AllAllreduceAlgorithms() {
  return {AllreduceAlgorithm::kRing,
          AllreduceAlgorithm::kRecursiveDoubling,
          AllreduceAlgorithm::kRabenseifner,
          AllreduceAlgorithm::kBinaryTree,
          AllreduceAlgorithm::kDoubleBinaryTree,
          AllreduceAlgorithm::kHierarchical,
          AllreduceAlgorithm::kTorus2D,
          AllreduceAlgorithm::kDirect};
}

StatusOr<AllreduceAlgorithm> ParseAllreduceAlgorithm(std::string_view name) {
  std::string accepted;
  for (AllreduceAlgorithm a : AllAllreduceAlgorithms()) {
    if (AllreduceAlgorithmName(a) == name) return a;
    if (!accepted.empty()) accepted += ", ";
    accepted += AllreduceAlgorithmName(a);
  }
  return InvalidArgumentError(
      fmt::format("unknown allreduce algorithm '{}' (accepted: {})", name, accepted));
}

size_t DefaultSegmentBytes(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kDirect:  // a piece to sum stays in the cache (allreduce_direct.cc)
      return size_t{256} << 10;
    case AllreduceAlgorithm::kRing:
    case AllreduceAlgorithm::kRecursiveDoubling:
    case AllreduceAlgorithm::kRabenseifner:
    case AllreduceAlgorithm::kBinaryTree:
    case AllreduceAlgorithm::kDoubleBinaryTree:
    case AllreduceAlgorithm::kHierarchical:
    case AllreduceAlgorithm::kTorus2D:
      break;
  }
  return size_t{512} << 10;
}

size_t SegmentBytes(const AllreduceOptions& options) {
  return options.segment_bytes.value_or(DefaultSegmentBytes(options.algorithm));
}

Block BlockPartition(size_t count, int parts, int index) {
  FRUGAL_CHECK_GT(parts, 0);
  FRUGAL_CHECK(index >= 0 && index < parts, "block ", index, " of ", parts);
  const size_t p = static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  const size_t base = count / p;
  const size_t extra = count % p;
  return Block{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

Status Allreduce(Transport& t, std::span<float> data, const AllreduceOptions& options) {
  const std::string what = fmt::format("{} allreduce", AllreduceAlgorithmName(options.algorithm));
  if (options.check_lengths) {
    FRUGAL_RETURN_IF_ERROR(CheckSameLength(t, data.size(), what, options.timeout));
  }
  if (t.size() == 1 || data.empty()) return Status::Ok();
  Status status;
  switch (options.algorithm) {
    case AllreduceAlgorithm::kRing:
      status = coll::RingAllreduce(t, data, options);
      break;
    case AllreduceAlgorithm::kRecursiveDoubling:
      status = coll::RecursiveDoublingAllreduce(t, data, options);
      break;
    case AllreduceAlgorithm::kRabenseifner:
      status = coll::RabenseifnerAllreduce(t, data, options);
      break;
    case AllreduceAlgorithm::kBinaryTree:
      status = coll::BinaryTreeAllreduce(t, data, options);
      break;
    case AllreduceAlgorithm::kDoubleBinaryTree:
      status = coll::DoubleBinaryTreeAllreduce(t, data, options);
      break;
    case AllreduceAlgorithm::kHierarchical:
      status = coll::HierarchicalAllreduce(t, data, options);
      break;
    case AllreduceAlgorithm::kTorus2D:
      status = coll::Torus2DAllreduce(t, data, options);
      break;
    case AllreduceAlgorithm::kDirect:
      status = coll::DirectAllreduce(t, data, options);
      break;
    default:
      return InvalidArgumentError(
          fmt::format("unknown allreduce algorithm {}", static_cast<int>(options.algorithm)));
  }
  return status.Annotate(what);
}

}  // namespace frugal
