// The server loop of the parameter server (see parameter_server.h for the protocol).
//
// One thread (the caller's) owns the world transport and does everything: it probes for the next
// message from any worker (tag kToServer), receives and validates it (DecodeMessage, then the key
// and the sizes against the shard plan), handles it, posts replies without waiting for them
// (completed sends are reaped as the loop goes), and every kTick checks its deadlines and sends
// heartbeats. It backs off (frugal::BackOff) while nothing arrives.
//
// State per key: a KeyState (key_state.h), which follows the consistency rules; the server
// keeps which workers rest (evaluate at the end of an epoch: from their rest message to their
// next push; done workers rest for good), which the rules use so that nothing waits for them, and
// what it counted per worker (stats_), which it answers a stats request with: an active worker's
// at once, a resting worker's once every worker rests (the end of an epoch: every push is in).
//
// Compression (codec.h): a compressed push is decoded (with the pushing worker's random streams)
// before the rules see it; with compressed pulls every answer of a version carries the same
// payload, the change from the workers' copy x_hat (PullEncoder, started from the initial values).
//
// Start: the first hello fixes the tensors, so the shard plan (PlanShards over the hello's
// tensors, the configuration's servers and part size); every other hello must name the same
// tensors and the same configuration text. Worker 0 sends the initial values of this server's
// keys after its hello; the workers are welcomed once every hello and every initial value are in.
//
// Checkpoints (ServerCheckpointHooks): a worker asks for the checkpoint of its step once every
// pull of its steps is answered, and sends nothing more until the checkpoint is saved. When every
// worker has asked for the same step, every push is applied and no pull is held, so the server's
// state is a consistent cut: the server saves it, collectively with the workers (the save hook,
// over the world). A resumed server restores its state after the initial values, before the
// welcome.
//
// Deadlines (config.timeout = T): every hello within 3 T of the start; a held pull answered within
// T (else the job fails naming the key, the version and the workers it waits for: whose push of
// the version is missing, or under ssp whose clock is behind); every welcomed worker heard from
// (any message: pushes, heartbeats) within T. A failure is sent to every worker as an abort with
// the reason, then returned.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <optional>

#include "frugal/backoff.h"
#include "frugal/parameter_server.h"
#include "ps/codec.h"
#include "ps/consistency.h"
#include "ps/key_state.h"
#include "ps/messages.h"
#include "ps/ps_common.h"
#include "ps/server_optimizer.h"
#include "ps/server_stats.h"
#include "ps/sharding.h"

namespace frugal {
namespace ps_internal {
namespace {

class Server {
 public:
  Server(Transport& world, const ParameterServerConfig& config, const ServerOptimizer& optimizer,
         const Logger& logger, const ServerCheckpointHooks* checkpoints)
      : world_(world),
        config_(config),
        optimizer_(optimizer),
        logger_(logger),
        checkpoints_(checkpoints),
        rules_(config),
        peers_(world, config) {
    const int w = config.workers();
    hello_.assign(w, 0);
    welcomed_.assign(w, 0);
    done_.assign(w, 0);
    resting_.assign(w, 0);
    checkpoint_asked_.assign(w, 0);
    checkpoint_step_.assign(w, 0);
    stats_.resize(static_cast<size_t>(w));
    last_heard_.assign(w, Clock::now());
    last_sent_.assign(w, Clock::now());
    for (int s = 0; s < config.servers(); ++s) {
      if (config.server_ranks[s] == world.rank()) index_ = s;
    }
  }

  Status Run(ServerReport* report) {
    if (index_ < 0) {
      return InvalidArgumentError(
          fmt::format("rank {} is not one of the parameter servers", world_.rank()));
    }
    Status status = MakeCodecs();
    if (status.ok()) status = Loop();
    if (!status.ok()) Abort(status);
    if (report != nullptr) Report(*report);
    return status;
  }

