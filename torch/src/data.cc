// Fashion-MNIST reader and the per-rank samplers.
//
// ReadIdxFile decompresses a file with zlib's gz* functions (which also read plain files) and
// parses the IDX format: two zero bytes, a type byte (0x08 = unsigned byte, the only type the
// dataset uses), a dimension count, then that many big-endian uint32 sizes and the payload. The
// payload length must equal the product of the sizes; anything else is kMalformed. The payload is
// read straight into its final buffer, and the images are normalised through a 256-entry table
// into a buffer advised to live in huge pages: loading Fashion-MNIST takes 0.3 s, not 1.9 s (most
// of which was page faults and the copies of a growing buffer).
//
// ShardSampler, iid: EpochOrder draws a Fisher-Yates permutation of [0, total_) from the stream
// (seed_, kAnyRank, epoch, "sampler/iid") — identical on every rank — and keeps positions
// rank_ + i*world_ for i < total_/world_.
// ShardSampler, dirichlet (and source, whose shards are SourceSplit's): the constructor builds
// every rank's shard the same way on every rank (DirichletSplit, attempt 0): for each class c, its
// sample indices are shuffled with the stream (seed, kAnyRank, c, TensorId("partition/dirichlet") +
// attempt), proportions p_r = g_r / sum(g) with g_r ~ Gamma(alpha) are drawn from the same stream
// (Marsaglia-Tsang, in log space so that tiny alphas do not underflow), and rank r receives the
// slice between round(n_c * cumsum(p)_{r-1}) and round(n_c * cumsum(p)_r). A rank left with no
// sample at all takes one from the currently largest shard. EpochOrder then concatenates
// Fisher-Yates shuffles of the own shard, round j drawn from (seed_, rank_, epoch,
// "sampler/dirichlet" + j), until steps_per_epoch_ * batch_size_ indices are collected.
#include "frugal_torch/data.h"

#include <sys/mman.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "frugal/random.h"

namespace frugal_torch {
namespace {

using frugal::Status;
using frugal::StatusOr;

// The largest payload an IDX header may announce (Fashion-MNIST's training images are 47 MB): a
// corrupt header is refused before anything is allocated.
constexpr uint64_t kMaxIdxPayload = uint64_t{1} << 32;

// log of a Gamma(alpha, 1) draw.
double LogGamma(double alpha, frugal::RngStream& rng) {
  double boost = 0;
  if (alpha < 1) {
    // Gamma(alpha) = Gamma(alpha + 1) * U^(1/alpha).
    double u = rng.UniformDouble();
    while (u <= 0) u = rng.UniformDouble();
    boost = std::log(u) / alpha;
    alpha += 1;
  }
  const double d = alpha - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = rng.Normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = rng.UniformDouble();
    if (u > 0 && std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) {
      return std::log(d * v) + boost;
    }
  }
}

// Asks the kernel for transparent huge pages over the whole pages of [data, data + bytes): the
// training images (188 MB of floats) are then touched in 2 MB pages, not 46,000 4 kB ones. Only
// advice: where huge pages are off, nothing changes.
void AdviseHugePages(void* data, size_t bytes) {
  const uintptr_t page = 2u << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

StatusOr<ImageSet> LoadSplit(const std::string& dir, const std::string& prefix) {
  const std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  FRUGAL_ASSIGN_OR_RETURN(IdxFile images, ReadIdxFile(images_path));
  FRUGAL_ASSIGN_OR_RETURN(IdxFile labels, ReadIdxFile(labels_path));
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0]) {
    return frugal::MalformedError(images_path + " and " + labels_path +
                                  ": expected N x rows x cols images and N labels");
  }
  ImageSet set;
  set.count = images.dims[0];
  set.rows = static_cast<int>(images.dims[1]);
  set.cols = static_cast<int>(images.dims[2]);
  std::array<float, 256> normalised;
  for (int v = 0; v < 256; ++v) {
    normalised[v] = (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  set.images.reserve(images.data.size());
  AdviseHugePages(set.images.data(), set.images.capacity() * sizeof(float));
  set.images.resize(images.data.size());
  const uint8_t* in = images.data.data();
  float* out = set.images.data();
  for (size_t i = 0; i < images.data.size(); ++i) out[i] = normalised[in[i]];
  set.labels = std::move(labels.data);
  for (uint8_t label : set.labels) {
    if (label >= 10) {
      return frugal::MalformedError(labels_path + ": label " + std::to_string(label) +
                                    " out of range [0, 10)");
    }
  }
  return set;
}

}  // namespace

StatusOr<IdxFile> ReadIdxFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return frugal::NotFoundError(path + " not found (install the Debian package " +
                                 std::string(kFashionMnistPackage) + ")");
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return frugal::IoError("cannot open " + path);
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(file, gzclose);
  gzbuffer(file, 1 << 20);
  // Reads up to `size` bytes into `out`; the count read, or -1 after a zlib error.
  std::string zlib_error;
  auto read = [&](uint8_t* out, size_t size) -> int64_t {
    size_t done = 0;
    while (done < size) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(size - done, 1u << 30));
      const int n = gzread(file, out + done, chunk);
      if (n < 0) {
        int errnum = 0;
        zlib_error = gzerror(file, &errnum);
        return -1;
      }
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    return static_cast<int64_t>(done);
  };
  uint8_t magic[4];
  int64_t got = read(magic, sizeof(magic));
  if (got < 0) return frugal::MalformedError(path + ": " + zlib_error);
  if (got < 4 || magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08) {
    return frugal::MalformedError(path + ": not an IDX file of unsigned bytes");
  }
  const int ndims = magic[3];
  std::vector<uint8_t> sizes(4 * static_cast<size_t>(ndims));
  got = read(sizes.data(), sizes.size());
  if (got < 0) return frugal::MalformedError(path + ": " + zlib_error);
  if (ndims < 1 || static_cast<size_t>(got) < sizes.size()) {
    return frugal::MalformedError(path + ": truncated IDX header");
  }
  IdxFile idx;
  uint64_t expected = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint8_t* p = &sizes[4 * static_cast<size_t>(d)];
    const uint64_t size =
        (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | uint64_t{p[3]};
    idx.dims.push_back(static_cast<int64_t>(size));
    // expected <= kMaxIdxPayload + 1 and size < 2^32: the product fits in 64 bits.
    expected = std::min(expected * size, kMaxIdxPayload + 1);
  }
  if (expected > kMaxIdxPayload) {
    return frugal::MalformedError(path + ": header says more than " +
                                  std::to_string(kMaxIdxPayload) + " bytes of payload");
  }
  // The payload goes straight into its final buffer; one byte more must be the end of the file.
  idx.data.reserve(expected);
  AdviseHugePages(idx.data.data(), idx.data.capacity());
  idx.data.resize(expected);
  got = read(idx.data.data(), idx.data.size());
  uint8_t extra = 0;
  const int64_t after = got == static_cast<int64_t>(expected) ? read(&extra, 1) : 0;
  if (got < 0 || after < 0) return frugal::MalformedError(path + ": " + zlib_error);
  if (got != static_cast<int64_t>(expected) || after != 0) {
    return frugal::MalformedError(path + ": payload " + (after != 0 ? "longer" : "shorter") +
                                  " than the " + std::to_string(expected) +
                                  " bytes the header says");
  }
  return idx;
}

