// The parameter server: S server ranks hold the model's parameters, cut into keys
// (src/ps/sharding.h), and run the optimizer; W worker ranks push gradients and pull parameters
// (Li et al. 2014, ps-lite; BytePS's partitioning of keys).
//
// Roles: the ranks in ParameterServerConfig::server_ranks run RunParameterServer, the ranks in
// worker_ranks train with a ParameterClient. Every rank must pass the same configuration (the
// workers' hello carries its text, Describe(), and a server refuses a worker whose text differs).
//
// Protocol (messages.h; tags kParameterServerTags[0] worker -> server, [1] server -> worker):
//  - start: every worker sends every server a hello (its tensors and configuration); worker 0
//    also sends the initial value of every key the server holds. A server welcomes the workers
//    once every worker's hello (all naming the same tensors and configuration) and every initial
//    value are in.
//  - each step, for each key: the worker pushes its gradient (tagged with the step and the
//    version of the parameters it was computed on) and asks for the parameters back; the server
//    answers when the consistency model allows (see PsConsistency), with the key's version.
//  - heartbeats both ways while nothing else is sent; a worker ends with done, a server's loop
//    ends when every worker is done.
// Failures: every wait is bounded. A server fails (and tells every worker why, naming the ranks
// and keys) when a pull has been held for `timeout` waiting for pushes that do not come, or when a
// worker has sent nothing for `timeout`; a worker fails when a server has sent nothing for
// `timeout`, or a pull is not answered within twice the timeout (so that a server's message
// naming the missing ranks arrives first). No exception escapes the client's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/engine.h"
#include "frugal/logging.h"
#include "frugal/state_visitor.h"
#include "frugal/status.h"
#include "frugal/timeline.h"
#include "frugal/transport.h"

namespace frugal {

// When a server applies pushes and answers pulls (per key; `version` counts the key's updates, a
// worker's `clock` the pushes the server received from it):
//   kBsp     waits for the push of every worker for the current version, applies their average
//            once and answers each worker's pull of that version exactly once;
//   kSsp     applies every push as it arrives (1/W of an update: W fresh pushes are one BSP step
//            of plain SGD) and holds a pull until the slowest worker's clock is at least the
//            puller's clock minus `staleness` (Ho et al. 2013); staleness 0 sees what BSP sees;
//   kAsp     applies every push as it arrives and answers pulls at once (SSP without a bound);
//   kBackup  applies the average of the first W - `backup` pushes of the current version and
//            drops the later ones, and any push computed on an older version (Chen et al. 2016,
//            TensorFlow's SyncReplicasOptimizer); counted per worker;
//   kLag     waits, as kBsp, for every worker's push of the version, but a push may be a skip (the
//            worker's gradient changed too little, LAG-WK of Chen et al. 2018): the server applies
//            the average of every worker's last uploaded gradient.
enum class PsConsistency { kBsp, kSsp, kAsp, kBackup, kLag };

// LAG's worker-side rule for one key, at version v: the worker uploads its gradient g when
//   ||g - g_last||^2 > (xi / window) * sum_{d=1..window} ||gbar_{v-d}||^2,
// where g_last is its last upload and gbar_u the averaged gradient the server applied to make
// version u (the paper's (1 / (alpha^2 W^2)) ||x_{u+1} - x_u||^2 for plain gradient descent); at
// its first push, and after `max_skip` skips in a row, it uploads anyway.
struct LagOptions {
  int window = 10;
  double xi = 1.0;
  int max_skip = 10;
};

// What a server does with a stale update under kSsp and kAsp (staleness = the key's version when
// the push is applied minus the version the gradient was computed on):
//   kNone   applies it;  kDrop  drops it when staleness > drop_above (counted);
//   kScale  applies it with the learning rate divided by max(1, staleness).
enum class StalenessPolicy { kNone, kDrop, kScale };

// Everything the ranks of a parameter-server job agree on.
struct ParameterServerConfig {
  std::vector<int> worker_ranks;        // world ranks, in worker order (worker w = worker_ranks[w])
  std::vector<int> server_ranks;        // world ranks, in server order
  size_t part_bytes = size_t{4} << 20;  // largest key (BytePS's default partition)
  PsConsistency consistency = PsConsistency::kBsp;
  int staleness = 0;  // kSsp: the bound S
  int backup = 0;     // kBackup: B, 0 < B < W
  LagOptions lag;     // kLag
  StalenessPolicy staleness_policy = StalenessPolicy::kNone;
  uint64_t drop_above = 0;  // kDrop: the largest staleness applied
  // kBsp only: every push carries a weight (ParameterClient::SubmitWeighted), the sample count of
  // what it sums, and the update is the sum of the version's pushes divided by the sum of their
  // weights instead of by W; a push of weight 0 is empty (a header, no values: the worker has
  // nothing to add to this version) and is counted as skipped. FedAvg's aggregation.
  bool weighted = false;
  // Compression (src/ps/codec.h), empty specs for dense traffic. push_compress: a compressor spec
  // (CompressorRegistry) for the pushes; with push_error_feedback each worker keeps the residual
  // of every key (what compression dropped is added to its next push). pull_compress: the servers
  // answer with the change of the parameters since the version the workers hold, compressed, and
  // keep per key the workers' copy x_hat (x - x_hat is the servers' error-feedback residual,
  // DoubleSqueeze); every worker must pull every version (kBsp, kLag) and start from the same
  // parameters. Compressors that combine ranks' payloads (custom aggregation, majority vote)
  // cannot code a key on their own: Connect and RunParameterServer refuse them (kInvalidArgument).
  std::string push_compress;
  bool push_error_feedback = false;
  std::string pull_compress;
  uint64_t seed = 0;  // of the compressors' random streams
  Duration timeout = kDefaultTimeout;

