// Collective operations over a Transport: broadcast, barrier, allgather(v), reduce-scatter and
// the all-reduce family of the literature, on float32 buffers, in place.
//
// Contract common to all of them:
//  - Every rank of the transport calls the same collective, in the same order, with the same
//    options and (where it says so) the same length. A rank whose length differs from its peers'
//    makes the call fail with kInvalidArgument on every rank when `check_lengths` is on (the
//    default; it costs one small all-reduce of the lengths before the operation), and with
//    kMalformed on at least the ranks that receive a wrongly sized message when it is off.
//  - Blocking: the call returns when this rank's part is done. Every wait inside is bounded by
//    `timeout`; on expiry the call returns kTimeout naming the peers that did not answer.
//  - The result is the same on every rank for all-reduce (all algorithms reduce in an order that
//    is fixed by the algorithm, not by message timing), so runs are repeatable bit for bit.
//  - Called by the thread that owns the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

enum class ReduceOp { kSum, kAverage };

enum class AllreduceAlgorithm {
  kRing,               // reduce-scatter + allgather around a ring, chunked and pipelined
  kRecursiveDoubling,  // log2(n) exchanges of the whole buffer
  kRabenseifner,       // recursive halving reduce-scatter + recursive doubling allgather
  kBinaryTree,         // reduce to the root along a binary tree, broadcast back; pipelined
  kDoubleBinaryTree,   // two complementary trees, each carrying half of the buffer (NCCL 2.4)
  kHierarchical,       // intra-host reduce, inter-host allreduce, intra-host broadcast
  kTorus2D,            // horizontal reduce-scatter, vertical allreduce, horizontal allgather
  kDirect,             // one machine: each rank reduces its block reading its peers' buffers
};

// The direct all-reduce's messages: one of this many bytes from every rank to every other (where
// its buffer lies), then two empty ones (phase done). See allreduce_direct.cc.
inline constexpr size_t kDirectRegionBytes = 40;
// What every refusal of the direct all-reduce says it needs (after naming it).
inline constexpr std::string_view kDirectNeedsOneMachine =
    "needs every rank on one machine, able to map each other's memory (not across hosts, emulated "
    "ones included)";

// Short names used on the command line: ring, rd, rabenseifner, tree, dbtree, hier, torus, direct.
std::string_view AllreduceAlgorithmName(AllreduceAlgorithm algorithm);
StatusOr<AllreduceAlgorithm> ParseAllreduceAlgorithm(std::string_view name);
std::vector<AllreduceAlgorithm> AllAllreduceAlgorithms();

struct CollectiveOptions {
  Duration timeout = kDefaultTimeout;
  bool check_lengths = true;
};

struct AllreduceOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  ReduceOp op = ReduceOp::kSum;
  Duration timeout = kDefaultTimeout;
  bool check_lengths = true;
  // Pipelining granularity of every algorithm (bytes per segment); 0 means "no segmentation".
  // Unset: the algorithm's own default, DefaultSegmentBytes(algorithm).
  std::optional<size_t> segment_bytes{};
  // Hierarchical: ranks per host; 0 groups ranks by Transport::hostname().
  int ranks_per_host = 0;
  // 2D torus: number of rows; 0 picks the factorisation of n closest to a square.
  int torus_rows = 0;
  // Hierarchical and torus: algorithm used across hosts / along columns.
  AllreduceAlgorithm inner_algorithm = AllreduceAlgorithm::kRing;
  // Set when `data` lies in memory the transport may share (Transport::NewShared): the owner of
  // that memory. The algorithms then send from and receive into `data` itself, and the transport
  // keeps the memory alive instead of copying (the MPI transport's staging copies are skipped).
  // After a failed call a peer that answers late may still write `data` until the transport
  // has released it. Null (the default): `data` is the caller's own memory.
  std::shared_ptr<void> data_owner;
  // Where the algorithms that cut the buffer into blocks put the boundaries: the sizes of the
  // blocks, summing to the buffer's length, as many as the algorithm has blocks (ring and direct:
  // one per rank; rabenseifner: the largest power of two <= the number of ranks; dbtree: 2).
  // Empty (the default): BlockPartition. AllreduceFused sets them; the other algorithms ignore
  // them.
  std::vector<size_t> block_counts;
};

Status Allreduce(Transport& t, std::span<float> data, const AllreduceOptions& options);

// One part of a fused buffer: elements [offset, offset + count) of a tensor of `whole` elements;
// a whole tensor when offset is 0 and whole == count (WholeTensors), a piece of one otherwise
// (the engine's priority partitions).
struct FusedPart {
  size_t count = 0;
  size_t offset = 0;
  size_t whole = 0;
};
std::vector<FusedPart> WholeTensors(std::span<const size_t> counts);

