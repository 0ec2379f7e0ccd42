// The server side of a FedAvg round and the clients' uploads (see fedavg.h).
//
// Layout: the global model, every delta and the sums are one flat float vector, the parameters
// in order, then the float buffers; `sums_` has one more element, the sum of the weights.
//
// AddUpload(client, w, model): delta = flat(model) - global_. Each parameter tensor of at least
// min_bytes is, with a compressor, encoded with the client's own CompressContext (rank = the
// client id, world size = K, step = the round: its random streams and its error-feedback residual
// belong to the client, whichever worker plays it), and what the server adds is the decoded
// payload; the other tensors and the float buffers go as they are (float32). Then
// sums_ += w * upload and sums_.back() += w.
//
// EndRound: the reducer averages [sums_] over the workers, which divides the weighted sum and the
// weight by the same n, so x_global + avg(sums) / avg(weights) is the weighted average of the
// uploads. Every worker computes it from the same all-reduced values and the same global model:
// the replicas stay identical.
//
// Over servers, EndRoundOverServers: exchange_ = -sums_ (without the weight) is pushed tensor by
// tensor with the weight sums_.back(); each server adds the workers' pushes of a key in worker
// order, divides by the sum of the weights and applies it at rate 1, x_global - (-sum) / weights,
// and answers every worker with the key's new values, which become global_. With two workers this
// is the all-reduce's arithmetic exactly (a sum of two is the same in any order, and the ring's
// division of sum and weight by 2 is exact); with more, the float sums may be ordered differently.
// Every worker pulls the same values: the replicas stay identical.
#include "frugal/fedavg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "frugal/check.h"
#include "strategy/model_average.h"
#include "strategy/ps_strategy.h"

