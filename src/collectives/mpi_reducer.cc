// The MPI_Allreduce peer as a GradientReducer (see mpi_reducer.h).
//
// MpiReducer copies the bucket into a staging buffer of its own and hands that to Open MPI's
// MPI_Iallreduce (MPI_SUM) on its own duplicate of MPI_COMM_WORLD (made with MPI_Comm_idup so that
// even the set-up wait is bounded); the request is polled as a Work of the MPI transport
// (transport/mpi/mpi_request.h) until it completes or `timeout` passes, and the sum, divided by
// the number of ranks, is written back into the bucket. On a timeout the request keeps the staging
// buffer and the runtime keeps both until MPI completes it, so the bucket's memory is never
// touched again. MPI errors keep the meaning of their error class (mpi_internal::MpiError).
// MPI picks its own algorithm and its bytes cannot be observed, so bytes_sent() adds, per bucket,
// what the ring algorithm sends from this rank (coll::RingModelBytes, 2 (n-1)/n of the bucket);
// bytes_counted_by() says "model:ring".
#include "collectives/mpi_reducer.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/internal.h"
#include "transport/mpi/mpi_request.h"

namespace frugal {
namespace {

// The kTimeout text of an MPI collective: MPI does not tell which rank is missing.
std::function<std::string(Duration)> NotCompleted(const std::string& what) {
  return [what](Duration timeout) {
    return what + ": not completed within " + std::to_string(timeout.count()) +
           " ms (MPI does not say which rank is missing)";
  };
}

class MpiReducer final : public GradientReducer {
 public:
  MpiReducer(Transport& t, MPI_Comm comm, int rank, int size, Duration timeout)
      : transport_(t), comm_(comm), rank_(rank), size_(size), timeout_(timeout) {}
  ~MpiReducer() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  Status Reduce(const BucketInfo& bucket, std::span<float> data) override {
    FRUGAL_CHECK_EQ(data.size(), bucket.count, "bucket ", bucket.name);
    FRUGAL_CHECK_LE(data.size(), static_cast<size_t>(INT32_MAX), "bucket ", bucket.name);
    if (size_ == 1 || data.empty()) return Status::Ok();
    const std::string what =
        "MPI_Allreduce of " + bucket.name + " (step " + std::to_string(bucket.step) + ")";
    // MPI works on the reducer's staging copy, which an abandoned all-reduce takes with it.
    if (staging_ == nullptr || staging_.use_count() > 1) {
      staging_ = std::make_shared<std::vector<float>>();
    }
    std::vector<float>& staging = *staging_;
    staging.assign(data.begin(), data.end());
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Iallreduce(MPI_IN_PLACE, staging.data(), static_cast<int>(staging.size()),
                                  MPI_FLOAT, MPI_SUM, comm_, &request);
    if (rc != MPI_SUCCESS) return mpi_internal::MpiError(rc, what);
    FRUGAL_RETURN_IF_ERROR(
        mpi_internal::WorkForRequest(transport_, request, staging_, what, NotCompleted(what))
            ->Wait(timeout_));
    const float scale = 1.0f / static_cast<float>(size_);
    for (size_t i = 0; i < data.size(); ++i) data[i] = staging[i] * scale;
    bytes_sent_ += coll::RingModelBytes(data.size(), size_, rank_);
    return Status::Ok();
  }

  std::string name() const override { return "mpi"; }
  uint64_t bytes_sent() const override { return bytes_sent_; }
  std::string bytes_counted_by() const override { return "model:ring"; }

 private:
  Transport& transport_;
  MPI_Comm comm_;
  int rank_;
  int size_;
  Duration timeout_;
  std::shared_ptr<std::vector<float>> staging_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<GradientReducer>> MakeMpiReducer(Transport& t, Duration timeout) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return FailedPreconditionError(
        "the mpi all-reduce needs a run under MPI (start it with mpirun or --np)");
  }
  int world_rank = 0;
  int world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_rank != t.rank() || world_size != t.size()) {
    return FailedPreconditionError(
        "the mpi all-reduce needs a transport that spans MPI_COMM_WORLD in rank order (rank " +
        std::to_string(t.rank()) + " of " + std::to_string(t.size()) + " vs. world rank " +
        std::to_string(world_rank) + " of " + std::to_string(world_size) + ")");
  }
  if (!mpi_internal::IsMpiTransport(t)) {
    return FailedPreconditionError("the mpi all-reduce needs the MPI transport");
  }
  // MPI writes the new communicator at completion, into memory the request owns.
  auto comm = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request request = MPI_REQUEST_NULL;
  const std::string what = "duplicating MPI_COMM_WORLD";
  const int rc = MPI_Comm_idup(MPI_COMM_WORLD, comm.get(), &request);
  if (rc != MPI_SUCCESS) return mpi_internal::MpiError(rc, what);
  FRUGAL_RETURN_IF_ERROR(
      mpi_internal::WorkForRequest(t, request, comm, what, NotCompleted(what))->Wait(timeout));
  MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<GradientReducer>(
      std::make_unique<MpiReducer>(t, *comm, world_rank, world_size, timeout));
}

}  // namespace frugal
