// Federated averaging (FedAvg, McMahan et al. 2017) simulated on the workers: the server side of
// a round and the clients' uploads, over named float buffers (no torch types here; frugal_torch's
// TrainFedAvg trains the clients).
//
// A run has K clients (SyncSpec::clients). Round r (0-based):
//   1. SampleClients draws m = ClientsPerRound(K, C) distinct clients from the stream
//      (seed, kAnyRank, r, "fedavg/clients"): the same on every rank, without communication;
//   2. client c is played by worker ClientRank(c, n) = c mod n, which keeps the client's state
//      (the error-feedback residual of its compressed uploads) from one round to the next;
//   3. every sampled client starts from the global model, trains, and uploads its model delta
//      x_c - x_global (AddUpload), compressed with the run's compressor when there is one; its
//      weight is its sample count n_c;
//   4. EndRound: one all-reduce over the workers of [sum_c n_c * upload_c, sum_c n_c] (each
//      worker's sums over the clients it played), then x_global += sum / weights on every worker,
//      so every worker ends the round with the same global model.
// Over a parameter server (CreateOverServers, --arch ps:servers=S) the servers hold the global
// model instead: at EndRound every worker pushes, for every tensor, -(its sum of n_c * upload_c)
// with the weight sum_c n_c (ParameterClient::SubmitWeighted; a worker that played no sampled
// client pushes empty headers of weight 0), each server sets its keys to x_global + (sum over the
// workers of the sums) / (sum of the weights) (ParameterServerConfig::weighted, plain SGD at rate
// 1), and every worker pulls the new global model. The first EndRound connects the client (worker
// 0's round-0 global model is the servers' initial values); from then on the client's thread owns
// the transports, and the round loop's own collectives go through Run.
//
// Bytes: a sampled client downloads the global model (download_bytes(), float32 parameters and
// float buffers) and uploads its delta (AddUpload returns the size: the compressor's encoded
// payloads, header included, for parameters of at least min_bytes, float32 for the rest). These
// are the bytes a deployment with one server would move; the all-reduce that sums the uploads
// across the workers of the simulation goes through frugal's transport and is counted by it
// (bytes_sent()).
//
// Thread safety: none; used by one thread, the one that owns the reducer's transport (EndRound);
// over servers, the transports belong to the client's thread from the first EndRound to Finish.
// All workers call BeginRound, EndRound in the same order; EndRound's waits are bounded by the
// reducer's timeout.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/parameter_server.h"
#include "frugal/reducer.h"
#include "frugal/status.h"
#include "frugal/strategy.h"

namespace frugal {

// max(1, round(fraction x clients)), rounding halves away from zero; clients >= 1.
int64_t ClientsPerRound(int64_t clients, double fraction);

// The clients of round `round`, ascending: ClientsPerRound(clients, fraction) distinct ids of
// [0, clients), uniformly drawn (partial Fisher-Yates) from (seed, kAnyRank, round,
// "fedavg/clients").
std::vector<int64_t> SampleClients(uint64_t seed, int64_t round, int64_t clients, double fraction);

// The worker that plays `client`: client mod workers.
int ClientRank(int64_t client, int workers);

class FederatedAveraging {
 public:
  // `plan.sync` must be FedAvg. `reducer` (MakeStrategyReducer's, exact) sums the uploads over
  // the workers and must outlive the result; `registry` makes the compressor of
  // plan.compressed (always with error feedback). kInvalidArgument for another sync, errors of
  // the registry otherwise.
  static StatusOr<std::unique_ptr<FederatedAveraging>> Create(const StrategyPlan& plan,
                                                              GradientReducer& reducer,
                                                              const CompressorRegistry& registry,
                                                              int rank, int workers);

  // The same over the parameter server of plan.arch (--arch ps:servers=S): `world` is the whole
  // job (servers included), `workers` the workers' group (this worker's rank and their count);
  // both must outlive the result. The servers run RunServerRole with the same plan.
  static StatusOr<std::unique_ptr<FederatedAveraging>> CreateOverServers(
      const StrategyPlan& plan, Transport& world, Transport& workers,
      const CompressorRegistry& registry);

  // SyncSpecName of the plan's sync, e.g. "fedavg:clients=32,fraction=0.25,local-epochs=1".
  std::string name() const { return SyncSpecName(spec_); }
  const SyncSpec& spec() const { return spec_; }
  // The compressor of the uploads (with error feedback), or nullptr: dense uploads.
  const Compressor* compressor() const { return compressor_.get(); }

  // SampleClients for this run's seed and spec.
  std::vector<int64_t> Sample(int64_t round) const;
  // Those of `sampled` this worker plays, in the order given.
  std::vector<int64_t> OwnClients(std::span<const int64_t> sampled) const;

