// Dense gradient reducers: the exact average of every bucket.
//
// AllreduceReducer runs frugal's Allreduce over the transport with ReduceOp::kAverage and the
// chosen AllreduceAlgorithm. A bucket of several entries is reduced so that an entry's average
// has the same bits whichever entries it was fused with, and an entry that is a piece of a tensor
// (BucketEntry::tensor_count) those it has in the reduction of the whole tensor: laid out block by
// block by the caller (FusedBlocks, BucketInfo::fused_blocks: the engine) or else by
// AllreduceFused. Its bytes_sent() is the growth of Transport::bytes_sent() across its own calls,
// so it counts exactly what this reducer put on the wire. Its bucket memory (NewBucketMemory) is
// the transport's shared memory, and ReduceShared passes it to Allreduce as
// AllreduceOptions::data_owner: sends and receives on it skip the transport's staging copies.
//
// "mpi" is MPI_Allreduce and "gloo[:ALGORITHM]" Gloo's all-reduce: peers frugal compares itself
// with, not its algorithms. They live in mpi_reducer.cc and gloo_reducer.cc.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/gloo_reducer.h"
#include "collectives/mpi_reducer.h"
#include "frugal/collectives.h"
#include "frugal/reducer.h"

namespace frugal {
namespace {

constexpr std::string_view kGloo = "gloo";

// "gloo" (ring_chunked), "gloo:ring_chunked", "gloo:halving_doubling"; nothing for other names.
std::optional<GlooAlgorithm> GlooAlgorithmOf(std::string_view algorithm) {
  if (algorithm == kGloo) return GlooAlgorithm::kRingChunked;
  if (!algorithm.starts_with(std::string(kGloo) + ":")) return std::nullopt;
  StatusOr<GlooAlgorithm> parsed = ParseGlooAlgorithm(algorithm.substr(kGloo.size() + 1));
  if (!parsed.ok()) return std::nullopt;
  return *parsed;
}

class AllreduceReducer final : public GradientReducer {
 public:
  AllreduceReducer(Transport& t, AllreduceOptions options)
      : transport_(t), options_(std::move(options)) {}

  Status Reduce(const BucketInfo& bucket, std::span<float> data) override {
    return Run(bucket, data, options_);
  }

  SharedBytes NewBucketMemory(size_t count) override {
    return transport_.NewShared(count * sizeof(float));
  }

  Status ReduceShared(const BucketInfo& bucket, std::span<float> data,
                      std::shared_ptr<void> owner) override {
    AllreduceOptions options = options_;
    options.data_owner = std::move(owner);
    return Run(bucket, data, options);
  }

  int FusedBlocks() const override {
    const int blocks = frugal::FusedBlocks(options_.algorithm, transport_.size());
    return blocks > 1 ? blocks : 0;
  }

  std::string name() const override {
    return "allreduce:" + std::string(AllreduceAlgorithmName(options_.algorithm));
  }
  uint64_t bytes_sent() const override { return bytes_sent_; }
  std::string bytes_counted_by() const override { return "transport"; }

 private:
  Status Run(const BucketInfo& bucket, std::span<float> data, const AllreduceOptions& options) {
    FRUGAL_CHECK_EQ(data.size(), bucket.count, "bucket ", bucket.name);
    const uint64_t before = transport_.bytes_sent();
    const std::vector<FusedPart> parts = FusedPartsOf(bucket.entries);
    Status status;
    if (bucket.fused_blocks > 1) {
      AllreduceOptions laid_out = options;
      laid_out.block_counts = FusedBlockCounts(parts, bucket.fused_blocks);
      status = Allreduce(transport_, data, laid_out);
    } else {
      status = AllreduceFused(transport_, data, parts, options, &scratch_);
    }
    bytes_sent_ += transport_.bytes_sent() - before;
    return status.Annotate("allreduce of " + bucket.name + " (step " + std::to_string(bucket.step) +
                           ")");
  }

  Transport& transport_;
  AllreduceOptions options_;
  uint64_t bytes_sent_ = 0;
  SharedBytes scratch_;  // AllreduceFused's
};

}  // namespace

std::vector<std::string> DenseReducerAlgorithms() {
  std::vector<std::string> names;
  for (AllreduceAlgorithm algorithm : AllAllreduceAlgorithms()) {
    names.emplace_back(AllreduceAlgorithmName(algorithm));
  }
  names.emplace_back("mpi");
  if (GlooAvailable()) {
    names.emplace_back(kGloo);
    for (GlooAlgorithm algorithm : {GlooAlgorithm::kRingChunked, GlooAlgorithm::kHalvingDoubling}) {
      names.push_back(fmt::format("{}:{}", kGloo, GlooAlgorithmName(algorithm)));
    }
  }
  return names;
}

bool IsLibraryAllreduce(std::string_view algorithm) {
  return algorithm == "mpi" || GlooAlgorithmOf(algorithm).has_value();
}

StatusOr<AllreduceAlgorithm> ModelAllreduceAlgorithm(std::string_view algorithm) {
  if (algorithm == "mpi") return AllreduceAlgorithm::kRing;
  if (std::optional<GlooAlgorithm> gloo = GlooAlgorithmOf(algorithm)) {
    return *gloo == GlooAlgorithm::kRingChunked ? AllreduceAlgorithm::kRing
                                                : AllreduceAlgorithm::kRabenseifner;
  }
  return ParseAllreduceAlgorithm(algorithm);
}

StatusOr<std::unique_ptr<GradientReducer>> MakeDenseReducer(Transport& t,
                                                            const DenseReducerOptions& options) {
  if (options.algorithm == "mpi") return MakeMpiReducer(t, options.timeout);
  if (std::optional<GlooAlgorithm> gloo = GlooAlgorithmOf(options.algorithm)) {
    return MakeGlooReducer(t, *gloo, options.timeout);
  }
  StatusOr<AllreduceAlgorithm> algorithm = ParseAllreduceAlgorithm(options.algorithm);
  if (!algorithm.ok()) {
    std::string known;
    for (const std::string& name : DenseReducerAlgorithms()) {
      known += (known.empty() ? "" : ", ") + name;
    }
    return InvalidArgumentError("unknown all-reduce algorithm '" + options.algorithm +
                                "' (known: " + known + ")");
  }
  if (*algorithm == AllreduceAlgorithm::kDirect && !t.SharesMemoryWithPeers()) {
    return InvalidArgumentError(fmt::format("the direct all-reduce {}", kDirectNeedsOneMachine));
  }
  AllreduceOptions allreduce = options.allreduce;
  allreduce.algorithm = *algorithm;
  allreduce.op = ReduceOp::kAverage;
  allreduce.timeout = options.timeout;
  return std::unique_ptr<GradientReducer>(std::make_unique<AllreduceReducer>(t, allreduce));
}

}  // namespace frugal
