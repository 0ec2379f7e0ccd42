// The compressing gradient reducer. For a bucket of entries (tensors or tensor partitions, each
// with its name, offset and count):
//   1. the entries smaller than min_bytes are averaged with one dense all-reduce
//      (AllreduceFused from their places in `data`: gathered into the layout in which each
//      entry's bits do not depend on the others, and scattered back);
//   2. every other entry is averaged by AggregateCompressed as tensor `entry.name` (with
//      `entry.shape` when the engine knows it, for per-column and low-rank compressors), so that
//      its compressor state (error-feedback residual, momentum, PowerSGD's Q) follows the tensor
//      whichever bucket the engine puts it in;
// with the context's step set to the bucket's step (the compressors' random streams depend on it).
// With worker_momentum, every entry is first replaced by this rank's momentum of it (kept per
// entry name, restarted from zero if the entry's size changes).
// Bytes are counted by the transport around each part; the dense equivalent of a bucket is what
// a ring all-reduce of it would send, 2 (n - 1) / n * 4 * count.
#include "frugal/compressed_reducer.h"

#include <fmt/format.h>

#include <map>

namespace frugal {

double CompressedReducer::compression_ratio() const {
  const Stats& s = stats();
  if (s.bytes_sent == 0) return 0;
  return static_cast<double>(s.dense_equivalent_bytes) / static_cast<double>(s.bytes_sent);
}

namespace {

std::string FormatMinBytes(size_t bytes) {
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes / 1024);
  return fmt::format("{} B", bytes);
}

class CompressedReducerImpl final : public CompressedReducer {
 public:
  CompressedReducerImpl(Transport& t, std::unique_ptr<Compressor> compressor,
                        const CompressedReducerOptions& options)
      : t_(t),
        compressor_(std::move(compressor)),
        options_(options),
        ctx_(options.seed, t.rank(), t.size()) {
    aggregate_.path = options.path;
    aggregate_.op = ReduceOp::kAverage;
    aggregate_.timeout = options.timeout;
    aggregate_.algorithm = options.algorithm;
    // The engine has negotiated the tensors and their sizes; decoders still reject a payload of
    // another size.
    aggregate_.check_lengths = false;
  }

  Status Reduce(const BucketInfo& bucket, std::span<float> data) override {
    FRUGAL_CHECK_EQ(data.size(), bucket.count, "data of bucket ", bucket.name);
    ctx_.set_step(bucket.step);
    const int n = t_.size();
    stats_.elements += bucket.count;
    stats_.dense_equivalent_bytes +=
        2 * static_cast<uint64_t>(n - 1) * 4 * bucket.count / static_cast<uint64_t>(n);

    if (options_.worker_momentum > 0) ApplyWorkerMomentum(bucket, data);

    // 1. The small entries, with one dense all-reduce.
    const uint64_t dense_start = t_.bytes_sent();
    bool all_small = true;
    small_parts_.clear();
    small_starts_.clear();
    for (const BucketEntry& e : bucket.entries) {
      if (Small(e)) {
        small_parts_.push_back(FusedPartOf(e));
        small_starts_.push_back(e.offset);
      } else {
        all_small = false;
      }
    }
    AllreduceOptions dense;
    dense.algorithm = options_.algorithm;
    dense.op = ReduceOp::kAverage;
    dense.timeout = options_.timeout;
    dense.check_lengths = false;
    if (!small_parts_.empty()) {
      FRUGAL_RETURN_IF_ERROR(
          AllreduceFused(t_, data, small_parts_, small_starts_, dense, &dense_scratch_)
              .Annotate("dense part of " + bucket.name));
    }
    const uint64_t compressed_start = t_.bytes_sent();
    stats_.dense_bytes_sent += compressed_start - dense_start;

    // 2. The large entries, each through the compressor.
    if (!all_small) {
      for (const BucketEntry& e : bucket.entries) {
        if (Small(e)) continue;
        FRUGAL_CHECK_LE(e.offset + e.count, data.size(), "entry ", e.name, " of ", bucket.name);
        TensorInfo tensor(e.name, e.count, ShapeOf(e));
        FRUGAL_RETURN_IF_ERROR(AggregateCompressed(
            t_, *compressor_, data.subspan(e.offset, e.count), tensor, ctx_, aggregate_));
        stats_.compressed_elements += e.count;
      }
    }
    const uint64_t end = t_.bytes_sent();
    stats_.compressed_bytes_sent += end - compressed_start;
    stats_.bytes_sent += end - dense_start;
    return Status::Ok();
  }

