// Peers that frugal's all-reduce algorithms are measured against in the same run:
// MPI_Allreduce of the MPI library that moves frugal's own bytes, and Gloo's ring-chunked or
// halving-doubling all-reduce over Gloo's TCP transport. These live in bench/ only: they are
// yardsticks, not part of the library.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal::bench {

class AllreducePeer {
 public:
  virtual ~AllreducePeer() = default;
  virtual std::string name() const = 0;
  // In-place sum over all ranks. Collective: every rank calls it with the same length.
  virtual Status Allreduce(std::span<float> data) = 0;
};

// MPI_Allreduce(MPI_IN_PLACE, ..., MPI_FLOAT, MPI_SUM) on a duplicate of MPI_COMM_WORLD. MPI has
// no timeout for a blocking collective; the benchmark passes a timed Barrier over `t` before
// every call, so all ranks are known to be there. Precondition: MPI is initialised (MpiRuntime)
// and `t` spans MPI_COMM_WORLD.
StatusOr<std::unique_ptr<AllreducePeer>> MakeMpiPeer(Transport& t, Duration timeout);

// Ping-pong over raw MPI: MPI_Isend/MPI_Irecv on a duplicate of MPI_COMM_WORLD, completed by
// polling MPI_Test without any back-off, bounded by the timeout. The baseline that the
// transport's own round trips are compared with. Collective (like MakeMpiPeer).
class PingPongPeer {
 public:
  virtual ~PingPongPeer() = default;
  virtual std::string name() const = 0;
  // One round trip with `peer`: the initiator sends `message` and receives it back, the other
  // side receives it and sends it back.
  virtual Status RoundTrip(int peer, std::span<std::byte> message, bool initiator,
                           Duration timeout) = 0;
};
StatusOr<std::unique_ptr<PingPongPeer>> MakeMpiPingPongPeer(Transport& t, Duration timeout);

enum class GlooAlgorithm { kRingChunked, kHalvingDoubling };
StatusOr<GlooAlgorithm> ParseGlooAlgorithm(
    std::string_view name);  // ring_chunked, halving_doubling

// How Gloo's TCP pairs wait for data: kAsync leaves it to Gloo's I/O thread, which wakes the
// waiting thread (Gloo's default); kSync receives in the calling thread, blocking in the kernel;
// kBusyPoll receives in the calling thread, polling. On 2 shared cores kSync is the fastest by
// far (one thread wake-up less per message, no polling thread competing with the ranks).
enum class GlooMode { kAsync, kSync, kBusyPoll };
StatusOr<GlooMode> ParseGlooMode(std::string_view name);  // async, sync, busypoll

struct GlooPeerOptions {
  GlooAlgorithm algorithm = GlooAlgorithm::kRingChunked;
  GlooMode mode = GlooMode::kSync;
  // Directory in which rank 0 creates the FileStore rendezvous directory (must be shared by all
  // hosts of the job); empty: the system's temporary directory.
  std::string store_dir;
  // Network interface for Gloo's TCP transport; empty: loopback when every rank is on one host,
  // else the address the host name resolves to.
  std::string iface;
  Duration timeout = kDefaultTimeout;
};

// Connects a Gloo context of t.size() ranks (collective over `t`): rank 0 creates a fresh
// directory for gloo::rendezvous::FileStore and broadcasts its path, every rank connects a full
// mesh through it, and rank 0 removes the directory once all ranks are connected (or on failure).
StatusOr<std::unique_ptr<AllreducePeer>> MakeGlooPeer(Transport& t, const GlooPeerOptions& options);

}  // namespace frugal::bench
