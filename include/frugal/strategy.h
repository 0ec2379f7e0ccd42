// Training strategies: how data-parallel replicas are kept in agreement.
//
// A strategy is the synchronization scheme (BSP, Local SGD, ...) on an architecture (all-reduce
// with one of frugal's algorithms or MPI's), with the gradient reducer (dense or compressed) and
// the overlap engine beneath it. The training loop (frugal_torch) runs the same step for every
// strategy and asks it, at fixed points of each step, what to do:
//
//   before forward     ActsBeforeForward(p): if so, BeforeForward(p, model, runner) may start an
//                      exchange of the model the step starts from or change it (gossip);
//                      AveragesGradients(p): are this step's gradients averaged across the
//                      workers (through the engine's hooks, queue, buckets, compressor) before the
//                      optimizer applies them, or does every worker apply its own gradient?
//   after the optimizer step
//                      ExchangesAfterStep(p): does the strategy exchange parameters now? If so the
//                      loop first applies every pending (deferred) update, then calls
//                      AfterOptimizerStep(p, model, runner), which averages parameters or
//                      parameter deltas in place;
//   end of an epoch    Settle(model, runner) completes every exchange still in flight; the loop
//                      evaluates; traits().identical_replicas tells whether the ranks'
//                      models are equal (one evaluation, split across ranks) or not (the averaged
//                      model is evaluated and the spread across ranks is reported).
//
// The model is seen as named float buffers (ModelBuffers): no torch types here. Who runs the
// optimizer is the strategy's decision (traits().worker_runs_optimizer); every strategy built so
// far lets the workers run it.
//
// Every state a strategy accumulates (the last averaged model, residuals of delta compression,
// gossip's copies and push-sum weights) is reachable through VisitState for checkpointing; after
// Settle it is whole (no exchange in flight). The reducer's own state (the compressors') is
// visited through GradientReducer::VisitState.
//
// Thread safety: a Strategy is used by the training thread; its exchanges run on the thread that
// owns the transport, through the TransportRunner the loop passes in. Every wait inside is bounded
// by the strategy's timeout. All workers call the same methods for the same steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/compressed_reducer.h"
#include "frugal/engine.h"
#include "frugal/gossip.h"
#include "frugal/logging.h"
#include "frugal/parameter_server.h"
#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/transport.h"

namespace frugal {

// Where in the run a step is. All counters are 0-based; `step` counts over the whole run.
struct StepPoint {
  uint64_t step = 0;
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t steps_per_epoch = 0;
};

struct StrategyTraits {
  // After every step every worker holds bit-identical parameters.
  bool identical_replicas = true;
  // The workers run the optimizer (false: servers apply the updates).
  bool worker_runs_optimizer = true;
  // The strategy has an exchange of its own (StartExchange), which the loop starts in the
  // engine's place.
  bool own_exchange = false;
  // What carries the training's exchanges when it is not the reducer ("ps:servers=2,...",
  // "gossip:..."); empty when the reducer does. The run's summary names it as its reduction:
  // the reducer then only averages drifting replicas for evaluation.
  std::string exchange;
};

// A float buffer of the model, by name. `data` stays valid for the whole run.
struct NamedBuffer {
  std::string name;
  std::span<float> data;
};

struct ModelBuffers {
  std::vector<NamedBuffer> parameters;  // trainable parameters, in registration order
  std::vector<NamedBuffer> buffers;     // float state that is not trained (batch-norm statistics)
  std::vector<NamedBuffer> momenta;     // the optimizer's momentum buffers (may be empty)
};

// Runs `fn` with the transport on the thread that owns it and returns its Status: directly on
// the calling thread before the engine starts, on the engine thread while it runs.
//
// RunInBackground queues `fn` on the transport's thread and returns at once, with a Work that
// completes with fn's Status (a strategy keeps its messages moving while the training thread
// computes: Open MPI moves a message only while some thread calls MPI). `fn` must end by itself
// within a bounded time, and what it uses must outlive the Work. Calls run in the order they were
// made, Run's included. A runner without a thread of its own (before the engine starts) returns
// nullptr: nothing runs in the background.
//
// RunAllowing: Run, for an exchange that may wait on peers still computing what this rank has
// just computed (each rank evaluates its own model before the exchange): the runner's wait for
// `fn` is its timeout plus `allowance`, which `fn`'s own waits must add too. Runners that run
// `fn` on the calling thread have no wait of their own (the default).
class TransportRunner {
 public:
  virtual ~TransportRunner() = default;
  virtual Status Run(std::string_view what, const std::function<Status(Transport&)>& fn) = 0;
  virtual Status RunAllowing(std::string_view what, const std::function<Status(Transport&)>& fn,
                             Duration allowance) {
    (void)allowance;
    return Run(what, fn);
  }
  virtual std::unique_ptr<Work> RunInBackground(std::string_view what,
                                                std::function<Status(Transport&)> fn) {
    (void)what, (void)fn;
    return nullptr;
  }
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // "bsp", "local:period=8", ... as given to the factory, normalised.
  virtual std::string name() const = 0;
  virtual StrategyTraits traits() const = 0;

