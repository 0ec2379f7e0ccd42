// The compressing GradientReducer: each tensor of a bucket at least `min_bytes` large is
// aggregated through a compressor (AggregateCompressed, per tensor, with its own state and error
// feedback keyed by the tensor's name); smaller ones stay dense and are averaged together with
// one all-reduce, as BytePS and DGC do.
//
// Thread safety: as every GradientReducer, used by one thread (the one owning the transport).
// Blocking: Reduce() returns when the bucket is averaged; every wait inside is bounded by
// `timeout`. Errors: those of AggregateCompressed and Allreduce (kTimeout, kPeerLost, kMalformed,
// kInvalidArgument when ranks disagree on a tensor's size).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "frugal/compressor.h"
#include "frugal/reducer.h"

namespace frugal {

struct CompressedReducerOptions {
  std::string spec = "none";    // compressor spec (CompressorRegistry::Create)
  bool error_feedback = false;  // wrap the compressor in error feedback unless it already is
  size_t min_bytes = 65536;     // tensors (or tensor partitions) smaller than this stay dense
  AggregationPath path = AggregationPath::kAuto;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;  // the dense part and kAllreduce
  Duration timeout = kDefaultTimeout;
  uint64_t seed = 0;  // of the compressors' random streams (with rank, step and tensor)
  // Worker-side momentum (0: off). Each rank keeps per entry m = momentum * m + g and hands m
  // (with nesterov: g + momentum * m) to the dense and compressed parts instead of g, so the
  // compressor sees the smooth momentum and its error enters the parameters once, instead of
  // being accumulated by the optimizer's momentum buffer (DGC's momentum correction; Zheng et
  // al. 2019, dist-EF-SGDM). The optimizer then runs without momentum. The average of the
  // ranks' momenta is the momentum of the averaged gradient: with a lossless compressor the
  // training is that of momentum SGD (weight decay, if any, is then added outside the momentum).
  double worker_momentum = 0;
  bool worker_nesterov = false;
};

class CompressedReducer : public GradientReducer {
 public:
  // What went through the reducer on this rank since it was made.
  struct Stats {
    uint64_t bytes_sent = 0;             // counted by the transport, everything Reduce() sent
    uint64_t compressed_bytes_sent = 0;  // ... of which for compressed tensors
    uint64_t dense_bytes_sent = 0;       // ... of which for the dense (small) tensors
    uint64_t elements = 0;               // float elements reduced
    uint64_t compressed_elements = 0;    // ... of which through the compressor
    // What a dense ring all-reduce of the same buckets sends from one rank:
    // sum over buckets of 2 (n - 1) / n * 4 * count.
    uint64_t dense_equivalent_bytes = 0;
  };

  virtual const Stats& stats() const = 0;
  virtual const Compressor& compressor() const = 0;
  // dense_equivalent_bytes / bytes_sent; 0 when nothing was sent (a single rank).
  double compression_ratio() const;
};

// kNotFound / kInvalidArgument for a bad spec, and kInvalidArgument when `path` does not suit the
// compressor (CheckAggregationPath). `t` must outlive the reducer.
StatusOr<std::unique_ptr<CompressedReducer>> MakeCompressedReducer(
    Transport& t, const CompressorRegistry& registry, const CompressedReducerOptions& options);

}  // namespace frugal
