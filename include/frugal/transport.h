// Transport: how ranks exchange bytes. Collectives, the parameter server and gossip are written
// over this interface only.
//
// Semantics (those of MPI point-to-point):
//  - Messages from one source to one destination with one tag arrive in the order they were sent
//    (non-overtaking). Receives posted for the same (source, tag) match in the order posted.
//  - ISend/IRecv never block. The buffer must stay valid and untouched until the returned Work has
//    completed. A receive buffer may be larger than the message; Work::bytes() tells the size that
//    arrived. A message larger than the receive buffer completes the Work with kMalformed.
//  - A receive with source kAnySource matches a message from any rank; Work::peer() tells which.
//  - Tags are in [0, kMaxTag]. Every layer of frugal takes its tags from one range of the registry
//    below (TagRange); tags below kUserTagEnd are free for programs and benchmarks.
//
// Thread safety: one thread owns a Transport (and all Work it made) at a time. frugal's engine
// gives that role to its communication thread; nothing else calls the transport after start-up.
// Errors: waits return kTimeout naming the peer(s) that did not answer, kPeerLost when a peer is
// known to be gone (the in-process transport's dead ranks; Open MPI 4.1 reports no failed peers,
// see mpi_transport.h), kMalformed when a message does not fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frugal/status.h"
#include "frugal/work.h"

namespace frugal {

inline constexpr int kAnySource = -1;
inline constexpr int kMaxTag = 32767;  // the smallest MPI_TAG_UB the MPI standard allows

// The registry of message-tag ranges: [begin, end) per layer. No layer picks numbers outside its
// range; a layer that needs more grows its range here. Ranges do not overlap (checked below).
struct TagRange {
  int begin;
  int end;
  constexpr int operator[](int i) const { return begin + i; }  // the i-th tag of the range
  constexpr int size() const { return end - begin; }
};
inline constexpr int kUserTagEnd = 20000;                        // programs, benchmarks, tests
inline constexpr TagRange kStrategyTags{20000, 21000};           // training strategies
inline constexpr TagRange kParameterServerTags{21000, 23000};    // parameter server
inline constexpr TagRange kGossipTags{23000, 25000};             // decentralized training
inline constexpr TagRange kEngineTags{29700, 29800};             // engine negotiation
inline constexpr TagRange kCompressTags{29800, 29900};           // compressed aggregation
inline constexpr TagRange kCollectiveTags{30000, 30100};         // collectives
inline constexpr TagRange kTransportTags{kMaxTag, kMaxTag + 1};  // Transport::Split
// The tag of Split's exchange of (color, key) pairs.
inline constexpr int kSplitTag = kTransportTags[0];
// Kept for the collectives' own numbering: their tags are kReservedTagBase + i.
inline constexpr int kReservedTagBase = kCollectiveTags.begin;

namespace tag_registry_internal {
inline constexpr TagRange kAll[] = {{0, kUserTagEnd}, kStrategyTags, kParameterServerTags,
                                    kGossipTags,      kEngineTags,   kCompressTags,
                                    kCollectiveTags,  kTransportTags};
constexpr bool Disjoint() {
  for (size_t i = 0; i + 1 < std::size(kAll); ++i) {
    if (kAll[i].end > kAll[i + 1].begin || kAll[i].begin >= kAll[i].end) return false;
  }
  return kAll[std::size(kAll) - 1].end <= kMaxTag + 1;
}
static_assert(Disjoint(), "tag ranges overlap or are out of order");
}  // namespace tag_registry_internal

// Memory an operation may keep for as long as the network can still touch it: `owner` keeps alive
// the memory that `bytes` lies in. Made by Transport::NewShared, given to ISendShared/IRecvShared.
struct SharedBytes {
  std::shared_ptr<void> owner;
  std::span<std::byte> bytes;
};

// Where a piece of memory from Transport::NewShared lies, in the terms a peer on the same machine
// maps it by (Transport::MapPeerRegion). `segment` and `generation` name the block of memory
// (transport-defined), `offset` and `bytes` the piece within it.
struct PeerRegion {
  uint64_t segment = 0;
  uint64_t generation = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct ProbeResult {
  int source = -1;
  int tag = -1;
  size_t bytes = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Name of the host this rank runs on (ranks that share it share memory). Used by hierarchical
  // algorithms to find hosts. The in-process transport may be told to fake several hosts.
  virtual std::string hostname() const = 0;

  virtual std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) = 0;
  virtual std::unique_ptr<Work> IRecv(int src, int tag, std::span<std::byte> data) = 0;

