// MPI transport: the real engine. Open MPI starts the ranks (mpirun), moves the bytes (shared
// memory on a host, TCP between hosts) and frugal's algorithms run over its point-to-point calls.
//
// MpiRuntime initialises MPI once per process with MPI_THREAD_SERIALIZED (Open MPI 4.1 has no
// asynchronous progress: one thread at a time owns the transport and drives it) and finalises it
// when destroyed. Waits poll MPI_Test until done or the timeout; on expiry they return kTimeout
// naming the peer. After a timeout the job cannot continue safely: call Abort().
// Sends and receives run on buffers of the transport's own (the message is copied in at ISend and
// out when a receive completes), so an operation whose Wait timed out, or whose Work was
// destroyed unfinished, never touches the caller's buffer again: the runtime keeps it and its
// buffer until MPI completes it or the runtime finalises MPI.
// Peers that fail: Open MPI 4.1 reports no error for them (mpirun ends the job when a rank dies;
// with --enable-recovery the operations with the dead rank stay pending), so this transport
// returns kTimeout naming the peer, never kPeerLost.
// Split bounds its wait for the other ranks by its timeout (they exchange (color, key) first),
// then calls MPI_Comm_split, which MPI cannot bound: a rank that dies between the two steps can
// still block the others there. Messages longer than INT_MAX bytes are sent as one MPI message.
//
// Memory of ranks on one machine: NewShared's blocks are memfds that the other ranks of the same
// kernel and network namespace map read-only (SharesMemoryWithPeers, RegionOf, MapPeerRegion;
// src/transport/mpi/peer_memory.h), for the direct all-reduce. Making a transport (World, Split)
// decides collectively whether every rank can map every other's. Where they can and the job lets
// Open MPI use shared memory (its BTL selection includes vader), a message of 64 KiB or more moves
// as a descriptor of the sender's mapped memory, which the receiver copies from at memcpy speed
// (src/transport/mpi/peer_copy.h): one copy where Open MPI's cross-memory attach is ~3x slower and
// the staged operations add one on each side. The semantics stay MPI's (order, probes, sizes,
// given-up operations).
//
// TCP between hosts: before MPI_Init, MpiRuntime::Init sets Open MPI's TCP eager limit and
// largest send to kTcpEagerBytes (1 MiB + 64 KiB) unless the job already sets them
// (OMPI_MCA_btl_tcp_eager_limit / OMPI_MCA_btl_tcp_max_send_size in the environment, which is
// where `mpirun --mca` puts them). With Open MPI's default (64 KiB) every larger message waits for
// a clear-to-send from its receiver; when two ranks send each other large messages at once, that
// clear-to-send queues behind the receiver's own outgoing data on the shared connection and the
// two directions take turns, which halves the link for pairwise exchanges. frugal's collectives
// send segments of at most 1 MiB (AllreduceOptions::segment_bytes), which then go eagerly into
// receives that are already posted. Every rank of a job must use the same values.
#pragma once

#include <memory>

#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

namespace mpi_internal {
class AbandonedRequests;
}

// Open MPI's TCP eager limit and largest fragment as frugal sets them (see above).
inline constexpr size_t kTcpEagerBytes = (size_t{1} << 20) + (size_t{64} << 10);

class MpiRuntime {
 public:
  // Initialises MPI (argc/argv may be null). kFailedPrecondition if MPI cannot give the thread
  // level frugal needs, or if MPI was already initialised by someone else.
  static StatusOr<std::unique_ptr<MpiRuntime>> Init(int* argc, char*** argv);
  // As Init, but MPI initialised by someone else (another library, mpi4py) is accepted when it
  // provides MPI_THREAD_SERIALIZED or more (kFailedPrecondition otherwise, or after
  // MPI_Finalize); such a runtime leaves MPI initialised when it is destroyed.
  static StatusOr<std::unique_ptr<MpiRuntime>> InitOrAdopt(int* argc, char*** argv);
  ~MpiRuntime();  // MPI_Finalize, when this runtime initialised MPI

  // True when this runtime initialised MPI (and finalises it).
  bool owns_mpi() const { return owns_mpi_; }

  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // A transport over a duplicate of MPI_COMM_WORLD (so frugal's messages never mix with other
  // users of the world communicator). Collective: it returns once every rank has called it
  // (MPI_Comm_dup has no timeout). Destroy the transports before the runtime.
  StatusOr<std::unique_ptr<Transport>> World();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Ranks of the job running on this machine's kernel, this one included, as counted by the
  // last World() (1 before): ranks of emulated hosts (`--emulate`) count as on one machine. With
  // more of them than cores, waits yield the core sooner (mpi_transport.cc).
  int ranks_on_this_machine() const { return ranks_on_this_machine_; }

  // Operations given up by their owners (a Wait that timed out, a Work destroyed unfinished) that
  // MPI has not completed yet, after testing each of them once, which drives MPI's progress.
  size_t abandoned_operations();

  // MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job. Used when a rank cannot go on
  // (a timeout, a lost peer) so that no other rank hangs.
  [[noreturn]] void Abort(int code);

 private:
  MpiRuntime() = default;
  int world_rank_ = 0;
  int world_size_ = 1;
  int ranks_on_this_machine_ = 1;
  bool owns_mpi_ = true;
  // Operations given up by their owners, kept until MPI completes them (shared with transports).
  std::shared_ptr<mpi_internal::AbandonedRequests> abandoned_;
};

}  // namespace frugal
