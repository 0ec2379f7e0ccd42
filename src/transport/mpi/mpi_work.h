// The pieces of the MPI transport's Work: the poll back-off, staging buffers, the runtime's keeper
// of abandoned operations, and MpiWork itself. Internal to src/transport/mpi.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frugal/timer.h"
#include "transport/mpi/mpi_request.h"
#include "transport/mpi/peer_copy.h"
#include "transport/mpi/peer_memory.h"

namespace frugal::mpi_internal {

// How long a wait polls before it starts to yield the core, and until when it yields before it
// starts to sleep between polls (see BackOff).
struct WaitPolicy {
  Clock::duration spin = std::chrono::milliseconds(5);
  Clock::duration yield = std::chrono::milliseconds(5);
};

// The policy of a rank whose machine runs `ranks` ranks on `cores` cores (0: unknown) and which
// may run on `own_cores` of them itself (its affinity mask; 0: unknown).
WaitPolicy WaitPolicyFor(int ranks, int cores, int own_cores);

// Sleeps or yields between polls according to how long the caller has waited already.
void BackOff(const WaitPolicy& policy, Clock::duration waited);

// Byte buffers that MPI reads and writes instead of the callers' own buffers. Acquire returns
// a buffer of at least `bytes` bytes (uninitialised); when its last reference goes, it returns to
// the pool, which keeps a bounded number of bytes for reuse (so steady traffic does not allocate
// and fault in fresh pages for every message). Thread safe.
// A mappable pool (the memory of Transport::NewShared) makes every buffer of at least a page as a
// block peers on the machine can map (MappableBlocks, peer_memory.h); RegionOf finds them.
class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  explicit StagingPool(bool mappable = false);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  std::shared_ptr<std::byte> Acquire(size_t bytes);
  size_t cached_bytes() const;
  // Where `bytes` lies for a peer, if inside a mappable buffer of this pool.
  std::optional<PeerRegion> RegionOf(std::span<const std::byte> bytes) const;

 private:
  static constexpr int kClasses = 27;  // capacities 2^0 .. 2^26 (64 MiB); larger ones unpooled
  std::byte* Allocate(size_t capacity);
  void Free(std::byte* data);
  void Release(std::byte* data, int size_class);

  mutable std::mutex mu_;
  std::array<std::vector<std::byte*>, kClasses> free_;
  size_t cached_bytes_ = 0;
  std::shared_ptr<MappableBlocks> blocks_;  // null: not mappable; shared with the deleters
  friend struct StagingDeleter;
};

// Operations whose owners gave up on them, with the memory they use, until MPI completes them.
// Owned by MpiRuntime (and shared with its transports); Finalize() runs just before MPI_Finalize
// and the memory is released only after it. Thread safe.
class AbandonedRequests {
 public:
  ~AbandonedRequests();
  // Takes `request` (receives are cancelled first where MPI can) and keeps `memory` with it.
  void Add(MPI_Request request, bool cancel, Memory memory);
  // Tests every request once, releases those MPI has completed; returns how many remain.
  size_t Reap();
  // Before MPI_Finalize: reaps for up to `grace`, then frees the requests that remain (their
  // memory stays until this object is destroyed, after MPI_Finalize).
  void Finalize(Duration grace);

 private:
  struct Entry {
    MPI_Request request;
    Memory memory;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
  std::vector<Memory> after_finalize_;
};

// A datatype and count describing `bytes` contiguous bytes: (MPI_BYTE, bytes) up to INT_MAX,
// otherwise a committed derived type that the caller frees.
struct ByteType {
  MPI_Datatype type = MPI_BYTE;
  int count = 0;
  bool derived = false;
};
StatusOr<ByteType> MakeByteType(size_t bytes);

// Bytes received, from the status of a receive made with `type`.
size_t ElementsOf(const MPI_Status& status, MPI_Datatype type);

// kMalformed for `what` (a receive) whose message did not fit its buffer of `capacity` bytes.
Status TooLargeForBuffer(std::string_view what, size_t capacity);

// What a started MpiWork needs to know.
struct Started {
  MPI_Request request = MPI_REQUEST_NULL;
  ByteType type;                    // freed by the Work when derived
  Memory memory;                    // owned by the operation until it completes
  std::span<std::byte> landing;     // receives: the buffer MPI writes (staging or the caller's)
  std::span<std::byte> deliver_to;  // staged receives: the caller's buffer, filled at completion
  // The transport's peer copy (peer_copy.h), when it is active: receives may get a descriptor and
  // are registered for progress; every wait makes progress.
  std::shared_ptr<PeerCopy> peer_copy;
  MPI_Request ack = MPI_REQUEST_NULL;        // sends as a descriptor: the acknowledgement's receive
  std::optional<PeerCopy::Stashed> stashed;  // receives: a descriptor a probe took already
  size_t capacity = 0;                       // receives: the size of the buffer MPI writes
  bool is_recv = false;
  int peer = -1;
  size_t bytes = 0;  // sends: the size sent
  // Sends and receives: the tag and the peer's name ("rank 1"), for messages made on an error.
  int tag = -1;
  std::string peer_name;
  // Other operations (WorkForRequest): their name, and the text of kTimeout.
  std::string what;
  std::function<std::string(Duration)> timeout_message;
};

class MpiWork : public Work, public Progressable {
 public:
  // A Work that already failed when it was started.
  MpiWork(Status status, int peer);
  MpiWork(Started started, WaitPolicy policy, std::shared_ptr<AbandonedRequests> abandoned);
  ~MpiWork() override;
  MpiWork(const MpiWork&) = delete;
  MpiWork& operator=(const MpiWork&) = delete;

  Status Wait(Duration timeout) override;
  bool IsCompleted() override;
  int peer() const override { return peer_; }
  size_t bytes() const override { return bytes_; }

 private:
  // The receive completed with `received` bytes from `source` in op_.landing (or op_.stashed).
  void Received(int source, size_t received);
  void Finish();             // the request completed: deliver, release memory and type
  void Abandon();            // hand the unfinished request and its memory to the runtime
  std::string What() const;  // "receive from rank 1 (tag 5)"

  Started op_;
  WaitPolicy policy_;
  std::shared_ptr<AbandonedRequests> abandoned_;
  bool done_ = false;
  Status status_;
  int peer_ = -1;
  size_t bytes_ = 0;
};

}  // namespace frugal::mpi_internal
