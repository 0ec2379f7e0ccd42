#include "peers.h"

#include <fmt/format.h>

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

}  // namespace

StatusOr<GlooAlgorithm> ParseGlooAlgorithm(std::string_view name) {
  if (name == "ring_chunked") return GlooAlgorithm::kRingChunked;
  if (name == "halving_doubling") return GlooAlgorithm::kHalvingDoubling;
  return InvalidArgumentError(
      fmt::format("unknown Gloo algorithm '{}' (accepted: ring_chunked, halving_doubling)", name));
}

StatusOr<std::unique_ptr<AllreducePeer>> MakeMpiPeer(Transport& t, Duration timeout) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  FRUGAL_CHECK_EQ(world_size, t.size(), "the MPI peer needs a transport spanning MPI_COMM_WORLD");
  // MPI_Comm_dup blocks until every rank calls it: make sure they are all here first.
  FRUGAL_RETURN_IF_ERROR(Barrier(t, CollectiveOptions{timeout, false}));
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return IoError("MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<AllreducePeer>(std::make_unique<MpiPeer>(comm));
}

}  // namespace frugal::bench
