// The communication engine: one background thread per rank that owns the transport and the
// gradient reducer, and through which every gradient of a training step is averaged (Horovod's
// background loop, PyTorch DDP's reducer, BytePS/ByteScheduler's scheduler).
//
// Threads submit named float buffers (Submit) as the framework produces them - from gradient
// hooks during backward (wait-free backpropagation) - and wait on the returned Work handles. The
// communication thread:
//  - negotiates: ranks may submit in different orders, so before moving a tensor every rank
//    learns which tensors are ready on every rank. In each negotiation cycle every rank reports
//    to the coordinator (rank 0) a bit vector over a cache of known tensors plus the full
//    description (name, shape, dtype, priority) of tensors not yet in the cache or submitted with
//    another description; the coordinator decides and sends every rank the same decision
//    (Horovod's coordinator: 2 (n - 1) messages per cycle). A tensor is reduced once every rank
//    has submitted it with the same description. A tensor submitted with
//    another shape or dtype than on the other ranks fails on every rank (kInvalidArgument naming
//    the tensor, the ranks and the difference) as soon as every rank has submitted it; when every
//    rank is blocked waiting and the ranks' pending sets differ (different names), every pending
//    tensor fails on every rank naming which ranks submitted what.
//  - fuses: ready tensors are packed into buckets up to a byte threshold (FusionPolicy::kCycle,
//    Horovod: what is ready in a cycle, one cycle every `cycle_time`), or into the groups of a
//    merge plan that the MG-WFBP policy computes from the measured backward timing and the
//    alpha/beta model of reduction times fitted on the engine's own reductions (kMgWfbp).
//  - schedules: in submission order (kFifo) or by priority (kPriority, P3/ByteScheduler: tensors
//    split into partitions of `partition_bytes`, lower priority value first - the layer index
//    counted from the input - renegotiating between partitions so that a tensor of a layer nearer
//    the input overtakes the partitions of later layers still queued).
//  - reduces each bucket with the GradientReducer (dense all-reduce, MPI_Allreduce, compressing
//    reducers) and completes the Work of every tensor whose values have all been reduced.
//  - inspects stalls: a tensor that some ranks have submitted and others have not for longer than
//    `stall_warning` is reported (once, by the coordinator) naming the ranks and tensors; after
//    `stall_shutdown` (if set), or after `timeout` while the ranks without it keep negotiating,
//    the engine fails every pending tensor with kTimeout on every rank.
//  - fails as a whole: an error (a timeout, a reducer's error, a malformed message) or an exception
//    on the engine thread (a compressor's failed check, bad_alloc, a throwing on_stall) fails every
//    pending and later Work with that Status, and the engine tells its peers (at once, bounded by
//    200 ms in all), which fail with the same code and a message naming the rank and the cause as
//    soon as they next negotiate or a reduction with the failed rank times out.
//  - runs other collectives (Call): evaluation, metric exchange, broadcasts, so that no other
//    thread needs the transport after start-up.
//
// Determinism: every rank executes the same reductions in the same order with the same bucket
// contents (decided from the coordinator's decisions, the same on every rank), so parameters stay
// identical across ranks. The composition of buckets under kCycle fusion, kMgWfbp and kPriority
// scheduling depends on when tensors became ready, and where an element lies in a bucket fixes the
// order of its additions; so a bucket of several tensors or partitions is laid out as the reducer
// asks (GradientReducer::FusedBlocks, BucketInfo::fused_blocks) and a partition alone is told its
// place in its tensor: with frugal's ring, direct, rabenseifner and dbtree every tensor then ends
// with the bits of its own all-reduce, whatever it was fused with or cut into, in every run.
//
// Thread safety: Submit, Call, stats and the Work handles may be used from any thread. After
// Start returns, the transport and the reducer belong to the engine's thread until Shutdown
// returns. A buffer given to Submit must stay valid and untouched until its Work completes (or
// Shutdown returns, after a Wait that timed out).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/cost_model.h"
#include "frugal/logging.h"
#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/timeline.h"
#include "frugal/transport.h"
#include "frugal/work.h"