  std::string name() const override {
    std::string momentum;
    if (options_.worker_momentum > 0) {
      momentum = fmt::format(", worker {}momentum {}", options_.worker_nesterov ? "Nesterov " : "",
                             options_.worker_momentum);
    }
    return fmt::format("compress {} ({}, dense below {}{})", compressor_->spec(),
                       AggregationPathName(ResolveAggregationPath(*compressor_, options_.path)),
                       FormatMinBytes(options_.min_bytes), momentum);
  }
  uint64_t bytes_sent() const override { return stats_.bytes_sent; }
  std::string bytes_counted_by() const override { return "transport"; }
  const Stats& stats() const override { return stats_; }
  const Compressor& compressor() const override { return *compressor_; }

  // compressor/<tensor>/<slot>/... and worker_momentum/<entry>.
  void VisitState(StateVisitor& visitor) override {
    {
      StateVisitor::Scope scope(visitor, "compressor");
      ctx_.VisitState(visitor);
    }
    if (options_.worker_momentum <= 0) return;
    StateVisitor::Scope scope(visitor, "worker_momentum");
    if (visitor.loading()) {
      for (const std::string& name : visitor.Children()) {
        visitor.FloatVector(EscapeStateName(name), momentum_[name]);
      }
    } else {
      for (auto& [name, m] : momentum_) visitor.FloatVector(EscapeStateName(name), m);
    }
  }

 private:
  bool Small(const BucketEntry& e) const { return 4 * e.count < options_.min_bytes; }

  // data[e] <- m_e = mu * m_e + g_e, or g_e + mu * m_e with Nesterov's momentum.
  void ApplyWorkerMomentum(const BucketInfo& bucket, std::span<float> data) {
    const float mu = static_cast<float>(options_.worker_momentum);
    for (const BucketEntry& e : bucket.entries) {
      FRUGAL_CHECK_LE(e.offset + e.count, data.size(), "entry ", e.name, " of ", bucket.name);
      std::vector<float>& m = momentum_[e.name];
      if (m.size() != e.count) m.assign(e.count, 0.0f);
      float* g = data.data() + e.offset;
      for (size_t i = 0; i < e.count; ++i) {
        m[i] = mu * m[i] + g[i];
        g[i] = options_.worker_nesterov ? g[i] + mu * m[i] : m[i];
      }
    }
  }

  // The entry's shape when it is consistent with its count, else flat.
  static std::vector<int64_t> ShapeOf(const BucketEntry& e) {
    if (e.shape.empty()) return {};
    size_t product = 1;
    for (int64_t d : e.shape) {
      if (d < 0) return {};
      product *= static_cast<size_t>(d);
    }
    return product == e.count ? e.shape : std::vector<int64_t>{};
  }

  Transport& t_;
  std::unique_ptr<Compressor> compressor_;
  CompressedReducerOptions options_;
  AggregateOptions aggregate_;
  CompressContext ctx_;
  std::vector<FusedPart> small_parts_;  // the bucket's small entries
  std::vector<size_t> small_starts_;    // and their offsets in the bucket
  SharedBytes dense_scratch_;           // AllreduceFused's
  std::map<std::string, std::vector<float>, std::less<>> momentum_;
  Stats stats_;
};

}  // namespace

StatusOr<std::unique_ptr<CompressedReducer>> MakeCompressedReducer(
    Transport& t, const CompressorRegistry& registry, const CompressedReducerOptions& options) {
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> compressor, registry.Create(options.spec));
  if (options.error_feedback && compressor->inner() == nullptr) {
    compressor = WithErrorFeedback(std::move(compressor));
  }
  FRUGAL_RETURN_IF_ERROR(CheckAggregationPath(*compressor, options.path));
  if (!(options.worker_momentum >= 0 && options.worker_momentum < 1)) {
    return InvalidArgumentError(
        fmt::format("worker momentum {} is not in [0, 1)", options.worker_momentum));
  }
  return std::unique_ptr<CompressedReducer>(
      std::make_unique<CompressedReducerImpl>(t, std::move(compressor), options));
}

}  // namespace frugal