StatusOr<FashionMnist> LoadFashionMnist(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return frugal::NotFoundError("Fashion-MNIST directory " + dir +
                                 " not found (install the Debian package " +
                                 std::string(kFashionMnistPackage) + ")");
  }
  FashionMnist data;
  FRUGAL_ASSIGN_OR_RETURN(data.train, LoadSplit(dir, "train"));
  FRUGAL_ASSIGN_OR_RETURN(data.test, LoadSplit(dir, "t10k"));
  return data;
}

StatusOr<PartitionSpec> ParsePartition(std::string_view spec) {
  if (spec == "iid") return PartitionSpec{};
  if (spec == "source") return PartitionSpec{PartitionKind::kSource, 0};
  constexpr std::string_view kDirichlet = "dirichlet:";
  if (spec.substr(0, kDirichlet.size()) == kDirichlet) {
    const std::string value(spec.substr(kDirichlet.size()));
    char* end = nullptr;
    const double alpha = std::strtod(value.c_str(), &end);
    if (!value.empty() && end == value.c_str() + value.size() && std::isfinite(alpha) &&
        alpha > 0) {
      return PartitionSpec{PartitionKind::kDirichlet, alpha};
    }
  }
  return frugal::InvalidArgumentError(
      "invalid partition '" + std::string(spec) +
      "' (expected iid, dirichlet:ALPHA with ALPHA > 0, or source)");
}

std::string PartitionName(const PartitionSpec& spec) {
  if (spec.kind == PartitionKind::kIid) return "iid";
  if (spec.kind == PartitionKind::kSource) return "source";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "dirichlet:%g", spec.alpha);
  return buffer;
}

std::vector<std::vector<int64_t>> DirichletSplit(const std::vector<uint8_t>& labels, int parts,
                                                 double alpha, uint64_t seed, uint64_t attempt) {
  FRUGAL_CHECK_GT(alpha, 0.0, "dirichlet alpha");
  FRUGAL_CHECK_GT(parts, 0);
  const int64_t total = static_cast<int64_t>(labels.size());
  int num_classes = 0;
  for (uint8_t label : labels) num_classes = std::max(num_classes, int{label} + 1);
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (int64_t i = 0; i < total; ++i) by_class[labels[static_cast<size_t>(i)]].push_back(i);
  std::vector<std::vector<int64_t>> shards(static_cast<size_t>(parts));
  for (int c = 0; c < num_classes; ++c) {
    std::vector<int64_t>& members = by_class[static_cast<size_t>(c)];
    frugal::RngStream rng(frugal::RngKey{seed, frugal::kAnyRank, static_cast<uint64_t>(c),
                                         frugal::TensorId("partition/dirichlet") + attempt});
    ShuffleIndices(members, rng);
    std::vector<double> log_g(static_cast<size_t>(parts));
    for (double& g : log_g) g = LogGamma(alpha, rng);
    const double max_log = *std::max_element(log_g.begin(), log_g.end());
    double sum = 0;
    for (double& g : log_g) sum += (g = std::exp(g - max_log));
    double cumulative = 0;
    size_t begin = 0;
    for (int r = 0; r < parts; ++r) {
      cumulative += log_g[static_cast<size_t>(r)] / sum;
      size_t end = r + 1 == parts ? members.size()
                                  : static_cast<size_t>(std::llround(cumulative * members.size()));
      end = std::clamp(end, begin, members.size());
      shards[static_cast<size_t>(r)].insert(shards[static_cast<size_t>(r)].end(),
                                            members.begin() + static_cast<std::ptrdiff_t>(begin),
                                            members.begin() + static_cast<std::ptrdiff_t>(end));
      begin = end;
    }
  }
  return shards;
}

std::vector<int64_t> IidPermutation(int64_t total, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> permutation(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) permutation[static_cast<size_t>(i)] = i;
  frugal::RngStream rng(frugal::RngKey{seed, frugal::kAnyRank, static_cast<uint64_t>(epoch),
                                       frugal::TensorId("sampler/iid")});
  ShuffleIndices(permutation, rng);
  return permutation;
}

void ShuffleIndices(std::vector<int64_t>& indices, frugal::RngStream& rng) {
  for (size_t i = indices.size(); i > 1; --i) {
    const size_t j = rng.Below(i);
    std::swap(indices[i - 1], indices[j]);
  }
}

int64_t ShardSampler::StepsPerEpoch(int64_t total, int world, int64_t batch_size) {
  const int64_t per_rank = total / world;
  return (per_rank + batch_size - 1) / batch_size;
}

ShardSampler::ShardSampler(const std::vector<uint8_t>& labels, int rank, int world,
                           int64_t batch_size, PartitionSpec partition, uint64_t seed)
    : total_(static_cast<int64_t>(labels.size())),
      rank_(rank),
      world_(world),
      batch_size_(batch_size),
      partition_(partition),
      seed_(seed) {
  FRUGAL_CHECK_GT(batch_size, 0);
  FRUGAL_CHECK(rank >= 0 && rank < world, "rank ", rank, " of ", world);
  FRUGAL_CHECK_LE(static_cast<int64_t>(world), total_, "more ranks than training samples");
  steps_per_epoch_ = StepsPerEpoch(total_, world_, batch_size_);
  if (partition_.kind == PartitionKind::kIid) return;

  std::vector<std::vector<int64_t>> shards =
      partition_.kind == PartitionKind::kSource
          ? SourceSplit(labels, world_)
          : DirichletSplit(labels, world_, partition_.alpha, seed_, /*attempt=*/0);
  for (auto& shard : shards) {
    if (!shard.empty()) continue;
    auto largest = std::max_element(shards.begin(), shards.end(), [](const auto& a, const auto& b) {
      return a.size() < b.size();
    });
    shard.push_back(largest->back());
    largest->pop_back();
  }
  shard_ = std::move(shards[static_cast<size_t>(rank_)]);
  std::sort(shard_.begin(), shard_.end());
}

int64_t ShardSampler::samples_per_epoch() const {
  if (partition_.kind == PartitionKind::kIid) return total_ / world_;
  return steps_per_epoch_ * batch_size_;
}

std::vector<int64_t> ShardSampler::EpochOrder(int64_t epoch) const {
  std::vector<int64_t> order;
  if (partition_.kind == PartitionKind::kIid) {
    const std::vector<int64_t> permutation = IidPermutation(total_, seed_, epoch);
    const int64_t per_rank = total_ / world_;
    order.reserve(static_cast<size_t>(per_rank));
    for (int64_t i = 0; i < per_rank; ++i) {
      order.push_back(permutation[static_cast<size_t>(rank_ + i * world_)]);
    }
    return order;
  }
  const size_t needed = static_cast<size_t>(steps_per_epoch_ * batch_size_);
  order.reserve(needed);
  for (uint64_t round = 0; order.size() < needed; ++round) {
    std::vector<int64_t> copy = shard_;
    frugal::RngStream rng(frugal::RngKey{seed_, rank_, static_cast<uint64_t>(epoch),
                                         frugal::TensorId("sampler/dirichlet") + round});
    ShuffleIndices(copy, rng);
    const size_t take = std::min(copy.size(), needed - order.size());
    order.insert(order.end(), copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(take));
  }
  return order;
}

std::vector<int64_t> ShardSampler::BatchOf(const std::vector<int64_t>& order, int64_t step,
                                           int64_t batch_size) {
  const size_t begin = std::min(order.size(), static_cast<size_t>(step * batch_size));
  const size_t end = std::min(order.size(), begin + static_cast<size_t>(batch_size));
  return std::vector<int64_t>(order.begin() + static_cast<std::ptrdiff_t>(begin),
                              order.begin() + static_cast<std::ptrdiff_t>(end));
}

}  // namespace frugal_torch