// All-reduce of a fused buffer: `data` holds `parts` one after the other (their counts sum to
// data.size(); none or one whole tensor: a plain Allreduce). Each part ends with the same bits as
// it has in an Allreduce of its whole tensor alone with the same options, whichever parts it is
// fused with and wherever it lies in `data`: for ring, direct, rabenseifner and dbtree, whose
// order of additions is fixed by a block partition of the buffer, the parts are laid out in a
// scratch buffer block by block (ForEachFusedPiece), reduced there with those blocks
// (AllreduceOptions::block_counts) and copied back (one part alone is reduced in place with its
// blocks: its layout is the buffer as it is); rd and tree add every element in the same order and
// reduce `data` as it is. So a run's gradients do not depend on which tensors an overlap policy
// happened to fuse, nor on whether it cut a tensor into pieces. The bytes on the wire are those of
// an Allreduce of `data`. `scratch`, when given, is kept from call to call (memory from
// Transport::NewShared: sends skip the staging copies); otherwise the scratch is allocated per
// call. Hierarchical and torus partition twice and reduce `data` as it is: their results depend on
// the fusion. Collective. A caller that gathers the parts anyway (the engine) gathers them block
// by block itself and calls Allreduce with FusedBlockCounts, which saves the two copies.
Status AllreduceFused(Transport& t, std::span<float> data, std::span<const FusedPart> parts,
                      const AllreduceOptions& options, SharedBytes* scratch = nullptr);
// The same for whole tensors of `counts` elements.
Status AllreduceFused(Transport& t, std::span<float> data, std::span<const size_t> counts,
                      const AllreduceOptions& options, SharedBytes* scratch = nullptr);
// The same for parts that lie anywhere in `data`: part i at starts[i] (not overlapping); the
// elements outside the parts are left as they are. The parts are gathered from their places into
// the layout and scattered back (the compressing reducer's small entries, between its large ones).
Status AllreduceFused(Transport& t, std::span<float> data, std::span<const FusedPart> parts,
                      std::span<const size_t> starts, const AllreduceOptions& options,
                      SharedBytes* scratch = nullptr);

// The blocks whose index fixes the order of additions of `algorithm` on `ranks` ranks: ranks for
// ring and direct, the largest power of two <= ranks for rabenseifner, 2 for dbtree; 1 for the
// others (the same order for every element, or one AllreduceFused cannot follow).
int FusedBlocks(AllreduceAlgorithm algorithm, int ranks);
// The block by block layout of `parts` in `blocks` blocks: block b holds, part after part, each
// part's share of block b of its whole tensor's own partition (BlockPartition(whole, blocks, b)
// cut to the part's elements). FusedBlockCounts gives the sizes of the blocks
// (AllreduceOptions::block_counts); ForEachFusedPiece calls fn(part index, offset in the part,
// offset in the fused buffer, count) for every non-empty piece, in the order of the fused buffer.
// With one block the layout is the parts one after the other.
std::vector<size_t> FusedBlockCounts(std::span<const FusedPart> parts, int blocks);
void ForEachFusedPiece(std::span<const FusedPart> parts, int blocks,
                       const std::function<void(size_t, size_t, size_t, size_t)>& fn);

// The segment an algorithm uses when AllreduceOptions::segment_bytes is unset, chosen from
// measurements over shared memory (docs/performance.md, "Large messages on one machine: the peer
// copy"): 512 KiB, the direct all-reduce's pieces 256 KiB. None exceeds 1 MiB, so a segment stays
// within the MPI transport's TCP eager limit (mpi_transport.h).
size_t DefaultSegmentBytes(AllreduceAlgorithm algorithm);
// options.segment_bytes if set, DefaultSegmentBytes(options.algorithm) otherwise.
size_t SegmentBytes(const AllreduceOptions& options);

// The host of every rank of `t`, numbered by the lowest rank on each host: with
// ranks_per_host = k > 0 rank r is on host r / k (emulated hosts); with 0, ranks whose
// Transport::hostname() is equal share a host (collective: the names are gathered, bounded by
// `timeout`). The hierarchical all-reduce and hierarchical Local SGD find hosts this way.
StatusOr<std::vector<int>> HostOfEachRank(Transport& t, int ranks_per_host, Duration timeout);

// Copies `data` of `root` to every rank. Lengths must agree.
Status Broadcast(Transport& t, std::span<std::byte> data, int root,
                 const CollectiveOptions& options);
Status Broadcast(Transport& t, std::span<float> data, int root, const CollectiveOptions& options);

// Returns when every rank has entered the barrier.
Status Barrier(Transport& t, const CollectiveOptions& options);

// `out` receives every rank's `in` in rank order; out.size() == in.size() * size().
Status Allgather(Transport& t, std::span<const float> in, std::span<float> out,
                 const CollectiveOptions& options);

// Variable sizes: every rank contributes `in` (any length, possibly 0). On return `out` holds the
// contributions in rank order and `sizes[r]` the byte count rank r contributed.
Status Allgatherv(Transport& t, std::span<const std::byte> in, std::vector<std::byte>& out,
                  std::vector<size_t>& sizes, const CollectiveOptions& options);

// In place: `data` has the same length on every rank, split into size() blocks by
// BlockPartition. On return, block rank() of `data` holds the reduction of that block over all
// ranks; the other blocks hold unspecified partial values.
Status ReduceScatter(Transport& t, std::span<float> data, ReduceOp op,
                     const CollectiveOptions& options);

// How a buffer of `count` elements is split into `parts` contiguous blocks: the first
// count % parts blocks get one element more. Used by reduce-scatter, ring and Rabenseifner.
struct Block {
  size_t offset = 0;
  size_t count = 0;
};
Block BlockPartition(size_t count, int parts, int index);

// Checks that every rank passes the same `count`; kInvalidArgument on every rank naming the
// smallest and largest count otherwise. This is what `check_lengths` runs.
Status CheckSameLength(Transport& t, uint64_t count, std::string_view what, Duration timeout);

}  // namespace frugal
