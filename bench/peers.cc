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

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// `address` ("[127.0.0.1]:4123") occurs in `text` and is not the start of a longer port.
bool ContainsAddress(std::string_view text, std::string_view address) {
  for (size_t at = text.find(address); at != std::string_view::npos;
       at = text.find(address, at + 1)) {
    const size_t end = at + address.size();
    if (end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

}  // namespace

StatusOr<std::unique_ptr<PingPongPeer>> MakeMpiPingPongPeer(Transport& t, Duration timeout) {
  FRUGAL_ASSIGN_OR_RETURN(MPI_Comm comm, DupWorld(t, timeout));
  return std::unique_ptr<PingPongPeer>(std::make_unique<MpiPingPongPeer>(comm));
}

StatusOr<GlooAlgorithm> ParseGlooAlgorithm(std::string_view name) {
  if (name == "ring_chunked") return GlooAlgorithm::kRingChunked;
  if (name == "halving_doubling") return GlooAlgorithm::kHalvingDoubling;
  return InvalidArgumentError(
      fmt::format("unknown Gloo algorithm '{}' (accepted: ring_chunked, halving_doubling)", name));
}

std::string_view GlooModeName(GlooMode mode) {
  switch (mode) {
    case GlooMode::kAsync:
      return "async";
    case GlooMode::kSync:
      return "sync";
    case GlooMode::kBusyPoll:
      return "busypoll";
  }
  return "?";
}

Status DescribeGlooFailure(std::string_view what,
                           const std::vector<std::vector<std::string>>& remote_addresses,
                           Duration timeout) {
  std::vector<int> ranks;
  for (size_t r = 0; r < remote_addresses.size(); ++r) {
    if (std::any_of(remote_addresses[r].begin(), remote_addresses[r].end(),
                    [&](const std::string& address) {
                      return !address.empty() && ContainsAddress(what, address);
                    })) {
      ranks.push_back(static_cast<int>(r));
    }
  }
  std::string who = "a peer";
  if (!ranks.empty()) {
    who = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      who += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
    }
  }
  if (Contains(what, "timeout") || Contains(what, "Timed out")) {
    return TimeoutError(
        fmt::format("no progress from {} within {} ms ({})", who, timeout.count(), what));
  }
  if (Contains(what, "closed by peer") || Contains(what, "reset by peer") ||
      Contains(what, "Broken pipe")) {
    return PeerLostError(fmt::format("{} is gone ({})", who, what));
  }
  return IoError(fmt::format("with {}: {}", who, what));
}

StatusOr<GlooMode> ParseGlooMode(std::string_view name) {
  if (name == "async") return GlooMode::kAsync;
  if (name == "sync") return GlooMode::kSync;
  if (name == "busypoll") return GlooMode::kBusyPoll;
  return InvalidArgumentError(
      fmt::format("unknown Gloo mode '{}' (accepted: async, sync, busypoll)", name));
}

StatusOr<std::unique_ptr<AllreducePeer>> MakeMpiPeer(Transport& t, Duration timeout) {
  FRUGAL_ASSIGN_OR_RETURN(MPI_Comm comm, DupWorld(t, timeout));
  return std::unique_ptr<AllreducePeer>(std::make_unique<MpiPeer>(comm));
}

}  // namespace frugal::bench
