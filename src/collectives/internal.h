// Internal helpers shared by the collective algorithms: reserved tags, waits that check sizes,
// the reduction kernels, chunked point-to-point exchanges and the per-algorithm entry points that
// Allreduce dispatches to. Not installed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::coll {

// Tags of frugal's collectives, in [kReservedTagBase, kMaxTag). kMaxTag itself is left to
// transports (the in-process transport's split exchange).
inline constexpr int kTagCheckLength = kReservedTagBase + 0;
inline constexpr int kTagBroadcast = kReservedTagBase + 1;
inline constexpr int kTagBarrier = kReservedTagBase + 2;
inline constexpr int kTagAllgather = kReservedTagBase + 3;
inline constexpr int kTagAllgathervSizes = kReservedTagBase + 4;
inline constexpr int kTagAllgatherv = kReservedTagBase + 5;
inline constexpr int kTagReduceScatter = kReservedTagBase + 6;
inline constexpr int kTagRingReduceScatter = kReservedTagBase + 7;
inline constexpr int kTagRingAllgather = kReservedTagBase + 8;
inline constexpr int kTagRecursiveDoubling = kReservedTagBase + 9;
inline constexpr int kTagRabenseifner = kReservedTagBase + 10;
inline constexpr int kTagTree = kReservedTagBase + 11;
inline constexpr int kTagDoubleTree0 = kReservedTagBase + 12;
inline constexpr int kTagDoubleTree1 = kReservedTagBase + 13;
inline constexpr int kTagHierReduce = kReservedTagBase + 14;
inline constexpr int kTagHierBroadcast = kReservedTagBase + 15;
inline constexpr int kTagTorusReduceScatter = kReservedTagBase + 16;
inline constexpr int kTagTorusAllgather = kReservedTagBase + 17;
inline constexpr int kTagDirect = kReservedTagBase + 18;

// Pipelining granularity of the collectives whose options have no segment size.
inline constexpr size_t kDefaultSegmentBytes = size_t{1} << 20;
// Receives a chunked exchange keeps posted ahead (scratch slots).
inline constexpr size_t kWindow = 4;

// Elements per segment for `segment_bytes` of floats; 0 means "no segmentation".
size_t SegmentElems(size_t segment_bytes);
// Bytes of `seg` floats, saturating (SIZE_MAX stays "no segmentation").
inline size_t SegmentBytesOf(size_t seg) {
  return seg > SIZE_MAX / sizeof(float) ? SIZE_MAX : seg * sizeof(float);
}
// Number of chunks of at most `seg` elements needed for `count` elements.
inline size_t ChunkCount(size_t count, size_t seg) {
  return count == 0 ? 0 : 1 + (count - 1) / seg;
}
// Chunk `i` of a buffer cut into chunks of exactly `seg` elements (the last one shorter).
inline Block FixedChunk(size_t count, size_t seg, size_t i) {
  const size_t offset = i * seg;
  return Block{offset, std::min(seg, count - offset)};
}
inline int Mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// dst[i] += src[i]; plain loop over non-aliasing pointers, vectorised (kernels.cc is always
// compiled with -O3).
void AddInto(float* __restrict dst, const float* __restrict src, size_t n);
// out[i] = a[i] + b[i] (the same bits as AddInto of b into a copy of a).
void AddTo(float* __restrict out, const float* __restrict a, const float* __restrict b, size_t n);
// dst[i] = (dst[i] + a[i]) + b[i] (the same bits as AddInto of a, then of b), in one pass.
void AddTwoInto(float* __restrict dst, const float* __restrict a, const float* __restrict b,
                size_t n);
// x[i] *= factor.
void ScaleInPlace(float* __restrict x, size_t n, float factor);
inline void ScaleForAverage(std::span<float> x, int ranks) {
  ScaleInPlace(x.data(), x.size(), 1.0f / static_cast<float>(ranks));
}

// Bytes the ring all-reduce of `count` floats over `size` ranks sends from `rank`: every block of
// the BlockPartition but block (rank+1) mod size in the reduce-scatter phase, every block but
// block (rank+2) mod size in the allgather phase (2 (size-1)/size of the buffer in all). The byte
// count of reducers whose messages frugal cannot observe (MPI_Allreduce, Gloo).
uint64_t RingModelBytes(size_t count, int size, int rank);