 private:
  Status Loop() {
    const Clock::time_point start = Clock::now();
    Clock::time_point idle_since = start;
    Clock::time_point next_tick = start;
    while (!AllDone()) {
      bool got = false;
      for (int i = 0; i < 64; ++i) {
        bool one = false;
        FRUGAL_RETURN_IF_ERROR(ReceiveOne(one));
        if (!one) break;
        got = true;
      }
      FRUGAL_RETURN_IF_ERROR(sends_.Reap());
      const Clock::time_point now = Clock::now();
      if (now >= next_tick) {
        next_tick = now + kTick;
        FRUGAL_RETURN_IF_ERROR(CheckDeadlines(start, now));
        SendHeartbeats(now);
      }
      if (got) {
        idle_since = now;
      } else {
        BackOff(kServerBackOff, now - idle_since);
      }
    }
    return Status::Ok();
  }

  // The compression of pushes and pulls the configuration asks for (codec.h).
  Status MakeCodecs() {
    FRUGAL_RETURN_IF_ERROR(CheckCompression(config_));
    if (!config_.push_compress.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(
          std::unique_ptr<Compressor> c,
          MakeKeyCompressor(config_.push_compress, KeyErrorFeedback::kAsSpecified, "--compress"));
      push_.emplace(std::move(c), config_.seed, config_.workers());
    }
    if (!config_.pull_compress.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(
          std::unique_ptr<Compressor> c,
          MakeKeyCompressor(config_.pull_compress, KeyErrorFeedback::kWithout, "--compress-pull"));
      pull_.emplace(std::move(c), config_.seed, index_, config_.servers());
    }
    return Status::Ok();
  }

  bool AllDone() const {
    return std::all_of(done_.begin(), done_.end(), [](char d) { return d != 0; });
  }

  Status ReceiveOne(bool& got) {
    StatusOr<std::optional<ProbeResult>> probe = world_.IProbe(kAnySource, kToServerTag);
    if (!probe.ok()) return probe.status().Annotate("parameter server: probing for messages");
    if (!probe->has_value()) return Status::Ok();
    const ProbeResult found = **probe;
    buffer_.resize(found.bytes);
    FRUGAL_RETURN_IF_ERROR(
        Recv(world_, found.source, kToServerTag, buffer_, config_.timeout)
            .Annotate(fmt::format("parameter server: receiving from rank {}", found.source)));
    got = true;
    bytes_in_ += found.bytes;
    const int w = peers_.WorkerOf(found.source);
    if (w < 0) {
      return MalformedError(fmt::format(
          "parameter server: a message from rank {}, which is not a worker", found.source));
    }
    last_heard_[w] = Clock::now();
    StatusOr<Message> message = DecodeMessage(buffer_);
    if (!message.ok()) {
      return message.status().Annotate(fmt::format("from worker rank {}", found.source));
    }
    return Handle(w, *message)
        .Annotate(fmt::format("parameter server: {} from worker rank {}",
                              MessageTypeName(message->header.type), found.source));
  }

  Status Handle(int w, const Message& m) {
    switch (m.header.type) {
      case MessageType::kHello:
        return OnHello(w, m);
      case MessageType::kInit:
        return OnInit(w, m);
      case MessageType::kPush:
        push_bytes_in_ += kHeaderBytes + m.payload.size();
        return OnPush(w, m);
      case MessageType::kPull:
        return OnPull(w, m);
      case MessageType::kHeartbeat:
        return Status::Ok();
      case MessageType::kDone:
        done_[w] = 1;
        return SetResting(w, true);
      case MessageType::kRest:
        return SetResting(w, true);
      case MessageType::kStatsRequest:
        return OnStatsRequest(w);
      case MessageType::kCheckpoint:
        return OnCheckpoint(w, m.header.step);
      case MessageType::kAbort:
        return CancelledError(
            fmt::format("worker rank {} failed: {}", peers_.WorkerRank(w), AsText(m.payload)));
      default:
        return MalformedError("not expected by a server");
    }
  }

