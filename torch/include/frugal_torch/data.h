// Fashion-MNIST and how the training set is split across ranks.
//
// LoadFashionMnist reads the four IDX files (gzip) of Debian's dataset-fashion-mnist package and
// returns the images normalised with the training set's mean and standard deviation. A missing
// directory or file is kNotFound naming the package; a file that is not a valid IDX file of the
// expected kind is kMalformed. No torch types: the adapter wraps the buffers in tensors.
//
// ShardSampler tells each rank which training samples it uses in each epoch and in which order:
//  - iid (default): every epoch, a permutation of the whole training set drawn from (seed,
//    epoch), the same on every rank; rank r takes positions r, r+n, r+2n, ... of it (as PyTorch's
//    DistributedSampler), floor(N/n) samples each. Batch k of rank r thus holds the samples
//    that a single rank with batch n*b would see in its batch k; the n shards of an epoch are
//    disjoint and cover the set (all of it when n divides N).
//  - dirichlet:ALPHA: non-IID shards fixed for the whole run: for each class, the proportions
//    going to each rank are drawn from Dirichlet(ALPHA) (small ALPHA: few classes per rank).
//    Every epoch each rank reshuffles its shard (from seed, epoch, rank) and cycles through it so
//    that every rank runs the same number of full batches, ceil(floor(N/n) / b).
//  - source: non-IID shards of whole sources (the label of a sample names its source: the file
//    of a text corpus, text_corpus.h), fixed for the whole run (SourceSplit), used as dirichlet's.
// Everything is computed from the seed, without communication; all ranks agree.
// Thread safety: const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/random.h"
#include "frugal/status.h"

namespace frugal_torch {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr char kFashionMnistPackage[] = "dataset-fashion-mnist";
// Mean and standard deviation of the Fashion-MNIST training pixels scaled to [0, 1].
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

struct ImageSet {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<float> images;    // count * rows * cols, normalised, row-major
  std::vector<uint8_t> labels;  // count, in [0, 10) (a text corpus: the sample's source)
  // Sequence tasks (text_corpus.h): count x cols targets, the next token of each input position;
  // the model then predicts every position. Empty for classification (the target is the label).
  std::vector<uint8_t> targets;
};

struct FashionMnist {
  ImageSet train;
  ImageSet test;
};

frugal::StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir = kFashionMnistDir);

// Reads one IDX file (gzip or plain): its dimensions and raw uint8 payload.
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
frugal::StatusOr<IdxFile> ReadIdxFile(const std::string& path);

enum class PartitionKind { kIid, kDirichlet, kSource };

struct PartitionSpec {
  PartitionKind kind = PartitionKind::kIid;
  double alpha = 0;  // dirichlet only, > 0
};

// "iid", "dirichlet:ALPHA" with ALPHA > 0, or "source"; kInvalidArgument otherwise.
frugal::StatusOr<PartitionSpec> ParsePartition(std::string_view spec);
std::string PartitionName(const PartitionSpec& spec);

// A Fisher-Yates shuffle of `indices` drawn from `rng`.
void ShuffleIndices(std::vector<int64_t>& indices, frugal::RngStream& rng);

// The iid sampler's permutation of [0, total) for `epoch`, from (seed, kAnyRank, epoch,
// "sampler/iid"): the same on every rank.
std::vector<int64_t> IidPermutation(int64_t total, uint64_t seed, int64_t epoch);

// The Dirichlet split of the samples with `labels` into `parts` shards (see data.cc): each shard
// as the list of its sample indices, class by class; a shard may be empty. `attempt` selects
// independent draws for the same seed (attempt 0 is the ranks' partition of ShardSampler).
std::vector<std::vector<int64_t>> DirichletSplit(const std::vector<uint8_t>& labels, int parts,
                                                 double alpha, uint64_t seed, uint64_t attempt);

// The split by source into `parts` shards (partition_source.cc): the samples of each label value
// (source) in index order form a piece; while there are fewer pieces than parts, the largest
// piece (the first of equal ones) is cut into two halves of consecutive samples; then the pieces,
// largest first, each go to the shard with the fewest samples so far (the lowest index of equal
// ones). Deterministic, without a seed; a shard is empty only with fewer samples than parts.
// Each shard is sorted.
std::vector<std::vector<int64_t>> SourceSplit(const std::vector<uint8_t>& labels, int parts);

class ShardSampler {
 public:
  // `labels` of the training set; batch_size > 0, 0 <= rank < world; world <= labels.size().
  ShardSampler(const std::vector<uint8_t>& labels, int rank, int world, int64_t batch_size,
               PartitionSpec partition, uint64_t seed);

  // Steps per epoch of every rank for `total` training samples: ceil(floor(total / world) / batch).
  static int64_t StepsPerEpoch(int64_t total, int world, int64_t batch_size);

  int64_t batch_size() const { return batch_size_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // Samples this rank uses per epoch (iid: floor(N/n); dirichlet: steps * batch).
  int64_t samples_per_epoch() const;
  // dirichlet, source: the fixed shard of this rank (sorted); iid: empty.
  const std::vector<int64_t>& shard() const { return shard_; }

  // This rank's sample indices for `epoch`, in the order they are used.
  std::vector<int64_t> EpochOrder(int64_t epoch) const;
  // Slice `step` of EpochOrder(epoch) (the last iid batch may be shorter).
  static std::vector<int64_t> BatchOf(const std::vector<int64_t>& order, int64_t step,
                                      int64_t batch_size);

 private:
  int64_t total_;
  int rank_;
  int world_;
  int64_t batch_size_;
  PartitionSpec partition_;
  uint64_t seed_;
  std::vector<int64_t> shard_;
  int64_t steps_per_epoch_ = 0;
};

}  // namespace frugal_torch