// Scratch floats reused by the steps of one collective call (uninitialised), in memory the
// transport shares with its operations (Transport::NewShared): receives land in it without a
// staging copy, and a receive given up keeps it alive for as long as the network may write it.
class Scratch {
 public:
  float* Get(Transport& t, size_t n) {
    if (n > size_) {
      memory_ = t.NewShared(n * sizeof(float));
      size_ = n;
    }
    return reinterpret_cast<float*>(memory_.bytes.data());
  }
  // Receives `count` floats from `src` into `at`, which lies in the memory of the last Get.
  std::unique_ptr<Work> Recv(Transport& t, int src, int tag, float* at, size_t count) {
    return t.IRecvShared(src, tag, memory_.owner,
                         std::as_writable_bytes(std::span<float>(at, count)));
  }

 private:
  SharedBytes memory_;
  size_t size_ = 0;
};

// Sends and receives of a collective on its caller's buffer: through ISend/IRecv (the MPI
// transport stages them) or, when the caller's buffer lies in memory shared with the transport
// (AllreduceOptions::data_owner), from and into it directly.
struct DataIo {
  std::shared_ptr<void> owner;  // null: the caller's own memory
  bool shared() const { return owner != nullptr; }
  std::unique_ptr<Work> Send(Transport& t, int dst, int tag, std::span<const std::byte> b) const {
    return owner ? t.ISendShared(dst, tag, owner, b) : t.ISend(dst, tag, b);
  }
  std::unique_ptr<Work> Recv(Transport& t, int src, int tag, std::span<std::byte> b) const {
    return owner ? t.IRecvShared(src, tag, owner, b) : t.IRecv(src, tag, b);
  }
};

// Floats to send from memory shared with the transport (Transport::NewShared): written by the
// caller, then sent with no staging copy by Send.
struct SharedFloats {
  SharedBytes memory;
  float* data() const { return reinterpret_cast<float*>(memory.bytes.data()); }
  size_t size() const { return memory.bytes.size() / sizeof(float); }
};
inline SharedFloats NewSharedFloats(Transport& t, size_t count) {
  return SharedFloats{t.NewShared(count * sizeof(float))};
}
inline std::unique_ptr<Work> SendShared(Transport& t, int dst, int tag, SharedFloats floats) {
  const std::span<const std::byte> bytes = floats.memory.bytes;
  return t.ISendShared(dst, tag, std::move(floats.memory.owner), bytes);
}

// Buffers read in place by peers on this machine (peer_buffers.cc).
// A buffer of floats where peers can map it: `values` is the caller's `data` itself when it lies in
// memory from Transport::NewShared (data_owner), otherwise a copy of it in such memory that `copy`
// keeps; `region` is where it lies (nothing when the transport could not place it).
struct ReadableBuffer {
  std::span<float> values;
  SharedBytes copy;
  std::optional<PeerRegion> region;
};
ReadableBuffer PlaceForPeers(Transport& t, std::span<float> data, bool data_owner);
// The message that tells a peer where a buffer lies (kDirectRegionBytes bytes); it also says that
// the buffer is ready to be read.
struct RegionMessage {
  uint64_t ok;  // 0: the sender could not place its buffer in memory its peers can map
  PeerRegion region;
};
RegionMessage RegionMessageOf(const std::optional<PeerRegion>& region);
// kFailedPrecondition: `rank` could not place `bytes` bytes where its peers can map them.
Status NoMemoryForPeers(int rank, size_t bytes);
// Maps the buffer `peer` described in `m`, which must hold `bytes` bytes (kMalformed otherwise).
StatusOr<const float*> MapRegionMessage(Transport& t, int peer, const RegionMessage& m,
                                        size_t bytes);

// Waits for a receive and checks that exactly `expected_bytes` arrived (kMalformed otherwise,
// naming the sender).
Status WaitRecv(Work& work, size_t expected_bytes, Duration timeout);
// Releases, in order from works[*next] up to works[end - 1], the Works that have completed (their
// memory returns to the transport), and stops at the first one still running; *next moves past
// those released. A failed Work returns its Status.
Status ReleaseCompleted(std::vector<std::unique_ptr<Work>>& works, size_t& next, size_t end,
                        Duration timeout);
// Waits for every non-null Work in order.
Status WaitAll(std::vector<std::unique_ptr<Work>>& works, Duration timeout);