  int workers() const { return static_cast<int>(worker_ranks.size()); }
  int servers() const { return static_cast<int>(server_ranks.size()); }
  // The configuration as text (consistency, servers, part size, ...), compared at the hello.
  std::string Describe() const;
};

// The optimizer the servers run on every key: torch's SGD (dampening 0),
//   d = g + weight_decay * x;  m = d at the first update, then momentum * m + d;
//   d = nesterov ? d + momentum * m : m  (momentum > 0);  x -= lr(server_step) * d,
// where g is the averaged gradient of the update and server_step (pushes the key received before
// the update's last one) / W, the key's version before the update under bsp. Under ssp and asp a
// push is applied alone as 1/W of an update: g and weight_decay are divided by W.
struct ServerOptimizer {
  std::function<double(int64_t server_step)> lr;
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// What the servers counted about one worker's pushes, over keys (and servers, once merged).
struct WorkerPushStats {
  uint64_t applied = 0;  // pushes whose gradient went into an update (lag: uploads)
  uint64_t dropped = 0;  // backup: late or computed on an older version; drop:T: too stale
  uint64_t skipped = 0;  // lag: pushes without a gradient
  // staleness[s]: applied pushes of staleness s (version at apply - version computed on); the
  // last entry counts kMaxStaleness and above. Empty until something was applied.
  std::vector<uint64_t> staleness;
  static constexpr uint64_t kMaxStaleness = 4096;

  void Count(uint64_t s);
  void Merge(const WorkerPushStats& other);
  // The smallest s with at least q of the applied pushes at or below s (q in [0, 1]); 0 when none.
  uint64_t Quantile(double q) const;
  uint64_t Max() const;
};

// What every server counted, merged: per worker, and each server's bytes.
struct ParameterServerStats {
  std::vector<WorkerPushStats> workers;  // by worker
  std::vector<uint64_t> bytes_in;        // by server: bytes received from workers
  std::vector<uint64_t> bytes_out;       // by server: bytes sent to workers
  // Over every key of every server: the pushes received (applied, dropped and skipped) and the
  // updates applied.
  uint64_t pushes = 0;
  uint64_t updates = 0;
  WorkerPushStats Total() const;
};

// What a server did, for reports and tests.
struct ServerReport {
  uint64_t bytes_in = 0;   // payload bytes received from workers
  uint64_t bytes_out = 0;  // payload bytes sent to workers (counted where sent)
  // Of which the training traffic (headers included): the pushes received and the answers with
  // parameters sent; the rest is the start, heartbeats, rests, statistics and done.
  uint64_t push_bytes_in = 0;
  uint64_t params_bytes_out = 0;
  uint64_t updates = 0;                  // optimizer updates applied, over all keys
  std::vector<WorkerPushStats> workers;  // this server's counts, by worker
  // The server's keys: their names and final parameters.
  std::vector<std::string> key_names;
  std::vector<std::vector<float>> key_values;
};

// kInvalidArgument (one line naming the flag and the spec) when the configuration's compression
// cannot run: a spec the registry refuses, a compressor that combines ranks' payloads, compressed
// pulls under ssp, asp or backup. Connect and RunParameterServer check the same.
Status CheckParameterServerCompression(const ParameterServerConfig& config);

// A server's part of the job's checkpoints (docs/checkpoints.md). `visit` visits the server's
// whole state (StateVisitor): every key's parameters, optimizer state, version, progress, updates
// and workers' clocks and kept gradients, the compression state (x_hat of compressed pulls, the
// push decoders' contexts), which workers rest, and the counts and bytes the statistics report.
struct ServerCheckpointHooks {
  // Called on the server's thread when every worker asked for the checkpoint of `step`
  // (ParameterClient::Checkpoint): every worker's pushes up to its step are applied and every
  // pull answered, no pull is held. Saves the state through `visit`, collective over `world` with
  // the workers' part of the same checkpoint; its error fails the server (and the job). Empty:
  // a checkpoint request is refused (kFailedPrecondition).
  std::function<Status(Transport& world, uint64_t step,
                       const std::function<void(StateVisitor&)>& visit)>
      save;
  // Called once every hello and initial value is in, before the workers are welcomed: restores
  // the state through `visit` (the initial values are then overwritten). Empty: a fresh start.
  std::function<Status(const std::function<void(StateVisitor&)>& visit)> resume;
};

// Runs the server loop of this rank (one of config.server_ranks) over `world` until every worker
// has sent done (OK) or the job fails (the Status names the ranks and keys; every worker is told).
// Blocks the calling thread, which owns `world` meanwhile. `report` (optional) receives what the
// server did; `checkpoints` (optional, must outlive the call) saves and resumes its state.
Status RunParameterServer(Transport& world, const ParameterServerConfig& config,
                          const ServerOptimizer& optimizer, const Logger& logger,
                          ServerReport* report = nullptr,
                          const ServerCheckpointHooks* checkpoints = nullptr);

struct ParameterClientOptions {
  Logger logger;
  Timeline* timeline = nullptr;  // pushes, pulls and waits; must outlive the client
};

// The worker side, a TensorExchange (engine.h) with Result::kParameters: Submit(request, data)
// pushes the gradient in `data` (request.name a parameter given to Connect, request.step the
// worker's step, request.priority the order: lower first) and completes when `data` holds the
// parameters the servers answered with. Its own thread owns `world` and `workers` from Connect
// until Shutdown; Call runs functions there with `workers`.
class ParameterClient final : public TensorExchange {
 public:
  // On the calling thread, which owns `world` and `workers` until it returns: hello (and, on
  // worker 0, the initial values of `parameters`) to every server, then every server's welcome
  // (kTimeout naming the servers that did not answer). Then the client's thread starts.
  // `parameters` are the model's trainable parameters in registration order, the same on every
  // worker; their values are read here only. `world` and `workers` must outlive the client.
  static StatusOr<std::unique_ptr<ParameterClient>> Connect(
      Transport& world, Transport& workers, const ParameterServerConfig& config,
      std::span<const std::pair<std::string, std::span<const float>>> parameters,
      ParameterClientOptions options = {});
  ~ParameterClient() override;