  Status OnHello(int w, const Message& m) {
    FRUGAL_ASSIGN_OR_RETURN(Hello hello, DecodeHello(m.payload));
    if (hello.worker != static_cast<uint32_t>(w)) {
      return MalformedError(fmt::format("it calls itself worker {}", hello.worker));
    }
    if (hello_[w] != 0) return MalformedError("a second hello");
    const std::string mine = config_.Describe();
    if (hello.config != mine) {
      return InvalidArgumentError(fmt::format(
          "the worker's configuration '{}' differs from the server's '{}'", hello.config, mine));
    }
    if (tensors_.empty() && !hello.tensors.empty() && keys_.empty()) {
      tensors_ = hello.tensors;
      tensors_from_ = w;
      plan_ = PlanShards(tensors_, config_.servers(), config_.part_bytes);
      for (uint32_t key : plan_.by_server[static_cast<size_t>(index_)]) {
        keys_.try_emplace(key, plan_.parts[key], config_, rules_, optimizer_);
        ++inits_left_;
      }
    } else if (!SameTensors(hello.tensors, tensors_)) {
      return InvalidArgumentError(
          fmt::format("its model ({} tensors) differs from worker rank {}'s ({} tensors)",
                      hello.tensors.size(), peers_.WorkerRank(tensors_from_), tensors_.size()));
    }
    hello_[w] = 1;
    return Welcome();
  }

  Status OnInit(int w, const Message& m) {
    if (w != 0) return MalformedError("only worker 0 sends initial values");
    FRUGAL_ASSIGN_OR_RETURN(KeyState * k, Mine(m.header.key));
    if (k->initialized()) {
      return MalformedError(fmt::format("key {} initialised twice", k->part().name));
    }
    std::vector<float> values(k->part().count);
    FRUGAL_RETURN_IF_ERROR(CopyFloats(m, values.size(), values));
    k->Initialize(std::move(values));
    if (pull_) pull_->Start(k->part(), k->values());
    --inits_left_;
    return Welcome();
  }

  // Welcomes every worker once every hello (all agreeing) and every initial value are in, so
  // that nobody starts while a worker may still be refused; a resumed server first restores its
  // checkpoint over the initial values.
  Status Welcome() {
    if (inits_left_ > 0 || keys_.empty()) return Status::Ok();
    if (std::any_of(hello_.begin(), hello_.end(), [](char h) { return h == 0; })) {
      return Status::Ok();
    }
    if (!resumed_ && checkpoints_ != nullptr && checkpoints_->resume) {
      resumed_ = true;
      FRUGAL_RETURN_IF_ERROR(checkpoints_->resume([this](StateVisitor& v) { VisitState(v); }));
    }
    for (int w = 0; w < config_.workers(); ++w) {
      if (welcomed_[w] != 0) continue;
      MessageHeader h;
      h.type = MessageType::kWelcome;
      Post(w, h, {});
      welcomed_[w] = 1;
    }
    return Status::Ok();
  }

  // A worker finished step `step` (every pull answered) and asks for its checkpoint. Once every
  // worker has asked for the same step, no push is in flight and no pull held: the state is a
  // consistent cut, saved collectively with the workers' part.
  Status OnCheckpoint(int w, uint64_t step) {
    if (checkpoints_ == nullptr || !checkpoints_->save) {
      return FailedPreconditionError("a checkpoint request, but this server saves no checkpoints");
    }
    if (checkpoint_asked_[w] != 0) return MalformedError("a second checkpoint request");
    checkpoint_asked_[w] = 1;
    checkpoint_step_[w] = step;
    if (std::any_of(checkpoint_asked_.begin(), checkpoint_asked_.end(),
                    [](char a) { return a == 0; })) {
      return Status::Ok();
    }
    for (int v = 0; v < config_.workers(); ++v) {
      if (checkpoint_step_[v] != step) {
        return InvalidArgumentError(
            fmt::format("checkpoint: worker rank {} asked for step {}, worker rank {} for step {}",
                        peers_.WorkerRank(w), step, peers_.WorkerRank(v), checkpoint_step_[v]));
      }
    }
    for (const auto& [key, k] : keys_) {
      if (!k.held().empty()) {
        return InternalError(fmt::format(
            "checkpoint of step {}: the pull of key '{}' by worker rank {} is still held", step,
            k.part().name, peers_.WorkerRank(k.held().front().worker)));
      }
    }
    FRUGAL_RETURN_IF_ERROR(
        checkpoints_->save(world_, step, [this](StateVisitor& v) { VisitState(v); }));
    std::fill(checkpoint_asked_.begin(), checkpoint_asked_.end(), 0);
    // The workers took part in the same checkpoint meanwhile: silence is not a failure.
    std::fill(last_heard_.begin(), last_heard_.end(), Clock::now());
    return Status::Ok();
  }

  // Everything a checkpoint holds (ServerCheckpointHooks).
  void VisitState(StateVisitor& v) {
    for (auto& [key, k] : keys_) {
      StateVisitor::Scope scope(v, "key/" + k.part().name);
      k.VisitState(v);
    }
    VisitCodecs(v, push_, pull_);
    std::vector<std::byte> resting(resting_.size());
    for (size_t w = 0; w < resting_.size(); ++w) resting[w] = std::byte(resting_[w] != 0);
    v.Bytes("resting", resting);
    if (v.loading() && v.ok() && resting.size() != resting_.size()) {
      v.Reject(fmt::format("{} workers, this run has {}", resting.size(), resting_.size()));
    }
    for (size_t w = 0; w < stats_.size(); ++w) {
      StateVisitor::Scope scope(v, "stats/" + std::to_string(w));
      WorkerPushStats& s = stats_[w];
      v.U64("applied", s.applied);
      v.U64("dropped", s.dropped);
      v.U64("skipped", s.skipped);
      std::vector<std::byte> staleness(s.staleness.size() * sizeof(uint64_t));
      if (!staleness.empty()) std::memcpy(staleness.data(), s.staleness.data(), staleness.size());
      v.Bytes("staleness", staleness);
      if (v.loading() && v.ok()) {
        if (staleness.size() % sizeof(uint64_t) != 0 ||
            staleness.size() / sizeof(uint64_t) > WorkerPushStats::kMaxStaleness + 1) {
          v.Reject(fmt::format("a staleness histogram of {} bytes", staleness.size()));
          return;
        }
        s.staleness.resize(staleness.size() / sizeof(uint64_t));
        if (!staleness.empty()) std::memcpy(s.staleness.data(), staleness.data(), staleness.size());
      }
    }
    v.U64("bytes_in", bytes_in_);
    v.U64("bytes_out", bytes_out_);
    v.U64("push_bytes_in", push_bytes_in_);
    v.U64("params_bytes_out", params_bytes_out_);
    if (!v.loading() || !v.ok()) return;
    for (size_t w = 0; w < resting_.size(); ++w)
      resting_[w] = static_cast<char>(resting[w] != std::byte{0});
  }

  StatusOr<KeyState*> Mine(uint32_t key) {
    auto it = keys_.find(key);
    if (it == keys_.end()) {
      return MalformedError(fmt::format("key {} is not held by this server", key));
    }
    return &it->second;
  }

  Status OnPush(int w, const Message& m) {
    if (welcomed_[w] == 0) return MalformedError("a push before the welcome");
    FRUGAL_ASSIGN_OR_RETURN(KeyState * k, Mine(m.header.key));
    PushIn push;
    push.worker = w;
    push.step = m.header.step;
    push.version = m.header.version;
    push.skip = (m.header.flags & kFlagSkip) != 0;
    push.pull_after = (m.header.flags & kFlagPullAfter) != 0;
    if (config_.weighted) push.weight = std::bit_cast<double>(m.header.aux);
    if (!push.skip) {
      push.gradient.resize(k->part().count);
      if ((m.header.encoding == Encoding::kCompressed) != push_.has_value()) {
        return MalformedError(push_ ? "a dense push, but pushes are compressed"
                                    : "a compressed push, but pushes are dense");
      }
      if (push_) {
        FRUGAL_RETURN_IF_ERROR(
            push_->Decode(k->part(), w, m.header.step, m.payload, push.gradient));
      } else {
        FRUGAL_RETURN_IF_ERROR(CopyFloats(m, push.gradient.size(), push.gradient));
      }
    }
    if (resting_[w] != 0 && done_[w] == 0) FRUGAL_RETURN_IF_ERROR(SetResting(w, false));
    FRUGAL_RETURN_IF_ERROR(k->Push(std::move(push), resting_, stats_));
    return AnswerPulls(*k);
  }

  Status OnPull(int w, const Message& m) {
    if (welcomed_[w] == 0) return MalformedError("a pull before the welcome");
    FRUGAL_ASSIGN_OR_RETURN(KeyState * k, Mine(m.header.key));
    k->Hold(w, PullNeed{m.header.version, 0});
    return AnswerPulls(*k);
  }

