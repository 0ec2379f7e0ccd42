#include "peers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>

#include "frugal/collectives.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

namespace frugal::bench {
namespace {

class MpiPeer : public AllreducePeer {
 public:
  explicit MpiPeer(MPI_Comm comm) : comm_(comm) {}
  ~MpiPeer() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  MpiPeer(const MpiPeer&) = delete;
  MpiPeer& operator=(const MpiPeer&) = delete;

  std::string name() const override { return "mpi"; }

  Status Allreduce(std::span<float> data) override {
    if (data.size() > static_cast<size_t>(INT_MAX)) {
      return InvalidArgumentError("MPI_Allreduce peer: more than INT_MAX elements");
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                           MPI_SUM, comm_);
    if (rc != MPI_SUCCESS) {
      std::array<char, MPI_MAX_ERROR_STRING> text{};
      int length = 0;
      MPI_Error_string(rc, text.data(), &length);
      return IoError(fmt::format("MPI_Allreduce: {}", std::string(text.data(), length)));
    }
    return Status::Ok();
  }

 private:
  MPI_Comm comm_;
};

class MpiPingPongPeer : public PingPongPeer {
 public:
  explicit MpiPingPongPeer(MPI_Comm comm) : comm_(comm) {}
  ~MpiPingPongPeer() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  MpiPingPongPeer(const MpiPingPongPeer&) = delete;
  MpiPingPongPeer& operator=(const MpiPingPongPeer&) = delete;

  std::string name() const override { return "mpi"; }

  Status RoundTrip(int peer, std::span<std::byte> message, bool initiator,
                   Duration timeout) override {
    if (message.size() > static_cast<size_t>(INT_MAX)) {
      return InvalidArgumentError("MPI ping-pong peer: message longer than INT_MAX bytes");
    }
    const int count = static_cast<int>(message.size());
    for (int step = 0; step < 2; ++step) {
      const bool send = (step == 0) == initiator;
      MPI_Request request = MPI_REQUEST_NULL;
      int rc = send ? MPI_Isend(message.data(), count, MPI_BYTE, peer, kTag, comm_, &request)
                    : MPI_Irecv(message.data(), count, MPI_BYTE, peer, kTag, comm_, &request);
      if (rc != MPI_SUCCESS) return IoError("MPI ping-pong peer: MPI_Isend/MPI_Irecv failed");
      const auto start = std::chrono::steady_clock::now();
      int flag = 0;
      while (!flag) {
        if (MPI_Test(&request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
          return IoError("MPI ping-pong peer: MPI_Test failed");
        }
        if (!flag && std::chrono::steady_clock::now() - start > timeout) {
          if (!send) MPI_Cancel(&request);
          MPI_Request_free(&request);
          return TimeoutError(fmt::format("MPI ping-pong peer: rank {} did not answer within {} ms",
                                          peer, timeout.count()));
        }
      }
    }
    return Status::Ok();
  }

 private:
  static constexpr int kTag = 7;
  MPI_Comm comm_;
};

// MPI_Comm_dup blocks until every rank calls it: a timed Barrier makes sure they are all there.
StatusOr<MPI_Comm> DupWorld(Transport& t, Duration timeout) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  FRUGAL_CHECK_EQ(world_size, t.size(), "an MPI peer needs a transport spanning MPI_COMM_WORLD");
  FRUGAL_RETURN_IF_ERROR(Barrier(t, CollectiveOptions{timeout, false}));
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return IoError("MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

}  // namespace

StatusOr<std::unique_ptr<PingPongPeer>> MakeMpiPingPongPeer(Transport& t, Duration timeout) {
  FRUGAL_ASSIGN_OR_RETURN(MPI_Comm comm, DupWorld(t, timeout));
  return std::unique_ptr<PingPongPeer>(std::make_unique<MpiPingPongPeer>(comm));
}

StatusOr<std::unique_ptr<AllreducePeer>> MakeMpiPeer(Transport& t, Duration timeout) {
  FRUGAL_ASSIGN_OR_RETURN(MPI_Comm comm, DupWorld(t, timeout));
  return std::unique_ptr<AllreducePeer>(std::make_unique<MpiPeer>(comm));
}

}  // namespace frugal::bench