  Result result() const override { return Result::kParameters; }
  std::unique_ptr<Work> Submit(TensorRequest request, std::span<float> data) override;
  std::unique_ptr<Work> Call(std::string name, std::function<Status(Transport&)> fn) override;
  // Under ParameterServerConfig::weighted, the only submission it takes: as Submit, each key's
  // push carrying `weight` (finite, >= 0); with weight 0 the push is empty (a header without
  // values) and `data` only receives the answer.
  std::unique_ptr<Work> SubmitWeighted(TensorRequest request, std::span<float> data, double weight);
  // Sends done to every server and stops the thread; pending work fails with kCancelled.
  // Returns the first error the client met. Idempotent.
  Status Shutdown() override;
  // comm_seconds: while pushes wait for their pulls; negotiation_bytes: the control messages
  // sent after Connect (heartbeats, done), which the transport counts with the pushes.
  EngineStats stats() const override;
  // The bytes of the pushes (headers included), counted where sent: the training traffic to the
  // servers. Thread safe.
  uint64_t push_bytes() const;
  // The pushes per key every worker made together, as the servers last said (the smallest over
  // the keys): when it reaches steps x W, the workers together took `steps` steps. Thread safe.
  uint64_t progress() const;
  // After everything submitted before it: tells every server that this worker rests (evaluates)
  // until its next push, so that no pull waits for it meanwhile. Completes once sent.
  std::unique_ptr<Work> Rest();
  // After everything submitted before it: asks every server what it counted and merges the
  // answers into `out`, which must stay valid until the Work completes. A server answers a worker
  // that rests once every worker rests (so that every worker gets the same counts at the end of
  // an epoch), one that does not at once.
  std::unique_ptr<Work> FetchStats(ParameterServerStats* out);
  // After everything submitted before it (every pull answered): asks every server for the
  // checkpoint of `step`, then runs `save` with `world` on the client's thread. `save` is
  // collective over `world`: the servers join it once every worker asked for the same step
  // (ServerCheckpointHooks::save), so that the checkpoint is a cut at which every worker pushed
  // and pulled exactly its steps. Completes with save's Status; later commands wait for it.
  std::unique_ptr<Work> Checkpoint(uint64_t step, std::function<Status(Transport& world)> save);
  // The client's state (StateVisitor): per key the clock, the version and progress last pulled,
  // LAG's rule, the push compressor's context (error-feedback residuals) and the copy of the
  // parameters compressed pulls update; and the push bytes so far. Only on the client's thread:
  // inside a function given to Call or Checkpoint. Loading refuses another key layout.
  void VisitState(StateVisitor& visitor);

  class Impl;

 private:
  explicit ParameterClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal
