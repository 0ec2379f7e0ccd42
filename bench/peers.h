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

// Where Gloo's TCP pairs send and receive: kAsync leaves both to Gloo's I/O thread, which wakes
// the waiting thread (Gloo's default); kSync does both in the calling thread, blocking in the
// kernel; kBusyPoll does both in the calling thread, polling the socket. In kSync and kBusyPoll a
// send returns only once the kernel took the whole message, so two ranks that send each other
// more than their socket buffers hold wait for each other until the timeout (a 16 MiB ring
// all-reduce of 2 ranks can; a send that had moved part of its message waits for the socket
// timeout once more, so the error comes after up to twice the timeout); kAsync cannot block that
// way and is the default. kSync has one thread wake-up less per message and is the fastest for
// small messages on shared cores.
enum class GlooMode { kAsync, kSync, kBusyPoll };
StatusOr<GlooMode> ParseGlooMode(std::string_view name);  // async, sync, busypoll
std::string_view GlooModeName(GlooMode mode);

struct GlooPeerOptions {
  GlooAlgorithm algorithm = GlooAlgorithm::kRingChunked;
  GlooMode mode = GlooMode::kAsync;
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
// Every wait of the peer's Allreduce is bounded by options.timeout: a rank that stops taking part
// makes the others return kTimeout naming it ("no progress from rank 2 within 2000 ms"), a rank
// whose connection closes kPeerLost.
StatusOr<std::unique_ptr<AllreducePeer>> MakeGlooPeer(Transport& t, const GlooPeerOptions& options);

// The Status for an exception text of Gloo: the ranks r one of whose addresses
// (remote_addresses[r], as Gloo prints them) the text contains are named; an expired wait is
// kTimeout, a connection closed or reset by the other side kPeerLost, anything else kIoError.
Status DescribeGlooFailure(std::string_view what,
                           const std::vector<std::vector<std::string>>& remote_addresses,
                           Duration timeout);

}  // namespace frugal::bench
