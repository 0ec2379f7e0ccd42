// Gradient reduction: the seam between a tensor engine's adapter (frugal_torch) and the
// communication layers. The adapter sees its gradients as named float buffers, groups them into
// buckets and hands each bucket to a GradientReducer, which replaces this rank's values by the
// average over all ranks (exactly, or approximately for compressing reducers).
//
// Bucket formation is separate from reduction: PlanBuckets() fixes, once, which tensors go into
// which bucket and at which offset, in an order that is the same on every rank; an adapter can
// then submit the buckets after backward or, with overlap, as each bucket's gradients become
// ready. VerifySamePlan() turns a rank whose model differs from its peers' into an error on every
// rank instead of a hang or a silent mix of unrelated tensors.
//
// Thread safety: a GradientReducer is used by one thread at a time, the one that owns the
// transport it was made with. Reduce() blocks until the bucket is reduced; every wait inside is
// bounded by the reducer's timeout and returns kTimeout naming the peers that did not answer.
// All ranks must call Reduce() for the same buckets in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/collectives.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

// The fusion cap of PyTorch DDP and Horovod.
inline constexpr size_t kDefaultBucketCapBytes = size_t{25} << 20;

// A tensor as the core sees it: a name, a number of float elements and, where known, its shape
// (its product is count), which the bucket entry carries to the compressors.
struct TensorSpec {
  std::string name;
  size_t count = 0;
  std::vector<int64_t> shape;
};

// Where one tensor lives inside its bucket, in elements.
struct BucketEntry {
  std::string name;
  size_t offset = 0;
  size_t count = 0;
  // The tensor's shape when the entry is a whole tensor whose shape is known (its product is
  // count); empty otherwise. Compressors that work on a matrix view (1-bit SGD's columns,
  // PowerSGD) use it.
  std::vector<int64_t> shape;
  // A piece of a tensor (the engine's priority partitions): elements [tensor_offset,
  // tensor_offset + count) of a tensor of tensor_count elements. tensor_count 0: the whole tensor.
  size_t tensor_offset = 0;
  size_t tensor_count = 0;
};

// An entry's place in its tensor, and the entries', for AllreduceFused and FusedBlockCounts.
FusedPart FusedPartOf(const BucketEntry& entry);
std::vector<FusedPart> FusedPartsOf(std::span<const BucketEntry> entries);

struct BucketInfo {
  int id = 0;        // 0, 1, ... in submission order
  std::string name;  // "bucket<id>"
  size_t count = 0;  // float elements in the bucket (sum of entries' counts)
  std::vector<BucketEntry> entries;
  uint64_t step = 0;  // training step the bucket belongs to; set by the caller of Reduce()
  // 0: the entries lie one after the other (at their offsets). > 1: the caller laid them out
  // block by block for that many blocks (ForEachFusedPiece over FusedPartsOf(entries), as the
  // reducer's FusedBlocks() asked; one entry lies in that layout as it is); the offsets are then
  // those of the layout one after the other, not where the entries lie.
  int fused_blocks = 0;
};

// Groups `tensors`, in the order given, into consecutive buckets of at most `cap_bytes` of float
// data; a tensor larger than the cap gets a bucket of its own. Tensors with count 0 are skipped.
// Deterministic: the same input gives the same plan on every rank. cap_bytes must be > 0.
std::vector<BucketInfo> PlanBuckets(std::span<const TensorSpec> tensors, size_t cap_bytes);

// 64-bit fingerprint of a plan (ids, names, offsets and counts of every entry).
uint64_t PlanFingerprint(std::span<const BucketInfo> plan);