  // Sends and receives on memory the operation shares with its caller: the Work holds `owner`
  // until the operation has completed or, if it was given up (timed out, destroyed unfinished),
  // until the transport no longer touches `data`, which must lie in memory `owner` keeps alive.
  // So a transport that copies ISend/IRecv buffers to keep the caller's memory safe from a late
  // peer (the MPI transport) can hand `data` to the network as it is. The caller must not write
  // (send) or read (receive) `data` before the Work has completed; after a failed Wait it must not
  // use `data` again. Same matching rules as ISend/IRecv, with which they mix freely. The defaults
  // call ISend/IRecv and keep `owner` until the Work is destroyed.
  virtual std::unique_ptr<Work> ISendShared(int dst, int tag, std::shared_ptr<const void> owner,
                                            std::span<const std::byte> data);
  virtual std::unique_ptr<Work> IRecvShared(int src, int tag, std::shared_ptr<void> owner,
                                            std::span<std::byte> data);
  // `bytes` bytes (uninitialised) suited to ISendShared/IRecvShared. The MPI transport reuses the
  // buffers of a pool (pages already faulted in); the default allocates.
  virtual SharedBytes NewShared(size_t bytes);

  // Direct access to the memory of peers on the same machine, for collectives that read their
  // peers' buffers instead of messaging them (AllreduceAlgorithm::kDirect).
  // SharesMemoryWithPeers: every rank of this transport can map memory of every other rank, the
  // same answer on every rank (the MPI transport decides it collectively when it is made: one
  // kernel, one network namespace, and a probe block each rank could map; the in-process
  // transport when all its ranks are on one host). The default: false.
  virtual bool SharesMemoryWithPeers() const { return false; }
  // Whether the ranks running on this machine (of the whole job, not only of this transport's
  // group) have at least a core each, so a rank's copies and sums do not wait for another rank's
  // turn on a core. The MPI transport counts ranks by the kernel's boot id and cores by their
  // affinity masks when it is made; the in-process transport counts its threads against the
  // machine's cores. The default: false (unknown).
  virtual bool CoreForEachRank() const { return false; }
  // Where `bytes`, which must lie in one block from this transport's NewShared, can be mapped by a
  // peer; nothing when it is not such memory (the default).
  virtual std::optional<PeerRegion> RegionOf(std::span<const std::byte> bytes) const;
  // The memory of a region `peer` gave (its RegionOf), mapped for reading. The pointer stays valid
  // while this transport lives, until `peer`'s same segment is mapped again with another
  // generation. kPeerLost when the peer's memory cannot be reached any more; the default:
  // kFailedPrecondition.
  virtual StatusOr<const std::byte*> MapPeerRegion(int peer, const PeerRegion& region);

  // Blocks until a message matching (src, tag) is available (src may be kAnySource) without
  // receiving it. kTimeout when nothing arrives within `timeout`.
  virtual StatusOr<ProbeResult> Probe(int src, int tag, Duration timeout) = 0;

  // Non-blocking probe: a result if a matching message is available now, nothing if none is, or
  // an error: kPeerLost when `src` is known to be gone, or the transport's own failure.
  virtual StatusOr<std::optional<ProbeResult>> IProbe(int src, int tag) = 0;

  // Collective over this transport: ranks with the same `color` form a new group, ordered by
  // (key, rank). Every rank must call it. The child shares nothing with the parent's messages and
  // may be used by the same thread that owns the parent.
  virtual StatusOr<std::unique_ptr<Transport>> Split(int color, int key, Duration timeout) = 0;

  // Payload bytes this rank has sent through this transport and the transports split from it,
  // counted where they are sent.
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t messages_sent() const = 0;

  // Attachments: state that a layer above keeps with this transport, found by a key naming the
  // layer (the collectives keep the sub-transports that hierarchical and 2D-torus all-reduces
  // split off under "collectives", so that they split once per layout, not once per call).
  // Owned by the transport and destroyed with it, after the implementation's own members; used
  // under the transport's thread rules. SetAttachment replaces an attachment with the same key
  // and returns the stored one (`attachment` must not be null); FindAttachment returns nullptr
  // when there is none.
  class Attachment {
   public:
    virtual ~Attachment() = default;
  };
  Attachment* FindAttachment(std::string_view key) const {
    for (const auto& [k, a] : attachments_) {
      if (k == key) return a.get();
    }
    return nullptr;
  }
  Attachment& SetAttachment(std::string key, std::unique_ptr<Attachment> attachment) {
    for (auto& [k, a] : attachments_) {
      if (k == key) return *(a = std::move(attachment));
    }
    return *attachments_.emplace_back(std::move(key), std::move(attachment)).second;
  }

 private:
  std::vector<std::pair<std::string, std::unique_ptr<Attachment>>> attachments_;
};

// Blocking helpers: start the operation and wait for it.
Status Send(Transport& t, int dst, int tag, std::span<const std::byte> data, Duration timeout);
Status Recv(Transport& t, int src, int tag, std::span<std::byte> data, Duration timeout);

// Sends `out` to `dst` while receiving into `in` from `src` (either may be empty with peer -1).
// Fails with kMalformed if the received size differs from in.size().
Status SendRecv(Transport& t, int dst, std::span<const std::byte> out, int src,
                std::span<std::byte> in, int tag, Duration timeout);

// Views a span of trivially copyable values as bytes.
template <typename T>
std::span<const std::byte> AsBytes(std::span<const T> s) {
  return std::as_bytes(s);
}
template <typename T>
std::span<std::byte> AsWritableBytes(std::span<T> s) {
  return std::as_writable_bytes(s);
}

}  // namespace frugal