  // Starts round `round` from `global` (the parameters and float buffers, identical on every
  // worker): keeps a copy and clears this worker's sums. The layout must not change between
  // rounds.
  void BeginRound(int64_t round, const ModelBuffers& global);
  // Writes the round's global model into `model` (before each client trains).
  void LoadGlobal(ModelBuffers& model) const;
  // `client`, played by this worker, returned `model` with `weight` > 0 (its sample count): its
  // delta to the global model is uploaded (compressed, with the client's residual) and added,
  // times weight, to this worker's sums. Returns the upload's size in bytes. Errors of the
  // compressor (kInvalidArgument).
  StatusOr<uint64_t> AddUpload(int64_t client, double weight, const ModelBuffers& model);
  // Bytes a sampled client downloads: the global model in float32.
  uint64_t download_bytes() const { return 4 * global_.size(); }

  // Collective over the workers (on the reducer's thread): the all-reduce of the sums, then
  // `model` = global + sum / weights on every worker. kFailedPrecondition if no client of the
  // round returned on any worker. Over servers: the pushes and the pull of the global model
  // (errors of the client: kTimeout naming the server, the servers' reasons).
  Status EndRound(ModelBuffers& model);

  // Runs `fn` with the workers' transport on the thread that owns it: `direct` here, or over
  // servers, once connected, the client's thread (bounded by twice the plan's timeout).
  Status Run(std::string_view what, const std::function<Status(Transport&)>& fn, Transport& direct);
  // Over servers: tells them this worker is done and stops the client (its first error, if any).
  // Otherwise nothing. Call once, after the last Run.
  Status Finish();
  // The ranks besides the workers whose files a checkpoint holds: the servers (0 without).
  int checkpoint_peers() const { return over_servers() ? config_.servers() : 0; }
  // Runs `save` (collective: the checkpoint of round `round`, every rank writing its file) between
  // rounds: over `direct` as Run does; over servers, on the client's thread over the whole job,
  // once every server joined (ParameterClient::Checkpoint: after the round's pulls, so the
  // servers' keys are the global model every worker holds). kFailedPrecondition over servers
  // before the first EndRound.
  Status RunCheckpoint(uint64_t round, const std::function<Status(Transport&)>& save,
                       Transport& direct);
  bool over_servers() const { return world_ != nullptr; }

  // Bytes the aggregates sent from this worker (counted as the reducer counts them).
  uint64_t bytes_sent() const { return bytes_sent_; }
  // Every client state this worker keeps, as "client/<id>/<tensor>" -> its residual.
  void VisitState(const std::function<void(std::string_view, std::span<float>)>& visit);
  // The same for checkpoints (state_visitor.h): the bytes sent so far and each client's
  // compressor state as "clients/<id>/<tensor>/<slot>/..."; loading makes the clients' contexts and
  // restores their state when their uploads first need it. Over servers also the parameter
  // client's ("ps_client/...": its clocks, versions and push bytes; ParameterClient::VisitState),
  // saved on the client's thread (inside RunCheckpoint) and restored once the next EndRound
  // connects. Between rounds.
  void VisitState(StateVisitor& visitor);

 private:
  FederatedAveraging(const StrategyPlan& plan, GradientReducer* reducer,
                     std::unique_ptr<Compressor> compressor, int rank, int workers);
  Status EndRoundOverServers(ModelBuffers& model);
  // The parameter's uploads go through the compressor (it has one and the tensor is at least
  // min_bytes large).
  bool Compressed(const NamedBuffer& parameter) const;

  SyncSpec spec_;
  uint64_t seed_;
  size_t min_bytes_;
  GradientReducer* reducer_;  // null over servers
  std::unique_ptr<Compressor> compressor_;
  int rank_;
  int workers_;
  int64_t round_ = 0;
  std::vector<float> global_;  // parameters, then float buffers
  std::vector<float> sums_;    // sum of weighted deltas, then the sum of weights
  std::vector<float> delta_;
  std::vector<float> decoded_;
  std::vector<std::byte> payload_;
  std::vector<std::string> compressed_names_;   // parameters that go through the compressor
  std::map<int64_t, CompressContext> clients_;  // by client id
  uint64_t bytes_sent_ = 0;
  // Over servers.
  Transport* world_ = nullptr;
  Transport* workers_transport_ = nullptr;
  ParameterServerConfig config_;
  std::vector<std::pair<std::string, size_t>> parts_;  // the global model's tensors, in order
  std::vector<float> exchange_;                        // the pushes, then the pulled model
  std::unique_ptr<ParameterClient> client_;
  StateRecords client_state_;  // loaded, for the client the next EndRound connects
};

}  // namespace frugal