// Collective: checks that every rank of `t` has the same plan. kInvalidArgument on every rank,
// naming the ranks whose plan differs from rank 0's, otherwise OK. Bounded by `timeout`.
Status VerifySamePlan(Transport& t, std::span<const BucketInfo> plan, Duration timeout);

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;

  // Replaces `data` (this rank's values of `bucket`, bucket.count elements) by their average over
  // the ranks. Collective: every rank calls it with the same bucket.
  virtual Status Reduce(const BucketInfo& bucket, std::span<float> data) = 0;

  // Memory for a bucket of `count` floats that the reducer can reduce without copies of its own:
  // a caller that gathers a bucket's parts into one buffer (the engine's fused buckets) gathers
  // them there and calls ReduceShared. The all-reduce reducers of frugal's algorithms return the
  // transport's shared memory (Transport::NewShared), which their sends and receives use directly
  // (AllreduceOptions::data_owner); the default returns an empty SharedBytes (owner null): no such
  // memory, use Reduce on memory of the caller's own.
  virtual SharedBytes NewBucketMemory(size_t count) { return {}; }

  // Reduce() of `data`, which lies in memory from NewBucketMemory that `owner` keeps alive. After
  // a failed reduction the caller must not use that memory again. The default calls Reduce().
  virtual Status ReduceShared(const BucketInfo& bucket, std::span<float> data,
                              std::shared_ptr<void> owner) {
    return Reduce(bucket, data);
  }

  // How a caller that gathers a bucket of several entries into one buffer should lay them out:
  // > 1, block by block for that many blocks (ForEachFusedPiece; it then sets
  // BucketInfo::fused_blocks), so that each entry's result has the bits of its own reduction
  // (the all-reduce reducers of frugal's ring, direct, rabenseifner and dbtree: FusedBlocks);
  // 0 (the default), one after the other.
  virtual int FusedBlocks() const { return 0; }

  // A short description for logs and summaries, e.g. "allreduce:ring" or "mpi".
  virtual std::string name() const = 0;

  // Bytes this reducer has sent from this rank so far, and how they were counted: "transport"
  // when counted by Transport::bytes_sent() where they were sent, or "model:<algorithm>" when
  // the bytes left through a path frugal cannot observe (MPI's own collectives) and are the bytes
  // the named standard algorithm sends.
  virtual uint64_t bytes_sent() const = 0;
  virtual std::string bytes_counted_by() const = 0;

  // The state the reducer keeps from one step to the next (compressor state, error-feedback
  // residuals, worker momentum), for checkpoints (state_visitor.h). On the thread that owns the
  // reducer, between reductions. The dense reducers keep none.
  virtual void VisitState(StateVisitor& visitor) {}
};

// The dense reducer: exact average of every bucket.
//   algorithm "ring", "rd", "rabenseifner", "tree", "dbtree", "hier", "torus": frugal's Allreduce
//   over `t` (see collectives.h), bytes counted by the transport.
//   algorithm "mpi": MPI_Allreduce (non-blocking, polled until `timeout`) on a duplicate of the
//   MPI communicator of the job; needs MPI initialised and `t` to span MPI_COMM_WORLD in rank
//   order (kFailedPrecondition otherwise). Bytes are those of the ring algorithm,
//   2 (n-1)/n * 4 * count per bucket, reported as "model:ring".
//   algorithm "gloo" or "gloo:ring_chunked", "gloo:halving_doubling": Gloo's all-reduce
//   (frugal/gloo.h) over its own TCP pairs in GlooMode::kAsync, connected through `t` when the
//   reducer is made (collective), every wait bounded by `timeout`; kFailedPrecondition in a
//   build without Gloo. Each bucket goes through a staging buffer per bucket length. Bytes as for
//   "mpi" ("model:ring"; halving_doubling sends more on a non-power-of-two number of ranks).
// `t` must outlive the reducer. Unknown algorithm: kInvalidArgument.
struct DenseReducerOptions {
  std::string algorithm = "ring";
  Duration timeout = kDefaultTimeout;
  // Passed to frugal's Allreduce (algorithm, op and timeout are set by the reducer).
  AllreduceOptions allreduce;
};
StatusOr<std::unique_ptr<GradientReducer>> MakeDenseReducer(Transport& t,
                                                            const DenseReducerOptions& options);

// Names accepted by MakeDenseReducer, for help texts: frugal's algorithms, then "mpi", then, in a
// build with Gloo, "gloo", "gloo:ring_chunked" and "gloo:halving_doubling".
std::vector<std::string> DenseReducerAlgorithms();

// Whether a name of DenseReducerAlgorithms() is another library's all-reduce (MPI_Allreduce,
// Gloo), which moves its bytes outside frugal's transport.
bool IsLibraryAllreduce(std::string_view algorithm);

// The frugal algorithm whose messages stand for those of a dense reducer algorithm in cost
// models: itself for frugal's, ring for "mpi" and Gloo's ring_chunked, rabenseifner for Gloo's
// halving_doubling. kInvalidArgument for an unknown name.
StatusOr<AllreduceAlgorithm> ModelAllreduceAlgorithm(std::string_view algorithm);

}  // namespace frugal
