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
// algorithm is told these block sizes (AllreduceOptions::block_counts). A part that is a piece
// of a tensor (the engine's priority partitions) takes its share of each of its whole tensor's
// blocks, so a tensor reduced piece by piece ends with the bits of its reduction in one piece.
// Nothing is padded: the bytes on the wire are those of the plain all-reduce of the same length;
// only the per-rank split moves by the rounding of each tensor's blocks. rd and tree add every
// element along the same chain, so they reduce the buffer as it is; hierarchical and torus
// partition twice, which one layout cannot follow, and are reduced as they are too.
#include <algorithm>
#include <cstring>

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

std::vector<FusedPart> WholeTensors(std::span<const size_t> counts) {
  std::vector<FusedPart> parts;
  parts.reserve(counts.size());
  for (const size_t count : counts) parts.push_back(FusedPart{count, 0, count});
  return parts;
}

namespace {

// Part `p`'s share of block `b` of its whole tensor's partition, as a block of the part.
Block PieceOf(const FusedPart& p, int blocks, int b) {
  const Block block = BlockPartition(p.whole, blocks, b);
  const size_t begin = std::max(block.offset, p.offset);
  const size_t end = std::min(block.offset + block.count, p.offset + p.count);
  return end > begin ? Block{begin - p.offset, end - begin} : Block{0, 0};
}

}  // namespace

std::vector<size_t> FusedBlockCounts(std::span<const FusedPart> parts, int blocks) {
  std::vector<size_t> sizes(static_cast<size_t>(blocks), 0);
  for (int b = 0; b < blocks; ++b) {
    for (const FusedPart& part : parts) {
      sizes[static_cast<size_t>(b)] += PieceOf(part, blocks, b).count;
    }
  }
  return sizes;
}

void ForEachFusedPiece(std::span<const FusedPart> parts, int blocks,
                       const std::function<void(size_t, size_t, size_t, size_t)>& fn) {
  size_t to = 0;
  for (int b = 0; b < blocks; ++b) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const Block piece = PieceOf(parts[i], blocks, b);
      if (piece.count > 0) fn(i, piece.offset, to, piece.count);
      to += piece.count;
    }
  }
}

Status AllreduceFused(Transport& t, std::span<float> data, std::span<const size_t> counts,
                      const AllreduceOptions& options, SharedBytes* scratch) {
  return AllreduceFused(t, data, WholeTensors(counts), options, scratch);
}

Status AllreduceFused(Transport& t, std::span<float> data, std::span<const FusedPart> parts,
                      const AllreduceOptions& options, SharedBytes* scratch) {
  // No part: `data` is one tensor. Otherwise the parts lie one after the other.
  if (parts.empty()) return Allreduce(t, data, options);
  std::vector<size_t> starts;
  size_t total = 0;
  for (const FusedPart& part : parts) {
    starts.push_back(total);
    total += part.count;
  }
  FRUGAL_CHECK_EQ(total, data.size(), "sum of the fused parts' counts");
  return AllreduceFused(t, data, parts, starts, options, scratch);
}

Status AllreduceFused(Transport& t, std::span<float> data, std::span<const FusedPart> parts,
                      std::span<const size_t> starts, const AllreduceOptions& options,
                      SharedBytes* scratch) {
  FRUGAL_CHECK_EQ(starts.size(), parts.size(), "starts of the fused parts");
  size_t total = 0;
  bool in_order = true;  // the parts fill `data` one after the other
  for (size_t i = 0; i < parts.size(); ++i) {
    FRUGAL_CHECK_LE(parts[i].offset + parts[i].count, parts[i].whole, "fused part");
    FRUGAL_CHECK_LE(starts[i] + parts[i].count, data.size(), "fused part");
    in_order = in_order && starts[i] == total;
    total += parts[i].count;
  }
  in_order = in_order && total == data.size();
  if (total == 0) return Status::Ok();
  const int blocks = t.size() == 1 ? 1 : FusedBlocks(options.algorithm, t.size());
  const bool whole_alone = parts.size() == 1 && parts[0].count == parts[0].whole;
  AllreduceOptions own = options;
  if (blocks > 1 && !whole_alone) own.block_counts = FusedBlockCounts(parts, blocks);
  // In place where `data` is the layout already: whole tensors one after the other under an
  // algorithm that adds every element in the same order, or one part, whose pieces lie in the
  // order of the layout.
  if (in_order && (blocks == 1 || parts.size() == 1)) return Allreduce(t, data, own);

  // Gathered block by block (with one block: the parts one after the other) and scattered back.
  std::vector<float> local;
  std::span<float> buffer;
  if (scratch != nullptr) {
    if (scratch->bytes.size() < total * sizeof(float))
      *scratch = t.NewShared(total * sizeof(float));
    buffer = std::span<float>(reinterpret_cast<float*>(scratch->bytes.data()), total);
    own.data_owner = scratch->owner;
  } else {
    local.resize(total);
    buffer = local;
    own.data_owner = nullptr;
  }
  ForEachFusedPiece(parts, blocks, [&](size_t i, size_t from, size_t to, size_t count) {
    std::memcpy(buffer.data() + to, data.data() + starts[i] + from, count * sizeof(float));
  });
  Status status = Allreduce(t, buffer, own);
  if (!status.ok()) {
    // The network may still write the memory of a failed reduction: it is not used again.
    if (scratch != nullptr) *scratch = {};
    return status;
  }
  ForEachFusedPiece(parts, blocks, [&](size_t i, size_t from, size_t to, size_t count) {
    std::memcpy(data.data() + starts[i] + from, buffer.data() + to, count * sizeof(float));
  });
  return Status::Ok();
}

}  // namespace frugal
