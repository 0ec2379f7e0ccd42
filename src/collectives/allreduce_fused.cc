// The all-reduce of a fused buffer whose results do not depend on the fusion (AllreduceFused) and
// the block by block layout it rests on.
//
// A float sum depends on the order of its additions, and the algorithms that cut the buffer into
// blocks add each block along its own chain of ranks (ring: the chain ending on the block's
// owner; direct: the owner's values, then the others' in rank order; rabenseifner: the pairs of
// its halvings; dbtree: the tree of the half). An element's bits thus depend on the block it falls
// in, which for a tensor in a fused buffer depends on the tensors before and after it. Laid out
// block by block, every element falls in the block it would fall in were its tensor reduced
// alone: block b of the fused buffer is block b of the first tensor's own partition
// (BlockPartition(count, blocks, b)), then block b of the second tensor's, and so on, and the
// algorithm is told these block sizes (AllreduceOptions::block_counts). Nothing is padded: the
// bytes on the wire are those of the plain all-reduce of the same length; only the per-rank split
// moves by the rounding of each tensor's blocks. rd and tree add every element along the same
// chain, so they reduce the buffer as it is; hierarchical and torus partition twice, which one
// layout cannot follow, and are reduced as they are too.
#include <cstring>
#include <numeric>

#include "collectives/internal.h"

namespace frugal {

int FusedBlocks(AllreduceAlgorithm algorithm, int ranks) {
  switch (algorithm) {
    case AllreduceAlgorithm::kRing:
    case AllreduceAlgorithm::kDirect:
      return ranks;
    case AllreduceAlgorithm::kRabenseifner: {
      int p = 1;
      while (p * 2 <= ranks) p *= 2;
      return p;
    }
    case AllreduceAlgorithm::kDoubleBinaryTree:
      return 2;
    default:
      return 1;
  }
}

std::vector<size_t> FusedBlockCounts(std::span<const size_t> counts, int blocks) {
  std::vector<size_t> sizes(static_cast<size_t>(blocks), 0);
  for (int b = 0; b < blocks; ++b) {
    for (const size_t count : counts) {
      sizes[static_cast<size_t>(b)] += BlockPartition(count, blocks, b).count;
    }
  }
  return sizes;
}

void ForEachFusedPiece(std::span<const size_t> counts, int blocks,
                       const std::function<void(size_t, size_t, size_t, size_t)>& fn) {
  size_t to = 0;
  for (int b = 0; b < blocks; ++b) {
    for (size_t i = 0; i < counts.size(); ++i) {
      const Block piece = BlockPartition(counts[i], blocks, b);
      if (piece.count > 0) fn(i, piece.offset, to, piece.count);
      to += piece.count;
    }
  }
}

Status AllreduceFused(Transport& t, std::span<float> data, std::span<const size_t> counts,
                      const AllreduceOptions& options, SharedBytes* scratch) {
  const int blocks = FusedBlocks(options.algorithm, t.size());
  if (t.size() == 1 || counts.size() <= 1 || blocks == 1) return Allreduce(t, data, options);
  FRUGAL_CHECK_EQ(std::accumulate(counts.begin(), counts.end(), size_t{0}), data.size(),
                  "sum of the fused tensors' counts");
  std::vector<size_t> starts(counts.size(), 0);  // of each tensor in `data`
  for (size_t i = 1; i < counts.size(); ++i) starts[i] = starts[i - 1] + counts[i - 1];

  AllreduceOptions own = options;
  own.block_counts = FusedBlockCounts(counts, blocks);
  std::vector<float> local;
  std::span<float> buffer;
  if (scratch != nullptr) {
    if (scratch->bytes.size() < data.size_bytes()) *scratch = t.NewShared(data.size_bytes());
    buffer = std::span<float>(reinterpret_cast<float*>(scratch->bytes.data()), data.size());
    own.data_owner = scratch->owner;
  } else {
    local.resize(data.size());
    buffer = local;
    own.data_owner = nullptr;
  }
  ForEachFusedPiece(counts, blocks, [&](size_t i, size_t from, size_t to, size_t count) {
    std::memcpy(buffer.data() + to, data.data() + starts[i] + from, count * sizeof(float));
  });
  Status status = Allreduce(t, buffer, own);
  if (!status.ok()) {
    // The network may still write the memory of a failed reduction: it is not used again.
    if (scratch != nullptr) *scratch = {};
    return status;
  }
  ForEachFusedPiece(counts, blocks, [&](size_t i, size_t from, size_t to, size_t count) {
    std::memcpy(data.data() + starts[i] + from, buffer.data() + to, count * sizeof(float));
  });
  return Status::Ok();
}

}  // namespace frugal
