// Peers that frugal's all-reduce algorithms are measured against in the same run:
// MPI_Allreduce of the MPI library that moves frugal's own bytes, and Gloo's ring-chunked or
// halving-doubling all-reduce over Gloo's TCP transport. These live in bench/ only: they are
// yardsticks, not part of the library.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/gloo.h"
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

// Gloo's all-reduce (frugal/gloo.h) as a peer.
struct GlooPeerOptions : GlooContextOptions {
  GlooAlgorithm algorithm = GlooAlgorithm::kRingChunked;
};

// Connects a Gloo context (GlooContext::Connect) and runs Gloo's all-reduce on the buffer it is
// given, in place; the all-reduce is made again whenever the buffer changes.
StatusOr<std::unique_ptr<AllreducePeer>> MakeGlooPeer(Transport& t, const GlooPeerOptions& options);

}  // namespace frugal::bench