  // Once, after the replicas were made identical and before the first step.
  virtual Status Begin(ModelBuffers& model) {
    (void)model;
    return Status::Ok();
  }

  // True when BeforeForward(p, ...) does anything.
  virtual bool ActsBeforeForward(const StepPoint& p) const {
    (void)p;
    return false;
  }
  // Before the forward pass of `p`, with every update of earlier steps applied: may start an
  // exchange of the model (completed by AfterOptimizerStep) or change the model. Collective over
  // the workers when the strategy's exchanges are.
  virtual Status BeforeForward(const StepPoint& p, ModelBuffers& model, TransportRunner& runner) {
    (void)p, (void)model, (void)runner;
    return Status::Ok();
  }
  // True when the gradients of step `p` are averaged across workers before the optimizer step.
  virtual bool AveragesGradients(const StepPoint& p) const = 0;
  // True when AfterOptimizerStep(p, ...) exchanges anything.
  virtual bool ExchangesAfterStep(const StepPoint& p) const = 0;
  // After the optimizer step of `p`, with every update of `p` applied: exchanges parameters (or
  // their deltas) if the strategy does so at `p`. Collective over the workers.
  virtual Status AfterOptimizerStep(const StepPoint& p, ModelBuffers& model,
                                    TransportRunner& runner) = 0;

  // Strategies whose workers run at their own pace (a parameter server's ssp, asp and backup)
  // share each epoch among the workers: the loop ends an epoch when EpochDone(end) says that the
  // workers together took `end` steps each (end: the epoch's nominal end, steps per worker as
  // StepPoint::step counts them from the start of the run), whatever this worker's own count; a
  // worker faster than the others goes round its shard again. Thread safe.
  virtual bool SharesEpochs() const { return false; }
  virtual bool EpochDone(uint64_t end) const {
    (void)end;
    return false;
  }

  // Completes every exchange still in flight, so that the model is this rank's whole model
  // (before an evaluation, at the end of the run). Every worker calls it after the same step
  // (after the same epoch, when SharesEpochs()).
  virtual Status Settle(ModelBuffers& model, TransportRunner& runner) {
    (void)model, (void)runner;
    return Status::Ok();
  }

  // Payload bytes the strategy's own exchanges sent from this rank (counted by the transport, or
  // by the reducer's model where MPI's collectives send them).
  virtual uint64_t bytes_sent() const = 0;

  // Numbers for the run's summary, by name (the gossip graph's spectral gap, ...).
  virtual void Report(
      const std::function<void(std::string_view name, double value)>& report) const {
    (void)report;
  }

  // Every piece of state the strategy keeps across steps, by name (for checkpointing).
  virtual void VisitState(
      const std::function<void(std::string_view name, std::span<float>)>& visit) {
    (void)visit;
  }

