// Large messages between ranks that map each other's memory: the MPI transport's peer copy.
// Internal to src/transport/mpi.
//
// Open MPI moves a large message between two processes of one machine with cross-memory attach
// (process_vm_readv), which reads ~4.6 GB/s on the reference machine against ~14 GB/s for memcpy
// (docs/performance.md). When every rank of a transport can map every other's memory
// (PeerMaps::all_mapped) and the job lets MPI use shared memory (AllowedByJob), a message of at
// least kPeerCopyBytes travels as a descriptor instead:
//  - the sender's bytes lie in one of its mappable blocks (NewShared memory as it is, anything
//    else copied into one, which is the staging copy ISend makes anyway); MPI carries a message of
//    exactly Descriptor::kBytes naming that region and a sequence number, with the message's own
//    (destination, tag), so the order of messages is MPI's;
//  - the receive that MPI matches with it gets Descriptor::kBytes bytes; the receiver copies the
//    region from its mapping of the sender's block straight into the caller's buffer (no staging)
//    and acknowledges on a communicator of the channel's own, with the sequence number as the tag;
//  - the send completes on that acknowledgement, so the sender's memory stays untouched until the
//    copy is done, and a send given up keeps its memory until the acknowledgement comes (the
//    runtime's keeper holds the acknowledgement's receive).
// The marker is unambiguous: on such a transport every message of exactly Descriptor::kBytes bytes
// travels as a descriptor, whatever its size class, so a receive that gets exactly that many bytes
// always holds one. Probe reports the size the descriptor names: a probe that finds a descriptor
// receives it (MPI_Improbe, MPI_Mrecv) and keeps it in the channel's stash, where the next
// matching receive takes it before anything MPI still holds (it was sent first).
//
// Progress: MPI moves a message while either side is inside any MPI call; a descriptor is copied
// only by its receiver. So every receive that may get a descriptor is registered with the channel,
// and every wait on the transport (a Work's poll, a probe) completes the registered receives whose
// descriptors have arrived (Progress, at most every 20 us and a quarter of the wait's time).
// Otherwise two ranks that each wait for their own send before testing their receive would wait
// for each other.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frugal/status.h"
#include "frugal/timer.h"
#include "frugal/transport.h"
#include "transport/mpi/peer_memory.h"

namespace frugal::mpi_internal {

class AbandonedRequests;

// The smallest message sent as a descriptor (besides those of exactly Descriptor::kBytes).
inline constexpr size_t kPeerCopyBytes = size_t{64} << 10;

// The in-band message: a sequence number and the region of the sender's memory.
struct Descriptor {
  static constexpr size_t kBytes = 44;  // 4 (magic) + 8 (sequence) + 4 x 8 (region)
  uint64_t sequence = 0;
  PeerRegion region;
  std::array<std::byte, kBytes> Encode() const;
  // Nothing when `bytes` is not a descriptor made by Encode.
  static std::optional<Descriptor> Decode(std::span<const std::byte> bytes);
};

// Whether the job lets MPI use shared memory between processes: not when Open MPI's BTL
// selection (OMPI_MCA_btl, where `mpirun --mca btl` puts it) names transports without vader, or
// excludes vader. A job run over TCP alone keeps its messages on TCP.
bool AllowedByJob();

// Something the channel completes while waits go on elsewhere (a receive that may get a
// descriptor).
class Progressable {
 public:
  virtual bool IsCompleted() = 0;

 protected:
  ~Progressable() = default;
};

// The peer copy of one transport. Used by its owning thread only.
class PeerCopy {
 public:
  // Collective over `comm`: active when `maps` lets every rank map every other's memory and the
  // job allows it on every rank. Makes the acknowledgements' communicator (a duplicate of
  // `comm`). `names[r]` names rank r in errors.
  static std::shared_ptr<PeerCopy> Make(MPI_Comm comm, std::unique_ptr<PeerMaps> maps,
                                        std::vector<std::string> names,
                                        std::shared_ptr<AbandonedRequests> keeper);
  ~PeerCopy();
  PeerCopy(const PeerCopy&) = delete;
  PeerCopy& operator=(const PeerCopy&) = delete;

  PeerMaps& maps() { return *maps_; }
  bool active() const { return active_; }
  // A message of `bytes` bytes travels as a descriptor.
  bool Carries(size_t bytes) const {
    return active_ && (bytes >= kPeerCopyBytes || bytes == Descriptor::kBytes);
  }

  // Sender: starts the receive of the acknowledgement of a descriptor for `region`, sent to `dst`,
  // and returns the descriptor to send.
  StatusOr<Descriptor> ExpectAcknowledgement(int dst, const PeerRegion& region, MPI_Request* ack);

  // Receiver: `message` (Descriptor::kBytes bytes from `source`) arrived. Copies the region it
  // names into `into` and acknowledges it (also when the copy fails, so the sender completes).
  // Sets *bytes to the size the descriptor names. kMalformed when it is not a descriptor or does
  // not fit `into`.
  Status Deliver(int source, std::span<const std::byte> message, std::span<std::byte> into,
                 size_t* bytes, const std::string& what);

  // Probes: a descriptor taken from MPI ahead of its receive.
  struct Stashed {
    int source = -1;
    int tag = -1;
    size_t bytes = 0;  // the size the descriptor names (kBytes when it is malformed)
    std::array<std::byte, Descriptor::kBytes> message{};
  };
  const Stashed& Stash(int source, int tag,
                       const std::array<std::byte, Descriptor::kBytes>& message);
  const Stashed* FindStashed(int src, int tag) const;  // src may be kAnySource
  std::optional<Stashed> TakeStashed(int src, int tag);
  // A descriptor whose receive was given up: acknowledged without being read.
  void Discard(const Stashed& arrived);

  // Receives that may get a descriptor, completed by Progress.
  void Register(Progressable* receive);
  void Unregister(Progressable* receive);
  void Progress();

 private:
  PeerCopy() = default;
  void Acknowledge(int source, uint64_t sequence);
  // The first stashed descriptor from `src` (or any source) with `tag`, or stash_.end().
  std::deque<Stashed>::const_iterator FirstStashed(int src, int tag) const;

  MPI_Comm ack_comm_ = MPI_COMM_NULL;
  std::unique_ptr<PeerMaps> maps_;
  std::vector<std::string> names_;
  std::shared_ptr<AbandonedRequests> keeper_;
  bool active_ = false;
  int ack_tags_ = 1;                     // acknowledgement tags are sequence numbers modulo this
  std::vector<uint64_t> next_sequence_;  // per destination
  std::deque<Stashed> stash_;
  std::vector<Progressable*> receives_;
  bool progressing_ = false;
  Clock::time_point next_progress_{};
};

}  // namespace frugal::mpi_internal
