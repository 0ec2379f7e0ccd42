// The Gloo peer as a GradientReducer (see gloo_reducer.h).
//
// A Gloo algorithm is bound to the buffer it was made for, and every rank must make its
// algorithms in the same order. GlooReducer therefore keeps, per bucket length, a staging buffer
// of its own and the all-reduce made for it: lengths are the same on every rank for the same
// bucket, so every rank makes the same all-reduces in the same order whatever the addresses of
// its buckets. Reduce copies the bucket into the staging buffer, runs Gloo's all-reduce (sum) and
// writes the sum divided by the number of ranks back into the bucket. After an error the context
// is not used again: every later Reduce returns that error, and the staging buffers stay alive
// with the reducer, so Gloo's I/O thread never writes into freed memory. Gloo's bytes cannot be
// observed: bytes_sent() adds what the ring algorithm sends from this rank
// (coll::RingModelBytes), which is what ring_chunked sends and, for a power-of-two number of
// ranks, what halving_doubling sends; bytes_counted_by() says "model:ring".
#include "collectives/gloo_reducer.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "collectives/internal.h"

namespace frugal {
namespace {

// Distinct bucket lengths kept; past this all are dropped (on every rank alike) and made again.
constexpr size_t kMaxLengths = 64;

class GlooReducer final : public GradientReducer {
 public:
  GlooReducer(std::unique_ptr<GlooContext> context, GlooAlgorithm algorithm, int rank, int size)
      : context_(std::move(context)), algorithm_(algorithm), rank_(rank), size_(size) {}

  Status Reduce(const BucketInfo& bucket, std::span<float> data) override {
    FRUGAL_CHECK_EQ(data.size(), bucket.count, "bucket ", bucket.name);
    if (size_ == 1 || data.empty()) return Status::Ok();
    FRUGAL_RETURN_IF_ERROR(failure_);
    const std::string what = fmt::format("{} of {} (step {})", name(), bucket.name, bucket.step);
    if (!entries_.contains(data.size()) && entries_.size() >= kMaxLengths) {
      entries_.clear();
    }
    Entry& entry = entries_[data.size()];
    if (entry.allreduce == nullptr) {
      entry.staging.resize(data.size());
      StatusOr<std::unique_ptr<GlooAllreduce>> made =
          context_->MakeAllreduce(algorithm_, entry.staging);
      if (!made.ok()) return Fail(made.status().Annotate(what));
      entry.allreduce = std::move(*made);
    }
    std::copy(data.begin(), data.end(), entry.staging.begin());
    if (Status status = entry.allreduce->Run(); !status.ok()) return Fail(status.Annotate(what));
    const float scale = 1.0f / static_cast<float>(size_);
    for (size_t i = 0; i < data.size(); ++i) data[i] = entry.staging[i] * scale;
    bytes_sent_ += coll::RingModelBytes(data.size(), size_, rank_);
    return Status::Ok();
  }

  std::string name() const override {
    return fmt::format("gloo:{}", GlooAlgorithmName(algorithm_));
  }
  uint64_t bytes_sent() const override { return bytes_sent_; }
  std::string bytes_counted_by() const override { return "model:ring"; }

 private:
  struct Entry {
    std::vector<float> staging;
    std::unique_ptr<GlooAllreduce> allreduce;
  };

  Status Fail(Status status) {
    failure_ = status;
    // Gloo's I/O thread may still hold the buffers of the failed all-reduces.
    for (auto& [length, entry] : entries_) failed_.push_back(std::move(entry));
    entries_.clear();
    return status;
  }

  std::unique_ptr<GlooContext> context_;
  GlooAlgorithm algorithm_;
  int rank_;
  int size_;
  std::map<size_t, Entry> entries_;
  std::vector<Entry> failed_;
  Status failure_ = Status::Ok();
  uint64_t bytes_sent_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<GradientReducer>> MakeGlooReducer(Transport& t, GlooAlgorithm algorithm,
                                                           Duration timeout) {
  if (!GlooAvailable()) {
    return FailedPreconditionError("--arch allreduce:gloo: frugal was built without Gloo");
  }
  std::unique_ptr<GlooContext> context;
  if (t.size() > 1) {
    GlooContextOptions options;
    options.mode = GlooMode::kAsync;
    options.timeout = timeout;
    FRUGAL_ASSIGN_OR_RETURN(context, GlooContext::Connect(t, options));
  }
  return std::unique_ptr<GradientReducer>(
      std::make_unique<GlooReducer>(std::move(context), algorithm, t.rank(), t.size()));
}

}  // namespace frugal