  // A worker starts or stops resting: every key re-checks what waited for it.
  Status SetResting(int w, bool resting) {
    resting_[w] = resting ? 1 : 0;
    for (auto& [key, k] : keys_) {
      k.Recheck(resting_);
      FRUGAL_RETURN_IF_ERROR(AnswerPulls(k));
    }
    AnswerStats();
    return Status::Ok();
  }

  // A resting worker's request waits until every worker rests (then every push of the epoch is
  // in, and every worker gets the same counts); an active worker's is answered at once.
  Status OnStatsRequest(int w) {
    if (resting_[w] != 0) {
      stats_waiting_.push_back(w);
      AnswerStats();
      return Status::Ok();
    }
    PostStats(w);
    return Status::Ok();
  }

  void AnswerStats() {
    if (stats_waiting_.empty()) return;
    if (std::any_of(resting_.begin(), resting_.end(), [](char r) { return r == 0; })) return;
    for (int w : stats_waiting_) PostStats(w);
    stats_waiting_.clear();
  }

  void PostStats(int w) {
    ServerStats stats;
    stats.bytes_in = bytes_in_;
    stats.bytes_out = bytes_out_;
    for (const auto& [key, k] : keys_) {
      stats.pushes += k.progress();
      stats.updates += k.updates();
    }
    stats.workers = stats_;
    MessageHeader h;
    h.type = MessageType::kStats;
    h.encoding = Encoding::kBytes;
    Post(w, h, EncodeServerStats(stats));
  }

  // The parameters of the key's version, or under pull compression the change that takes the
  // workers' copy to it.
  Status AnswerPulls(KeyState& k) {
    for (int w : k.TakeReady(resting_)) {
      MessageHeader h;
      h.type = MessageType::kParams;
      h.encoding = Encoding::kFloats;
      h.key = k.part().key;
      h.version = k.version();
      h.progress = k.progress();
      h.aux = std::bit_cast<uint64_t>(k.last_norm());
      if (!pull_) {
        params_bytes_out_ += kHeaderBytes + k.values().size_bytes();
        Post(w, h, std::as_bytes(k.values()));
        continue;
      }
      FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> payload,
                              pull_->Payload(k.part(), k.version(), k.values()));
      h.encoding = Encoding::kCompressed;
      h.flags = kFlagDelta;
      params_bytes_out_ += kHeaderBytes + payload.size();
      Post(w, h, payload);
    }
    return Status::Ok();
  }

  void Post(int w, const MessageHeader& h, std::span<const std::byte> payload) {
    std::vector<std::byte> bytes;
    EncodeMessage(h, payload, bytes);
    bytes_out_ += bytes.size();
    last_sent_[w] = Clock::now();
    sends_.Post(peers_.WorkerRank(w), kToWorkerTag, std::move(bytes));
  }

  Status CheckDeadlines(Clock::time_point start, Clock::time_point now) {
    const Duration t = config_.timeout;
    if (now - start > 3 * t) {
      std::vector<int> silent;
      for (int w = 0; w < config_.workers(); ++w) {
        if (hello_[w] == 0) silent.push_back(peers_.WorkerRank(w));
      }
      if (!silent.empty()) {
        return TimeoutError(fmt::format("parameter server: no hello from worker {} within {} ms",
                                        RanksText(silent), (3 * t).count()));
      }
    }
    for (int w = 0; w < config_.workers(); ++w) {
      if (welcomed_[w] == 0 || done_[w] != 0 || checkpoint_asked_[w] != 0 ||
          now - last_heard_[w] <= t) {
        continue;
      }
      return TimeoutError(fmt::format(
          "parameter server: worker rank {} sent nothing for {:.1f} s (no push, no heartbeat)",
          peers_.WorkerRank(w), Seconds(now - last_heard_[w])));
    }
    for (auto& [key, k] : keys_) {
      for (const HeldPull& pull : k.held()) {
        if (now - pull.since <= t) continue;
        std::vector<int> blocking;
        for (int w : k.Blocking(pull, resting_)) blocking.push_back(peers_.WorkerRank(w));
        const std::string what =
            rules_.kind() == PsConsistency::kSsp
                ? fmt::format("for every clock to reach {}: behind: worker {}", pull.need.min_clock,
                              RanksText(blocking))
                : fmt::format("for version {}: no push of version {} from worker {}",
                              pull.need.min_version, k.version(), RanksText(blocking));
        return TimeoutError(fmt::format(
            "parameter server: the pull of key '{}' by worker rank {} waited {:.1f} s {}",
            k.part().name, peers_.WorkerRank(pull.worker), Seconds(now - pull.since), what));
      }
    }
    return Status::Ok();
  }

