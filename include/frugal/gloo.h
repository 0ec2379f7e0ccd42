// Gloo's all-reduce algorithms (ring-chunked, halving-doubling) over Gloo's own TCP pairs, set up
// through a frugal Transport. The peer frugal's own algorithms are compared with, in the
// benchmarks and in training (MakeDenseReducer's "gloo" algorithms, reducer.h).
//
// Thread safety: a GlooContext and the all-reduces made from it are used by one thread at a time.
// Gloo's I/O thread (GlooMode::kAsync) is Gloo's own and never calls back into frugal.
// Lifetime: an all-reduce keeps its context alive; the buffer it was made for must outlive it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

enum class GlooAlgorithm { kRingChunked, kHalvingDoubling };
// "ring_chunked", "halving_doubling"; kInvalidArgument otherwise.
StatusOr<GlooAlgorithm> ParseGlooAlgorithm(std::string_view name);
std::string_view GlooAlgorithmName(GlooAlgorithm algorithm);

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

// Whether this build of frugal has Gloo (CMake option FRUGAL_WITH_GLOO).
bool GlooAvailable();

struct GlooContextOptions {
  GlooMode mode = GlooMode::kAsync;
  // Directory in which rank 0 creates the FileStore rendezvous directory (must be shared by all
  // hosts of the job); empty: the system's temporary directory.
  std::string store_dir;
  // Network interface for Gloo's TCP transport; empty: loopback when every rank is on one host,
  // else the address the host name resolves to.
  std::string iface;
  // Bounds the set-up and every wait of the all-reduces.
  Duration timeout = kDefaultTimeout;
};

// One all-reduce (sum over the ranks, in place) bound to the buffer it was made for.
class GlooAllreduce {
 public:
  virtual ~GlooAllreduce() = default;
  // Collective. A rank that stops taking part makes the others return kTimeout naming it ("no
  // progress from rank 2 within 2000 ms"), a rank whose connection closes kPeerLost. After an
  // error the all-reduce is not to be run again.
  virtual Status Run() = 0;
};

class GlooContext {
 public:
  virtual ~GlooContext() = default;

  // Connects a Gloo context of t.size() ranks (collective over `t`): rank 0 creates a fresh
  // directory for gloo::rendezvous::FileStore and broadcasts its path, every rank connects a full
  // mesh through it, and rank 0 removes the directory once all ranks are connected (or on
  // failure). kFailedPrecondition in a build without Gloo; kIoError when the rendezvous fails.
  static StatusOr<std::unique_ptr<GlooContext>> Connect(Transport& t,
                                                        const GlooContextOptions& options);

  // Collective: every rank makes the same all-reduces in the same order (Gloo numbers their
  // messages by the order of creation), with buffers of the same length (at most INT_MAX floats).
  virtual StatusOr<std::unique_ptr<GlooAllreduce>> MakeAllreduce(GlooAlgorithm algorithm,
                                                                 std::span<float> data) = 0;
};

// The Status for an exception text of Gloo: the ranks r one of whose addresses
// (remote_addresses[r], as Gloo prints them) the text contains are named; an expired wait is
// kTimeout, a connection closed or reset by the other side kPeerLost, anything else kIoError.
Status DescribeGlooFailure(std::string_view what,
                           const std::vector<std::vector<std::string>>& remote_addresses,
                           Duration timeout);

}  // namespace frugal