std::span<const std::byte> FloatBytes(std::span<const float> s);
std::span<std::byte> FloatBytes(std::span<float> s);

// Sends `send` to `peer` while receiving `recv` (exactly its size) from `peer`, both cut into
// chunks of `seg_bytes`. Either may be empty. The regions must not overlap.
Status Exchange(Transport& t, int peer, int tag, std::span<const std::byte> send,
                std::span<std::byte> recv, size_t seg_bytes, Duration timeout,
                const DataIo& io = {});

// Sends `send` to `peer` while receiving inout.size() floats from `peer` and adding them into
// `inout`, chunk by chunk (chunks of `seg` elements, kWindow receives posted ahead into
// `scratch`). `send` may be empty, or may be exactly `inout` (recursive doubling): then a chunk is
// added to only after its own send has completed.
Status ExchangeReduce(Transport& t, int peer, int tag, std::span<const float> send,
                      std::span<float> inout, size_t seg, Duration timeout, Scratch& scratch,
                      const DataIo& io = {});

// Ring reduce-scatter over `blocks` (one per rank, disjoint): on return blocks[rank] of `data`
// holds the sum over all ranks. See reduce_scatter.cc.
Status RingReduceScatter(Transport& t, std::span<float> data, std::span<const Block> blocks,
                         int tag, size_t seg, Duration timeout, const DataIo& io = {});
// Ring allgather over `blocks` of bytes (one per rank, disjoint): on entry blocks[rank] of `data`
// holds this rank's part, on return every block holds its owner's part. See allgather.cc.
Status RingAllgather(Transport& t, std::span<std::byte> data, std::span<const Block> blocks,
                     int tag, size_t seg_bytes, Duration timeout, const DataIo& io = {});
// Pipelined binomial-tree broadcast. See broadcast.cc.
Status BinomialBroadcast(Transport& t, std::span<std::byte> data, int root, int tag,
                         size_t seg_bytes, Duration timeout);

std::vector<Block> BlockPartitionAll(size_t count, int parts);
// The `parts` blocks of a buffer of `count` elements: options.block_counts when set (checked
// against `parts` and `count`), BlockPartitionAll otherwise.
std::vector<Block> BlocksOf(size_t count, int parts, const AllreduceOptions& options);
std::vector<Block> ToBytes(std::span<const Block> blocks, size_t element_size);

// The sub-transports that hierarchical and 2D-torus all-reduces split off a transport, kept as
// the transport's "collectives" attachment so that every layout is split once, not once per call.
// See split_cache.cc.
class SplitCache : public Transport::Attachment {
 public:
  struct Entry {
    std::vector<int> host;                           // hierarchical: host of every rank
    std::vector<std::unique_ptr<Transport>> groups;  // in the order the algorithm split them
  };
  // The entry stored under `key`, or nullptr.
  Entry* Find(const std::string& key);
  Entry& Insert(const std::string& key, Entry entry);
  size_t size() const { return entries_.size(); }

 private:
  std::map<std::string, Entry> entries_;
};
// The cache attached to `t`, created on first use.
SplitCache& SplitCacheOf(Transport& t);

// "ranks 4, 5, 6" — how a group is named in error messages.
std::string DescribeRanks(std::span<const int> ranks);

// The all-reduce algorithms. Preconditions (ensured by Allreduce): t.size() > 1, !data.empty(),
// lengths already checked if asked.
Status RingAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options);
Status RecursiveDoublingAllreduce(Transport& t, std::span<float> data,
                                  const AllreduceOptions& options);
Status RabenseifnerAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options);
Status BinaryTreeAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options);
Status DoubleBinaryTreeAllreduce(Transport& t, std::span<float> data,
                                 const AllreduceOptions& options);
Status HierarchicalAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options);
Status Torus2DAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options);
Status DirectAllreduce(Transport& t, std::span<float> data, const AllreduceOptions& options);

// Options for an all-reduce nested in hierarchical or torus: a plain sum with the inner
// algorithm, no length check (already done), and ring as the next level's inner algorithm.
AllreduceOptions InnerOptions(const AllreduceOptions& options);

// The number of rows the 2D torus uses for n ranks: `requested` if > 0, else the divisor of n
// closest to sqrt(n) (the smaller one on a tie).
int TorusRows(int n, int requested);

}  // namespace frugal::coll