  void SendHeartbeats(Clock::time_point now) {
    const Clock::duration interval = HeartbeatInterval(config_.timeout);
    for (int w = 0; w < config_.workers(); ++w) {
      if (welcomed_[w] == 0 || done_[w] != 0 || now - last_sent_[w] < interval) continue;
      MessageHeader h;
      h.type = MessageType::kHeartbeat;
      Post(w, h, {});
    }
  }

  // Tells every worker that is still there why the job fails, and waits a little for the sends.
  void Abort(const Status& status) {
    const std::string reason = fmt::format("server rank {}: {}", world_.rank(), status.message());
    const std::string_view text = std::string_view(reason).substr(0, kMaxAbortBytes);
    for (int w = 0; w < config_.workers(); ++w) {
      if (done_[w] != 0) continue;
      MessageHeader h;
      h.type = MessageType::kAbort;
      h.encoding = Encoding::kBytes;
      Post(w, h, std::as_bytes(std::span<const char>(text.data(), text.size())));
    }
    sends_.Drain(kAbortSendBound);
  }

  void Report(ServerReport& report) const {
    report.bytes_in = bytes_in_;
    report.bytes_out = bytes_out_;
    report.push_bytes_in = push_bytes_in_;
    report.params_bytes_out = params_bytes_out_;
    report.updates = 0;
    report.workers = stats_;
    report.key_names.clear();
    report.key_values.clear();
    for (const auto& [key, k] : keys_) {
      report.updates += k.updates();
      report.key_names.push_back(k.part().name);
      report.key_values.emplace_back(k.values().begin(), k.values().end());
    }
  }

  static bool SameTensors(const std::vector<TensorSpec>& a, const std::vector<TensorSpec>& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](const TensorSpec& x, const TensorSpec& y) {
             return x.name == y.name && x.count == y.count;
           });
  }

  Transport& world_;
  const ParameterServerConfig& config_;
  const ServerOptimizer& optimizer_;
  const Logger& logger_;
  const ServerCheckpointHooks* checkpoints_;
  bool resumed_ = false;
  ConsistencyRules rules_;
  Peers peers_;
  PendingSends sends_{world_, "worker"};
  int index_ = -1;
  std::vector<TensorSpec> tensors_;
  int tensors_from_ = 0;
  ShardPlan plan_;
  std::map<uint32_t, KeyState> keys_;
  std::optional<PushDecoder> push_;
  std::optional<PullEncoder> pull_;
  int inits_left_ = 0;
  std::vector<char> hello_;
  std::vector<char> welcomed_;
  std::vector<char> done_;
  std::vector<char> resting_;
  std::vector<char> checkpoint_asked_;     // by worker: asked for the checkpoint under way
  std::vector<uint64_t> checkpoint_step_;  // by worker: of which step
  std::vector<WorkerPushStats> stats_;
  std::vector<int> stats_waiting_;  // resting workers whose stats request waits for the others
  std::vector<Clock::time_point> last_heard_;
  std::vector<Clock::time_point> last_sent_;
  std::vector<std::byte> buffer_;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  uint64_t push_bytes_in_ = 0;     // of bytes_in_: the pushes (headers included)
  uint64_t params_bytes_out_ = 0;  // of bytes_out_: the answers with parameters
};

}  // namespace
}  // namespace ps_internal

Status RunParameterServer(Transport& world, const ParameterServerConfig& config,
                          const ServerOptimizer& optimizer, const Logger& logger,
                          ServerReport* report, const ServerCheckpointHooks* checkpoints) {
  ps_internal::Server server(world, config, optimizer, logger, checkpoints);
  return server.Run(report);
}

}  // namespace frugal