  // The strategy's state for checkpoints, through a StateVisitor (state_visitor.h): what a resume
  // restores for the run to continue bit for bit. Checkpoints call this one, on the thread that
  // owns the transport, between steps, after Begin; loading overwrites the state in place.
  // The default hands every buffer of the overload above to visitor.Floats, so a strategy whose
  // state is float buffers that exist, with their final size, from Begin on needs nothing else.
  // A strategy that keeps more - counters, clocks, versions, buffers whose size the run decides,
  // state made on demand - overrides this one instead: visitor.U64/I64/F64 for numbers,
  // FloatVector for buffers that the saved state sizes, Scope/Children/TakeSubtree for state made
  // on demand (CompressContext::VisitState does this for per-tensor compressor state).
  virtual void VisitState(StateVisitor& visitor) {
    VisitState([&](std::string_view name, std::span<float> data) { visitor.Floats(name, data); });
  }

  // Ranks of the job that are not workers but keep state of the run (the parameter server's
  // servers: the last ranks of the world). A checkpoint then spans workers + these ranks, every
  // rank writing its own file; the workers' ranks in it are their ranks among the workers.
  virtual int checkpoint_peers() const { return 0; }
  // Runs `save` (the checkpoint of `step`: every rank writes its file and the set is committed,
  // collective over the transport it is given) on the thread that owns the transport, between
  // steps, after Settle. The default runs it through `runner` over the workers; a strategy with
  // checkpoint_peers() > 0 runs it over the whole job once its peers joined the same step.
  virtual Status RunCheckpoint(uint64_t step, TransportRunner& runner,
                               const std::function<Status(Transport&)>& save) {
    (void)step;
    return runner.Run("checkpoint", save);
  }