namespace frugal {
namespace {

using strategy_internal::Pack;
using strategy_internal::Unpack;

std::vector<NamedBuffer> ParametersAndBuffers(const ModelBuffers& model) {
  std::vector<NamedBuffer> all = model.parameters;
  all.insert(all.end(), model.buffers.begin(), model.buffers.end());
  return all;
}

}  // namespace

StatusOr<std::unique_ptr<FederatedAveraging>> FederatedAveraging::Create(
    const StrategyPlan& plan, GradientReducer& reducer, const CompressorRegistry& registry,
    int rank, int workers) {
  if (plan.sync.kind != SyncKind::kFedAvg) {
    return InvalidArgumentError(
        fmt::format("--sync {} is not federated averaging", SyncSpecName(plan.sync)));
  }
  std::unique_ptr<Compressor> compressor;
  if (plan.compressed) {
    FRUGAL_ASSIGN_OR_RETURN(compressor, registry.Create(plan.compressed->spec));
    if (compressor->inner() == nullptr) compressor = WithErrorFeedback(std::move(compressor));
  }
  return std::unique_ptr<FederatedAveraging>(
      new FederatedAveraging(plan, &reducer, std::move(compressor), rank, workers));
}

StatusOr<std::unique_ptr<FederatedAveraging>> FederatedAveraging::CreateOverServers(
    const StrategyPlan& plan, Transport& world, Transport& workers,
    const CompressorRegistry& registry) {
  if (plan.sync.kind != SyncKind::kFedAvg || plan.arch.kind != ArchKind::kParameterServer) {
    return InvalidArgumentError(
        fmt::format("--sync {} --arch {} is not federated averaging over "
                    "a parameter server",
                    SyncSpecName(plan.sync), ArchSpecName(plan.arch)));
  }
  std::unique_ptr<Compressor> compressor;
  if (plan.compressed) {
    FRUGAL_ASSIGN_OR_RETURN(compressor, registry.Create(plan.compressed->spec));
    if (compressor->inner() == nullptr) compressor = WithErrorFeedback(std::move(compressor));
  }
  ParameterServerConfig config = strategy_internal::ParameterServerConfigOf(plan, world.size());
  if (config.workers() != workers.size()) {
    return InvalidArgumentError(
        fmt::format("--arch {}: {} workers in a job of {} ranks, but the "
                    "workers' group has {}",
                    ArchSpecName(plan.arch), config.workers(), world.size(), workers.size()));
  }
  std::unique_ptr<FederatedAveraging> fedavg(
      new FederatedAveraging(plan, nullptr, std::move(compressor), workers.rank(), workers.size()));
  fedavg->world_ = &world;
  fedavg->workers_transport_ = &workers;
  fedavg->config_ = std::move(config);
  return fedavg;
}

FederatedAveraging::FederatedAveraging(const StrategyPlan& plan, GradientReducer* reducer,
                                       std::unique_ptr<Compressor> compressor, int rank,
                                       int workers)
    : spec_(plan.sync),
      seed_(plan.seed),
      min_bytes_(plan.compressed ? plan.compressed->min_bytes : 0),
      reducer_(reducer),
      compressor_(std::move(compressor)),
      rank_(rank),
      workers_(workers) {
  FRUGAL_CHECK(rank >= 0 && rank < workers, "rank ", rank, " of ", workers);
}

std::vector<int64_t> FederatedAveraging::Sample(int64_t round) const {
  return SampleClients(seed_, round, spec_.clients, spec_.fraction);
}

std::vector<int64_t> FederatedAveraging::OwnClients(std::span<const int64_t> sampled) const {
  std::vector<int64_t> own;
  for (int64_t c : sampled) {
    if (ClientRank(c, workers_) == rank_) own.push_back(c);
  }
  return own;
}

void FederatedAveraging::BeginRound(int64_t round, const ModelBuffers& global) {
  round_ = round;
  Pack(ParametersAndBuffers(global), global_);
  sums_.assign(global_.size() + 1, 0.0f);
  if (over_servers()) {
    parts_.clear();
    for (const NamedBuffer& b : ParametersAndBuffers(global)) {
      parts_.emplace_back(b.name, b.data.size());
    }
  }
  compressed_names_.clear();
  for (const NamedBuffer& p : global.parameters) {
    if (Compressed(p)) compressed_names_.push_back(p.name);
  }
}

bool FederatedAveraging::Compressed(const NamedBuffer& parameter) const {
  return compressor_ != nullptr && !parameter.data.empty() &&
         parameter.data.size() * sizeof(float) >= min_bytes_;
}

void FederatedAveraging::LoadGlobal(ModelBuffers& model) const {
  Unpack(global_, ParametersAndBuffers(model));
}

StatusOr<uint64_t> FederatedAveraging::AddUpload(int64_t client, double weight,
                                                 const ModelBuffers& model) {
  FRUGAL_CHECK(weight > 0, "client ", client, " has weight ", weight);
  FRUGAL_CHECK_EQ(ClientRank(client, workers_), rank_, "client ", client, " is not this worker's");
  Pack(ParametersAndBuffers(model), delta_);
  FRUGAL_CHECK_EQ(delta_.size(), global_.size(), "model layout changed within a round");
  for (size_t i = 0; i < delta_.size(); ++i) delta_[i] -= global_[i];
  uint64_t bytes = 4 * delta_.size();
  if (compressor_ != nullptr) {
    CompressContext& ctx =
        clients_
            .try_emplace(client, seed_, static_cast<int>(client), static_cast<int>(spec_.clients))
            .first->second;
    ctx.set_step(static_cast<uint64_t>(round_));
    size_t offset = 0;
    for (const NamedBuffer& p : model.parameters) {
      const size_t count = p.data.size();
      std::span<float> slice(delta_.data() + offset, count);
      offset += count;
      if (!Compressed(p)) continue;
      const TensorInfo tensor(p.name, count);
      FRUGAL_RETURN_IF_ERROR(compressor_->Encode(slice, tensor, ctx, payload_)
                                 .Annotate(fmt::format("client {} upload of {}", client, p.name)));
      decoded_.assign(count, 0.0f);
      FRUGAL_RETURN_IF_ERROR(compressor_->Decode(payload_, tensor, ctx, decoded_));
      std::copy(decoded_.begin(), decoded_.end(), slice.begin());
      bytes = bytes - 4 * count + payload_.size();
    }
  }
  const float w = static_cast<float>(weight);
  for (size_t i = 0; i < delta_.size(); ++i) sums_[i] += w * delta_[i];
  sums_.back() += w;
  return bytes;
}

Status FederatedAveraging::EndRound(ModelBuffers& model) {
  if (over_servers()) return EndRoundOverServers(model);
  BucketInfo bucket;
  bucket.name = "fedavg";
  bucket.count = sums_.size();
  bucket.step = static_cast<uint64_t>(round_);
  const uint64_t before = reducer_->bytes_sent();
  Status status = reducer_->Reduce(bucket, sums_);
  bytes_sent_ += reducer_->bytes_sent() - before;
  FRUGAL_RETURN_IF_ERROR(status.Annotate(fmt::format("round {}", round_)));
  const float weights = sums_.back();
  if (!(weights > 0)) {
    return FailedPreconditionError(
        fmt::format("round {}: no client returned an update on any worker", round_));
  }
  for (size_t i = 0; i < global_.size(); ++i) global_[i] += sums_[i] / weights;
  LoadGlobal(model);
  return Status::Ok();
}

Status FederatedAveraging::EndRoundOverServers(ModelBuffers& model) {
  if (!client_) {
    std::vector<std::pair<std::string, std::span<const float>>> initial;
    size_t offset = 0;
    for (const auto& [name, count] : parts_) {
      initial.emplace_back(name, std::span<const float>(global_).subspan(offset, count));
      offset += count;
    }
    FRUGAL_ASSIGN_OR_RETURN(
        client_, ParameterClient::Connect(*world_, *workers_transport_, config_, initial));
    if (!client_state_.empty()) {
      // A resumed run: the clocks, versions and bytes of the client that saved the checkpoint.
      FRUGAL_RETURN_IF_ERROR(client_
                                 ->Call("resume",
                                        [this](Transport&) {
                                          StateLoader loader(client_state_);
                                          client_->VisitState(loader);
                                          return loader.Finish();
                                        })
                                 ->Wait(2 * config_.timeout));
      client_state_.clear();
    }
  }
  exchange_.resize(global_.size());
  for (size_t i = 0; i < global_.size(); ++i) exchange_[i] = -sums_[i];
  const double weight = sums_.back();
  std::vector<std::unique_ptr<Work>> pulls;
  size_t offset = 0;
  for (size_t k = 0; k < parts_.size(); ++k) {
    TensorRequest request;
    request.name = parts_[k].first;
    request.priority = static_cast<int>(k);
    request.step = static_cast<uint64_t>(round_);
    pulls.push_back(client_->SubmitWeighted(
        std::move(request), std::span<float>(exchange_).subspan(offset, parts_[k].second), weight));
    offset += parts_[k].second;
  }
  Status first;
  for (std::unique_ptr<Work>& pull : pulls) {
    Status status = pull->Wait(2 * config_.timeout);
    if (first.ok() && !status.ok()) first = status;
  }
  bytes_sent_ = client_->push_bytes();
  FRUGAL_RETURN_IF_ERROR(first.Annotate(fmt::format("round {}", round_)));
  global_ = exchange_;
  LoadGlobal(model);
  return Status::Ok();
}

Status FederatedAveraging::Run(std::string_view what, const std::function<Status(Transport&)>& fn,
                               Transport& direct) {
  if (!client_) return fn(direct);
  return client_->Call(std::string(what), fn)->Wait(2 * config_.timeout);
}

Status FederatedAveraging::RunCheckpoint(uint64_t round,
                                         const std::function<Status(Transport&)>& save,
                                         Transport& direct) {
  if (!over_servers()) return Run("checkpoint", save, direct);
  if (!client_) {
    return FailedPreconditionError(
        fmt::format("checkpoint of round {}: the parameter-server client is not connected", round));
  }
  return client_->Checkpoint(round, save)->Wait(4 * config_.timeout);
}

Status FederatedAveraging::Finish() {
  if (!client_) return Status::Ok();
  Status status = client_->Shutdown();
  client_.reset();
  return status;
}

void FederatedAveraging::VisitState(StateVisitor& visitor) {
  visitor.U64("bytes_sent", bytes_sent_);
  if (over_servers()) {
    StateVisitor::Scope scope(visitor, "ps_client");
    if (visitor.loading()) {
      client_state_ = visitor.TakeSubtree();
    } else if (client_) {
      client_->VisitState(visitor);
    } else {
      visitor.PutSubtree(client_state_);
    }
  }
  StateVisitor::Scope scope(visitor, "clients");
  if (visitor.loading()) {
    for (const std::string& id : visitor.Children()) {
      char* end = nullptr;
      const long long client = std::strtoll(id.c_str(), &end, 10);
      StateVisitor::Scope c(visitor, id);
      if (id.empty() || *end != '\0' || client < 0 || client >= spec_.clients ||
          ClientRank(client, workers_) != rank_) {
        visitor.Reject(
            fmt::format("not a client this worker plays (of {} clients)", spec_.clients));
        return;
      }
      clients_.try_emplace(client, seed_, static_cast<int>(client), static_cast<int>(spec_.clients))
          .first->second.VisitState(visitor);
    }
    return;
  }
  for (auto& [client, ctx] : clients_) {
    StateVisitor::Scope c(visitor, std::to_string(client));
    ctx.VisitState(visitor);
  }
}

void FederatedAveraging::VisitState(
    const std::function<void(std::string_view, std::span<float>)>& visit) {
  for (auto& [client, ctx] : clients_) {
    for (const std::string& name : compressed_names_) {
      if (auto* state = ctx.FindState<ResidualState>(name, kErrorFeedbackSlot)) {
        visit(fmt::format("client/{}/{}", client, name), state->residual);
      }
    }
  }
}

}  // namespace frugal