namespace frugal {

class PhaseRecorder;

// How a training loop overlaps gradient communication with computation (`--overlap`):
//   none      all gradients are submitted after backward, in buckets, and waited for at once
//   wfbp      each gradient is submitted by its hook as backward produces it (wait-free
//             backpropagation) and reduced on its own, in submission order
//   fusion    as wfbp, with tensor fusion (FusionPolicy::kMgWfbp by default)
//   priority  as wfbp, with priority scheduling and partitioning (P3 / ByteScheduler); the next
//             forward of layer i starts as soon as layer i is updated
enum class OverlapMode { kNone, kWfbp, kFusion, kPriority };
std::string_view OverlapModeName(OverlapMode mode);
StatusOr<OverlapMode> ParseOverlapMode(std::string_view name);  // kInvalidArgument lists names

enum class FusionPolicy {
  kOff,     // every tensor (or partition) is reduced on its own
  kCycle,   // Horovod: the tensors that became ready in a cycle, packed up to the threshold
  kMgWfbp,  // MG-WFBP: merge groups planned from the backward timing and the alpha/beta model
};
std::string_view FusionPolicyName(FusionPolicy policy);  // off, cycle, mgwfbp
StatusOr<FusionPolicy> ParseFusionPolicy(std::string_view name);

enum class SchedulePolicy { kFifo, kPriority };

// Horovod's defaults: a 1 ms cycle and a 64 MB fusion buffer. ByteScheduler's partition: 4 MB.
inline constexpr Duration kDefaultCycleTime = std::chrono::milliseconds(1);
inline constexpr size_t kDefaultFusionThresholdBytes = size_t{64} << 20;
inline constexpr size_t kDefaultPartitionBytes = size_t{4} << 20;

// Reported by the stall inspector.
struct StallReport {
  std::string tensor;
  std::vector<int> submitted;  // ranks that have submitted the tensor
  std::vector<int> missing;    // ranks that have not
  double seconds = 0;          // since the coordinator first saw it pending
  bool shutdown = false;       // true for the report that shuts the engine down
  // "tensor 'fc.weight' submitted by ranks 0, 2, 3 but not by rank 1 for 61.0 s".
  std::string ToString() const;
};

struct EngineOptions {
  // A negotiation cycle runs at most once per cycle_time while tensors wait for their peers.
  Duration cycle_time = kDefaultCycleTime;
  FusionPolicy fusion = FusionPolicy::kOff;
  // Largest bucket, in bytes of float data (kCycle and kMgWfbp). A larger tensor is reduced alone.
  size_t fusion_threshold_bytes = kDefaultFusionThresholdBytes;
  SchedulePolicy schedule = SchedulePolicy::kFifo;
  // kPriority: tensors are split into partitions of at most this many bytes, and small ready
  // tensors are packed together up to it (0: no partitioning or packing).
  size_t partition_bytes = kDefaultPartitionBytes;
  // kMgWfbp: steps (generations of every tensor) observed before the plan is made; the first
  // `mgwfbp_warmup_steps` are not used for timing. Until then tensors are reduced on their own.
  int mgwfbp_warmup_steps = 1;
  int mgwfbp_profile_steps = 2;
  // kMgWfbp: alpha (seconds per reduction) and beta (seconds per byte) of one reduction. Absent:
  // fitted by least squares on the (bytes, seconds) of the reductions of the profiled steps.
  std::optional<CostParams> reduction_cost;
  // Bounds every wait for peers: the coordinator fails a cycle with kTimeout naming the ranks
  // whose report did not come within it and the pending tensors; the other ranks wait twice as
  // long for its decision (so that its failure, naming the silent ranks, reaches them first).
  Duration timeout = kDefaultTimeout;
  // The stall inspector and the timeout watch the same thing: a rank that does not submit a tensor
  // its peers have submitted does not answer their negotiation, so after `timeout` the job ends
  // with kTimeout anyway. A stall warning or shutdown is therefore only seen when it is shorter
  // than `timeout`: Start refuses (kInvalidArgument) a nonzero stall_warning or stall_shutdown
  // that is not. By default the warning comes at half the timeout, naming the missing ranks while
  // there is still time to look at them; Engine::options() shows the value in use.
  std::optional<Duration> stall_warning;       // absent: timeout / 2; zero: no warning
  Duration stall_shutdown = Duration::zero();  // zero: never shut down
  // Called on the engine thread for each stall report; by default reports are logged as warnings.
  std::function<void(const StallReport&)> on_stall;
  // Fail every pending tensor when every rank is waiting and no tensor is ready everywhere (the
  // ranks submitted different names). Assumes the threads that wait are the ones that submit.
  bool detect_unmatched = true;
  // Nice value of the engine thread (Linux; lower is more urgent, below 0 needs CAP_SYS_NICE).
  // Where ranks share cores with computation, a more urgent engine thread answers its peers
  // sooner. 0: unchanged.
  int thread_nice = 0;
  Logger logger;
  // Records queue/negotiate/compress/communicate/decompress phases; must outlive the engine.
  Timeline* timeline = nullptr;
  // Where the reducer's compressors report encode and decode (engine_phases.h), drawn in the
  // timeline; without it a whole reduction is "communicate". Must outlive the engine.
  PhaseRecorder* phases = nullptr;
};

// What a rank submits with a buffer.
struct TensorRequest {
  std::string name;
  std::vector<int64_t> shape;  // its product must equal the buffer's length; empty: flat
  std::string dtype = "float32";
  int priority = 0;   // kPriority: lower goes first (the layer index counted from the input)
  uint64_t step = 0;  // the training step, handed to the reducer in BucketInfo::step
};

struct EngineStats {
  uint64_t cycles = 0;      // negotiation cycles
  uint64_t reductions = 0;  // calls of the reducer (buckets)
  uint64_t tensors = 0;     // tensors completed
  uint64_t bytes_reduced = 0;
  // Bytes of negotiation messages this rank sent (counted where sent; they also appear in
  // Transport::bytes_sent()).
  uint64_t negotiation_bytes = 0;
  double comm_seconds = 0;       // engine thread inside the reducer
  double exposed_seconds = 0;    // part of comm_seconds while some thread waited on a tensor
  double negotiate_seconds = 0;  // engine thread in negotiation cycles
  // 1 - exposed/comm: the share of communication time that ran while no thread waited for it
  // (during computation). 0 when nothing was communicated.
  double hidden_fraction() const;
  // kMgWfbp: the alpha/beta used for the plan, and the plan (tensor names per group, in the order
  // backward produces them); empty before the plan is made.
  std::optional<CostParams> reduction_cost;
  std::vector<std::vector<std::string>> merge_plan;
};

// What a training loop's adapter submits its gradients to: the communication engine below, which
// replaces each buffer by the average over the workers, or a parameter-server client
// (parameter_server.h), which pushes the gradient to the servers that run the optimizer and
// replaces the buffer by the parameters they answer with. The adapter applies what comes back as
// result() says. Thread safety and lifetimes are the engine's (below).
class TensorExchange {
 public:
  enum class Result {
    kAverage,     // the buffer holds the averaged gradient; the worker runs the optimizer
    kParameters,  // the buffer holds the parameter values to use from now on
  };
  virtual ~TensorExchange() = default;
  virtual Result result() const { return Result::kAverage; }
  virtual std::unique_ptr<Work> Submit(TensorRequest request, std::span<float> data) = 0;
  virtual std::unique_ptr<Work> Call(std::string name, std::function<Status(Transport&)> fn) = 0;
  virtual Status Shutdown() = 0;
  virtual EngineStats stats() const = 0;
};

class Engine final : public TensorExchange {
 public:
  // Collective over `t`: checks that every rank passes the same scheduling options
  // (kInvalidArgument on every rank naming the ranks that differ; kInvalidArgument at once for a
  // stall warning or shutdown not shorter than the timeout), aligns the timeline origin
  // with a barrier and starts the engine thread. `t` and `reducer` must outlive the engine and
  // are used only by the engine thread until Shutdown returns.
  static StatusOr<std::unique_ptr<Engine>> Start(Transport& t, GradientReducer& reducer,
                                                 EngineOptions options);
  ~Engine() override;  // Shutdown()

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues `data` for averaging across ranks (in place). Never blocks on the network. A name may
  // be submitted again before its previous submission completed; submissions of a name are
  // reduced in the order they were made. Invalid requests (shape product != data.size(), empty
  // name) throw CheckError. After a failure or Shutdown the Work fails at once with that status.
  std::unique_ptr<Work> Submit(TensorRequest request, std::span<float> data) override;

  // Runs `fn` with the transport on the engine thread once every tensor this rank submitted
  // before it has completed; tensors submitted after it wait until it has run. Collective calls
  // in `fn` need every rank to Call in the same order, as any collective.
  std::unique_ptr<Work> Call(std::string name, std::function<Status(Transport&)> fn) override;

  // Stops the engine thread: pending tensors fail with kCancelled. Returns the first error the
  // engine met (OK if none). Idempotent.
  Status Shutdown() override;

  EngineStats stats() const override;
  int rank() const;
  int size() const;
  const EngineOptions& options() const;

  class Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Sets the scheduling fields of `options` (fusion, schedule) for an overlap mode; kNone and
// kWfbp reduce tensors on their own in FIFO order, kFusion uses `fusion`, kPriority kPriority.
void ApplyOverlapMode(OverlapMode mode, EngineOptions& options,
                      FusionPolicy fusion = FusionPolicy::kMgWfbp);

}  // namespace frugal