  // Strategies whose workers do not run the optimizer (traits().worker_runs_optimizer false) have
  // an exchange of their own, which the loop submits every gradient to in place of the
  // communication engine, and which answers with the parameters to use (TensorExchange::Result::
  // kParameters). Called once, after Begin, on the thread that owns the transports; the exchange
  // owns them until it is shut down, and is owned by the strategy. `timeline` (may be null)
  // records its events. nullptr: the strategy's gradients go through the engine.
  virtual StatusOr<TensorExchange*> StartExchange(Timeline* timeline) {
    (void)timeline;
    return nullptr;
  }
};

// What carries the training's exchanges, as the run's start line and its summary name it: the
// strategy's own exchange (traits().exchange: "ps:servers=2,shard-mb=4", "gossip:..."), else the
// reducer ("allreduce:ring", ...).
std::string ExchangeName(const Strategy& strategy, const GradientReducer& reducer);

// ---- Specifications and the factory --------------------------------------------------------

enum class ArchKind { kAllreduce, kGossip, kParameterServer };
// The parameter server's largest key by default, in MB (2^20 bytes). Small keys let a server
// answer the first parts of a tensor while the last ones still arrive, so that its NIC carries
// pushes in and answers out at the same time (docs/performance.md, "Key size").
inline constexpr double kDefaultShardMb = 0.125;
struct ArchSpec {
  ArchKind kind = ArchKind::kAllreduce;
  std::string algorithm = "ring";  // DenseReducerAlgorithms(): frugal's or "mpi"
  GossipSpec gossip;               // kGossip (frugal/gossip.h)
  // kParameterServer (parameter_server.h): the last `servers` ranks serve keys of at most
  // shard_mb MB; the others are workers.
  int servers = 0;
  double shard_mb = kDefaultShardMb;
};

enum class SyncKind { kBsp, kLocal, kFedAvg, kAsp, kSsp, kBackup, kLag };
struct SyncSpec {
  SyncKind kind = SyncKind::kBsp;
  // kLocal: average the parameters every `period` local steps; BSP gradient averaging before
  // `start_epoch` (post-local SGD; 0: local from the first step); with intra_period > 0, average
  // within each host every intra_period steps as well (hierarchical Local SGD).
  int64_t period = 1;
  int64_t start_epoch = 0;
  int64_t intra_period = 0;
  bool average_buffers = true;   // batch-norm statistics averaged with the parameters
  bool average_momenta = false;  // the optimizer's momentum buffers averaged too
  // kLocal over all-reduce: the average of the model taken at local step kH runs while the
  // workers compute local steps kH+1 .. (k+1)H, and is applied at (k+1)H as x = avg + (x - x_kH)
  // (CoCoD-SGD, Shen et al. 2019; Overlap Local SGD, Wang et al. 2020).
  bool overlap = false;
  // kFedAvg (include/frugal/fedavg.h): `clients` simulated clients, max(1, round(fraction x
  // clients)) of them sampled per round, each training `local_epochs` epochs of its shard, or
  // exactly `local_steps` steps when local_steps > 0; a partition must give every client at least
  // `min_samples` samples (0: one batch).
  int64_t clients = 0;
  double fraction = 1.0;
  int64_t local_epochs = 1;
  int64_t local_steps = 0;
  int64_t min_samples = 0;
  // Over a parameter server (frugal/parameter_server.h): kSsp's bound, kBackup's backup workers,
  // kLag's rule.
  int64_t staleness = 0;
  int64_t backup_workers = 0;
  LagOptions lag;
};

// "allreduce", "allreduce:ALGO", "gossip[:ITEMS]" (frugal/gossip.h) or
// "ps:servers=S[,shard-mb=M]". kInvalidArgument naming what is accepted.
StatusOr<ArchSpec> ParseArchSpec(std::string_view spec);
// "bsp" | "asp" |
// "local:period=H[,start-epoch=E][,intra-period=h][,buffers=0|1][,momenta=0|1][,overlap=0|1]" |
// "fedavg:clients=K[,fraction=C][,local-epochs=E|,local-steps=S][,min-samples=M]" |
// "ssp:staleness=S" | "backup:workers=B" | "lag[:window=D][,xi=X][,max-skip=C]".
// kInvalidArgument naming what is accepted.
StatusOr<SyncSpec> ParseSyncSpec(std::string_view spec);
std::string ArchSpecName(const ArchSpec& spec);
std::string SyncSpecName(const SyncSpec& spec);

// Everything that chooses a strategy, as the command line, a sweep or a binding gives it.
struct StrategyOptions {
  std::string arch = "allreduce:ring";
  std::string sync = "bsp";
  // Compression of what the strategy exchanges (gradients under BSP, model deltas under Local
  // SGD); empty: dense.
  std::string compress;
  bool error_feedback = false;
  bool worker_momentum = false;
  size_t compress_min_bytes = 65536;
  std::string aggregate = "auto";
  // --arch ps: the compression of the servers' answers (with the servers' error feedback);
  // `compress` and `error_feedback` are those of the pushes. Empty: dense.
  std::string compress_pull;
  // The optimizer as asked for; DGC, Signum and worker momentum take its momentum over.
  double momentum = 0;
  bool nesterov = false;
  // False when the learning rate is the command line's default, which the plan may replace
  // (the sign votes: StrategyPlan::lr).
  bool lr_given = true;
  // The engine's one-step delay and compute-only modes.
  bool od_sgd = false;
  bool skip_comm = false;
  // Ranks per emulated host (0: by host name), for hierarchical Local SGD.
  int ranks_per_host = 0;
  // The number of workers, when known (0: the rules that depend on it, such as a gossip graph's,
  // are checked by MakeStrategy).
  int workers = 0;
  // What a parameter server does with stale updates under ssp and asp: "none", "drop:T" (drop
  // those of staleness above T) or "scale" (learning rate / staleness).
  std::string staleness_policy = "none";
  uint64_t seed = 0;
  Duration timeout = kDefaultTimeout;
};

// What the factory decided: the parsed parts and what the optimizer must be.
struct StrategyPlan {
  ArchSpec arch;
  SyncSpec sync;
  // Unset: the dense reducer. FedAvg: the compression of each client's upload; gossip: of the
  // gossip messages (choco, dcd, ecd). The reducer of both is dense.
  std::optional<CompressedReducerOptions> compressed;
  bool dgc = false;  // the compressor is DGC (momentum moved)
  double optimizer_momentum = 0;
  bool optimizer_nesterov = false;
  // The learning rate the plan chose because none was given (sign votes); unset otherwise.
  std::optional<double> lr;
  bool od_sgd = false;
  bool skip_comm = false;
  int ranks_per_host = 0;
  uint64_t seed = 0;  // of the strategy's own random choices (FedAvg's client sampling)
  Duration timeout = kDefaultTimeout;
  StalenessPolicy staleness_policy = StalenessPolicy::kNone;
  uint64_t drop_above = 0;
  // --arch ps: the compressor specs of the pushes (with the workers' error feedback when
  // push_error_feedback) and of the pulls; empty: dense.
  std::string push_compress;
  bool push_error_feedback = false;
  std::string pull_compress;
  // Options the plan added on its own, as flags ("--aggregate allgather", "--worker-momentum",
  // "--ef", "--lr 0.001"): the defaults of 1-bit compressors and sign votes (strategy_plan.cc).
  // Empty when none were.
  std::vector<std::string> implied;
};

// Checks every rule about which options combine and returns the plan; kInvalidArgument (or
// kNotFound for an unknown compressor) with one line naming what is accepted otherwise.
StatusOr<StrategyPlan> PlanStrategy(const StrategyOptions& options);

// The reducer the plan's exchanges go through, over `workers`. `steps_per_epoch` completes DGC's
// warm-up; `registry` makes the compressors (the default registry, or one that times them).
// FedAvg's aggregate is exact (its compressor works on each client's upload, fedavg.h): dense.
StatusOr<std::unique_ptr<GradientReducer>> MakeStrategyReducer(const StrategyPlan& plan,
                                                               Transport& workers,
                                                               int64_t steps_per_epoch,
                                                               const CompressorRegistry& registry);

// The strategy of the plan. `reducer` (from MakeStrategyReducer) carries its exchanges; it and
// `workers` must outlive the strategy. kInvalidArgument if the plan cannot run (FedAvg runs in
// its own loop and is not a per-step strategy).
// Architectures with servers need `world`, the transport of the whole job (the workers' group is
// split from it), on a worker rank.
StatusOr<std::unique_ptr<Strategy>> MakeStrategy(const StrategyPlan& plan, Transport& workers,
                                                 GradientReducer& reducer,
                                                 Transport* world = nullptr);

// ---- Roles ----------------------------------------------------------------------------------

enum class Role { kWorker, kServer };

// Which rank plays which role. Workers train; servers (for architectures that have them) do not.
struct RoleAssignment {
  std::vector<Role> roles;  // by world rank
  Role mine = Role::kWorker;
  int workers = 0;
  bool all_workers() const { return workers == static_cast<int>(roles.size()); }
};

// The roles `arch` gives the ranks of a world of `world_size`: with a parameter server the last
// `servers` ranks are servers, the others workers.
RoleAssignment AssignRoles(const ArchSpec& arch, int world_size, int rank);
// Whether the plan can run on `world_size` ranks (a parameter server needs a worker besides its
// servers, ...): kInvalidArgument with one line otherwise.
Status CheckWorldSize(const StrategyPlan& plan, int world_size);

// A server rank's part of the run: serves the workers until they are done or the job fails
// (RunParameterServer), with `optimizer` (the loop's SGD and learning-rate schedule).
// `checkpoints` (optional, must outlive the call): the server's part of the run's checkpoints.
Status RunServerRole(Transport& world, const StrategyPlan& plan, const ServerOptimizer& optimizer,
                     const Logger& logger, const ServerCheckpointHooks* checkpoints = nullptr);

// The transport of this rank's role group: `world` itself when every rank is a worker, otherwise
// a Split of it by role (collective over `world`; the result must not outlive it).
struct RoleGroup {
  Transport* transport = nullptr;    // the group to use
  std::unique_ptr<Transport> owned;  // set when split
};
StatusOr<RoleGroup> JoinRoleGroup(Transport& world, const RoleAssignment& roles, Duration timeout);

}  // namespace frugal
