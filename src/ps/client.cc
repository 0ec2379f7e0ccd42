// The worker side of the parameter server (see parameter_server.h).
//
// Connect runs the start of the protocol on the caller's thread (client_start.h): it plans the
// shards from the parameters (PlanShards, the same plan every server makes from the hello), makes
// the codecs, and greets the servers. Then the client's thread owns the transports and runs the
// loop below; the training thread talks to it through a CommandQueue (client_commands.h).
//
// A gradient's walk, in the order of this file:
//  - Submit queues a submission (a parameter's gradient of one step); TakeSubmission makes it the
//    parameter's active submission and queues a push of each of its keys in the PushQueue
//    (push_queue.h: lowest priority value first, at most kPushCredits unfinished pushes per
//    server);
//  - SendPushes takes the keys whose server has a credit and sends each one's push (EncodePush):
//    the key's clock (its pushes so far) and the version of the parameters its gradient was
//    computed on, asking for the parameters back; under lag the key's LagKeyRule may turn it into
//    a skip (a header without the gradient); under weighted pushes it carries the submission's
//    weight, and one of weight 0 is a header without values; with push compression, the codec's
//    payload;
//  - OnParams takes a server's answer: the parameters of the key into the submission's buffer at
//    the key's offset (through the pull codec when pulls are compressed), the answer's version
//    and progress into the key's state (client_keys.h), its ||gbar||^2 into the lag rule; the
//    submission completes when every key of its parameter is in.
// Any other command (a call, a rest, a checkpoint, a stats request) runs once every submission
// before it has completed, and later commands wait until it has run (a stats request: until
// every server answered it, client_stats.h). Every kTick the loop checks its deadlines and sends
// heartbeats (server_watch.h).
// An abort from a server, a malformed message or a missed deadline fails the client: every
// pending and later submission and call fails with that Status, and the servers are told.
// Shutdown sends done to every server after everything before it, and stops the thread.
// With a timeline, each key has a row ("key NAME": a push until its answer, compression and
// decompression) and the training thread's waits for pulls are on the row "ps wait".
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <optional>
#include <thread>
#include <unordered_map>

#include "frugal/backoff.h"
#include "frugal/parameter_server.h"
#include "ps/client_commands.h"
#include "ps/client_keys.h"
#include "ps/client_start.h"
#include "ps/client_stats.h"
#include "ps/codec.h"
#include "ps/messages.h"
#include "ps/ps_common.h"
#include "ps/push_queue.h"
#include "ps/server_watch.h"
#include "ps/sharding.h"

namespace frugal {

using engine_internal::WorkState;
using ps_internal::ClientWork;
using ps_internal::Command;
using ps_internal::CommandKind;
using ps_internal::Encoding;
using ps_internal::KeyPart;
using ps_internal::Message;
using ps_internal::MessageHeader;
using ps_internal::MessageType;

class ParameterClient::Impl {
 public:
  Impl(Transport& world, Transport& workers, const ParameterServerConfig& config,
       ParameterClientOptions options)
      : world_(world),
        workers_(workers),
        config_(config),
        options_(std::move(options)),
        peers_(world, config),
        sends_(world, "server"),
        pushes_(world, peers_),
        watch_(peers_, config),
        inbox_(world, peers_, config.timeout) {}

  ~Impl() { (void)Shutdown(); }

  Status Connect(ps_internal::NamedValues parameters) {
    worker_ = peers_.WorkerOf(world_.rank());
    if (worker_ < 0) {
      return InvalidArgumentError(
          fmt::format("rank {} is not one of the parameter server's workers", world_.rank()));
    }
    std::vector<TensorSpec> specs;
    for (const auto& [name, values] : parameters) {
      by_name_[name] = static_cast<uint32_t>(specs.size());
      specs.push_back({name, values.size()});
    }
    plan_ = ps_internal::PlanShards(specs, config_.servers(), config_.part_bytes);
    FRUGAL_RETURN_IF_ERROR(
        ps_internal::MakeClientCodecs(config_, worker_, plan_, parameters, push_, pull_));
    keys_.Start(plan_.parts.size(), config_.consistency == PsConsistency::kLag
                                        ? std::optional<LagOptions>(config_.lag)
                                        : std::nullopt);
    active_.resize(specs.size());
    FRUGAL_RETURN_IF_ERROR(
        ps_internal::Greet(world_, peers_, config_, worker_, specs, plan_, parameters, inbox_));
    watch_.HeardAll();
    // The servers welcome every worker at once: the timelines of the workers start together.
    if (options_.timeline != nullptr) options_.timeline->set_origin(Clock::now());
    return Status::Ok();
  }

  void Start() {
    thread_ = std::thread([this] { ThreadMain(); });
  }

  std::unique_ptr<Work> Submit(TensorRequest request, std::span<float> data,
                               std::optional<double> weight = std::nullopt) {
    FRUGAL_CHECK(weight.has_value() == config_.weighted,
                 config_.weighted ? "weighted pushes: submit with SubmitWeighted"
                                  : "SubmitWeighted needs weighted pushes");
    FRUGAL_CHECK(!weight || (std::isfinite(*weight) && *weight >= 0), "the weight of '",
                 request.name, "' is ", weight.value_or(0));
    auto it = by_name_.find(request.name);
    FRUGAL_CHECK(it != by_name_.end(), "parameter '", request.name,
                 "' is not one of the parameters the client was connected with");
    FRUGAL_CHECK_EQ(data.size(), TensorCount(it->second), "elements submitted for '", request.name,
                    "'");
    auto state = std::make_shared<WorkState>();
    Command c;
    c.tensor = it->second;
    c.priority = request.priority;
    c.data = data;
    c.weight = weight.value_or(0);
    c.state = state;
    commands_.Enqueue(std::move(c));
    return std::make_unique<ClientWork>(
        state, counters_.waits, fmt::format("the pull of '{}'", request.name), options_.timeline);
  }

  std::unique_ptr<Work> Control(CommandKind kind, std::string what, uint64_t step = 0,
                                std::string name = {},
                                std::function<Status(Transport&)> fn = nullptr,
                                ParameterServerStats* stats = nullptr) {
    auto state = std::make_shared<WorkState>();
    Command c;
    c.kind = kind;
    c.step = step;
    c.name = std::move(name);
    c.fn = std::move(fn);
    c.stats = stats;
    c.state = state;
    commands_.Enqueue(std::move(c));
    return std::make_unique<ClientWork>(state, nullptr, std::move(what));
  }

  void VisitState(StateVisitor& v) {
    keys_.VisitState(plan_, v);
    ps_internal::VisitCodecs(v, push_, pull_);
    uint64_t push_bytes = counters_.push_bytes.load();
    v.U64("push_bytes", push_bytes);
    if (!v.loading() || !v.ok()) return;
    counters_.push_bytes = push_bytes;
    counters_.progress = keys_.LeastProgress();
  }

  uint64_t progress() const { return counters_.progress.load(); }

  Status Shutdown() {
    commands_.Stop();
    if (thread_.joinable()) thread_.join();
    return commands_.error();
  }

  EngineStats stats() const { return counters_.Stats(); }
  uint64_t push_bytes() const { return counters_.push_bytes.load(); }

 private:
  struct Active {  // a parameter's submission, until its pull completes
    std::shared_ptr<WorkState> state;
    std::span<float> data;
    double weight = 0;
    int parts_left = 0;
  };

  size_t TensorCount(uint32_t tensor) const {
    size_t count = 0;
    for (uint32_t key : plan_.by_tensor[tensor]) count += plan_.parts[key].count;
    return count;
  }

  void ThreadMain() {
    Status status;
    try {
      status = Loop();
    } catch (const std::exception& e) {
      status = InternalError(fmt::format("parameter-server client: {}", e.what()));
    }
    if (!status.ok()) Fail(status);
  }

  Status Loop() {
    Clock::time_point idle_since = Clock::now();
    Clock::time_point next_tick = idle_since;
    while (true) {
      bool busy = false;
      bool stop = false;
      FRUGAL_RETURN_IF_ERROR(TakeCommands(busy, stop));
      if (stop) return SendDone();
      FRUGAL_RETURN_IF_ERROR(pushes_.Reap());
      FRUGAL_RETURN_IF_ERROR(SendPushes(busy));
      FRUGAL_RETURN_IF_ERROR(sends_.Reap());
      bool drained = false;
      FRUGAL_RETURN_IF_ERROR(ReceiveAll(busy, drained));
      const Clock::time_point now = Clock::now();
      if (now >= next_tick && drained) {
        next_tick = now + ps_internal::kTick;
        FRUGAL_RETURN_IF_ERROR(watch_.Check(now, plan_, keys_));
        for (int s : watch_.HeartbeatsDue(now)) SendEmpty(s, MessageType::kHeartbeat);
      }
      if (busy) {
        idle_since = now;
      } else {
        BackOff(ps_internal::kServerBackOff, now - idle_since);
      }
    }
  }

  // Runs the commands the queue hands out; on stop, cancels whatever is still pending.
  Status TakeCommands(bool& busy, bool& stop) {
    while (std::optional<Command> c = commands_.Take(stats_.active(), stop)) {
      busy = true;
      if (c->kind == CommandKind::kSubmit) {
        TakeSubmission(*c);
      } else {
        RunControl(*c);
      }
    }
    if (stop) Cancel(CancelledError("parameter-server client shut down"));
    return Status::Ok();
  }

  // A call or a checkpoint runs here, on the client's thread; a rest or a stats request asks
  // every server.
  void RunControl(Command& c) {
    switch (c.kind) {
      case CommandKind::kCall:
      case CommandKind::kCheckpoint: {
        const bool checkpoint = c.kind == CommandKind::kCheckpoint;
        if (checkpoint) {
          for (int s = 0; s < config_.servers(); ++s) {
            SendEmpty(s, MessageType::kCheckpoint, c.step);
          }
        }
        Status s;
        try {
          s = c.fn(checkpoint ? world_ : workers_);
        } catch (const std::exception& e) {
          s = InternalError(fmt::format("call '{}': {}", c.name, e.what()));
        }
        // The servers were busy with the same checkpoint meanwhile: silence is not a failure.
        if (checkpoint) watch_.HeardAll();
        c.state->Complete(s);
        return;
      }
      case CommandKind::kRest:
        for (int s = 0; s < config_.servers(); ++s) SendEmpty(s, MessageType::kRest);
        c.state->Complete(Status::Ok());
        return;
      case CommandKind::kStats:
        for (int s = 0; s < config_.servers(); ++s) SendEmpty(s, MessageType::kStatsRequest);
        stats_.Begin(c.state, c.stats, config_.servers(), config_.workers());
        return;
      case CommandKind::kSubmit:
        return;
    }
  }

  // ---- A gradient's walk ----------------------------------------------------------------------

  void TakeSubmission(Command& c) {
    Active& a = active_[c.tensor];
    if (a.state) {
      c.state->Complete(InternalError(fmt::format(
          "parameter '{}' submitted again before its pull completed", NameOf(c.tensor))));
      commands_.SubmissionDone();
      return;
    }
    a.state = c.state;
    a.data = c.data;
    a.weight = c.weight;
    a.parts_left = static_cast<int>(plan_.by_tensor[c.tensor].size());
    if (a.parts_left == 0) Complete(c.tensor);
    for (uint32_t key : plan_.by_tensor[c.tensor]) pushes_.Add(c.priority, key);
  }

  Status SendPushes(bool& busy) {
    while (std::optional<uint32_t> key = pushes_.Next(plan_)) {
      const KeyPart& part = plan_.parts[*key];
      std::vector<std::byte> bytes;
      FRUGAL_RETURN_IF_ERROR(EncodePush(part, bytes));
      watch_.Sent(part.server);
      counters_.push_bytes += bytes.size();
      pushes_.Send(part.server, std::move(bytes));
      keys_[part.key].pull_since = Clock::now();
      counters_.busy->Begin();
      busy = true;
    }
    return Status::Ok();
  }

  // The push of `part`'s gradient, asking for the parameters back; advances the key's clock.
  Status EncodePush(const KeyPart& part, std::vector<std::byte>& bytes) {
    ps_internal::ClientKey& key = keys_[part.key];
    const Active& a = active_[part.tensor];
    const std::span<const float> gradient = a.data.subspan(part.offset, part.count);
    MessageHeader h;
    h.type = MessageType::kPush;
    h.flags = ps_internal::kFlagPullAfter;
    h.encoding = Encoding::kFloats;
    h.key = part.key;
    h.step = key.clock++;
    h.version = key.version;
    if (config_.weighted) h.aux = std::bit_cast<uint64_t>(a.weight);
    if ((key.lag && !key.lag->Decide(gradient)) || (config_.weighted && a.weight == 0)) {
      h.flags |= ps_internal::kFlagSkip;
      h.encoding = Encoding::kNone;
      ps_internal::EncodeMessage(h, std::span<const std::byte>(), bytes);
    } else if (push_) {
      const Clock::time_point begin = Clock::now();
      FRUGAL_RETURN_IF_ERROR(push_->Encode(part, h.step, gradient, payload_));
      if (options_.timeline != nullptr) {
        options_.timeline->Span(Row(part), "compress", begin, Clock::now(),
                                fmt::format("{{\"bytes\": {}}}", payload_.size()));
      }
      h.encoding = Encoding::kCompressed;
      ps_internal::EncodeMessage(h, payload_, bytes);
    } else {
      ps_internal::EncodeMessage(h, gradient, bytes);
    }
    return Status::Ok();
  }

  Status OnParams(int s, const Message& m) {
    const uint32_t key = m.header.key;
    if (key >= plan_.parts.size() || plan_.parts[key].server != s) {
      return MalformedError(fmt::format("key {} is not held by this server", key));
    }
    const KeyPart& part = plan_.parts[key];
    ps_internal::ClientKey& k = keys_[key];
    if (!k.pull_since) {
      return MalformedError(
          fmt::format("parameters of key '{}', which were not asked for", part.name));
    }
    Active& a = active_[part.tensor];
    const bool delta = (m.header.flags & ps_internal::kFlagDelta) != 0;
    if (delta != pull_.has_value() || delta != (m.header.encoding == Encoding::kCompressed)) {
      return MalformedError(pull_ ? "dense parameters, but pulls are compressed"
                                  : "compressed parameters, but pulls are dense");
    }
    const Clock::time_point received = Clock::now();
    if (options_.timeline != nullptr) {
      options_.timeline->Span(
          Row(part), "push, pull", *k.pull_since, received,
          fmt::format("{{\"server\": {}, \"version\": {}, \"bytes\": {}}}", peers_.ServerRank(s),
                      m.header.version, ps_internal::kHeaderBytes + m.payload.size()));
    }
    const std::span<float> out = a.data.subspan(part.offset, part.count);
    if (pull_) {
      FRUGAL_RETURN_IF_ERROR(pull_->Apply(part, s, m.header.version, m.payload, out));
      if (options_.timeline != nullptr) {
        options_.timeline->Span(Row(part), "decompress", received, Clock::now());
      }
    } else {
      FRUGAL_RETURN_IF_ERROR(ps_internal::CopyFloats(m, part.count, out));
    }
    k.version = m.header.version;
    k.progress = m.header.progress;
    counters_.progress = keys_.LeastProgress();
    if (k.lag) k.lag->Heard(std::bit_cast<double>(m.header.aux));
    k.pull_since.reset();
    counters_.busy->End();
    if (--a.parts_left == 0) Complete(part.tensor);
    return Status::Ok();
  }

  void Complete(uint32_t tensor) {
    Active& a = active_[tensor];
    std::shared_ptr<WorkState> state = std::move(a.state);
    a = Active{};
    commands_.SubmissionDone();
    ++counters_.completed;
    state->Complete(Status::Ok());
  }

  // ---- What the servers send ------------------------------------------------------------------

  Status ReceiveAll(bool& busy, bool& drained) {
    for (int i = 0; i < 256; ++i) {
      StatusOr<std::optional<ProbeResult>> probe =
          world_.IProbe(kAnySource, ps_internal::kToWorkerTag);
      if (!probe.ok()) return probe.status().Annotate("parameter server: probing for answers");
      if (!probe->has_value()) {
        drained = true;
        return Status::Ok();
      }
      busy = true;
      FRUGAL_ASSIGN_OR_RETURN(int s, inbox_.Receive(**probe));
      watch_.Heard(s);
      FRUGAL_RETURN_IF_ERROR(Handle(s, inbox_.message()));
    }
    return Status::Ok();
  }

  Status Handle(int s, const Message& m) {
    const int rank = peers_.ServerRank(s);
    switch (m.header.type) {
      case MessageType::kHeartbeat:
        return Status::Ok();
      case MessageType::kAbort:
        return ps_internal::AbortError(m);
      case MessageType::kParams:
        return OnParams(s, m).Annotate(
            fmt::format("parameter server: answer of server rank {}", rank));
      case MessageType::kStats:
        return stats_.Answer(s, m.payload)
            .Annotate(fmt::format("parameter server: statistics of server rank {}", rank));
      default:
        return MalformedError(fmt::format("parameter server: unexpected {} from server rank {}",
                                          MessageTypeName(m.header.type), rank));
    }
  }

  // ---- Control messages, the end and failures -------------------------------------------------

  void SendEmpty(int server, MessageType type, uint64_t step = 0) {
    MessageHeader h;
    h.type = type;
    h.step = step;
    std::vector<std::byte> bytes;
    ps_internal::EncodeMessage(h, std::span<const std::byte>(), bytes);
    PostControl(server, std::move(bytes));
  }

  void PostControl(int server, std::vector<std::byte> bytes) {
    watch_.Sent(server);
    counters_.control_bytes += bytes.size();
    sends_.Post(peers_.ServerRank(server), ps_internal::kToServerTag, std::move(bytes));
  }

  Status SendDone() {
    for (int s = 0; s < config_.servers(); ++s) SendEmpty(s, MessageType::kDone);
    pushes_.Drain(config_.timeout);
    sends_.Drain(config_.timeout);
    return Status::Ok();
  }

  // Completes every queued command and every pending submission with `status`.
  void Cancel(const Status& status) {
    commands_.CancelAll(status);
    stats_.Cancel(status);
    for (Active& a : active_) {
      if (a.state) a.state->Complete(status);
      a = Active{};
    }
  }

  // Fails everything pending and tells the servers.
  void Fail(const Status& status) {
    commands_.SetError(status);
    Cancel(status);
    const std::string reason = fmt::format("worker rank {}: {}", world_.rank(), status.message())
                                   .substr(0, ps_internal::kMaxAbortBytes);
    MessageHeader h;
    h.type = MessageType::kAbort;
    h.encoding = Encoding::kBytes;
    std::vector<std::byte> bytes;
    for (int s = 0; s < config_.servers(); ++s) {
      ps_internal::EncodeMessage(h, std::as_bytes(std::span<const char>(reason)), bytes);
      PostControl(s, bytes);
    }
    sends_.Drain(ps_internal::kAbortSendBound);
    pushes_.Drain(Duration::zero());
  }

  // The timeline's row of a key.
  static std::string Row(const KeyPart& part) { return "key " + part.name; }

  const std::string& NameOf(uint32_t tensor) const {
    for (const auto& [name, index] : by_name_) {
      if (index == tensor) return name;
    }
    static const std::string unknown = "?";
    return unknown;
  }

  Transport& world_;
  Transport& workers_;
  ParameterServerConfig config_;
  ParameterClientOptions options_;
  ps_internal::Peers peers_;
  ps_internal::PendingSends sends_;  // control messages
  int worker_ = -1;
  ps_internal::ShardPlan plan_;
  std::unordered_map<std::string, uint32_t> by_name_;
  // Owned by the client's thread.
  ps_internal::PushQueue pushes_;
  ps_internal::ServerWatch watch_;
  ps_internal::Inbox inbox_;
  ps_internal::ClientKeys keys_;
  std::vector<Active> active_;  // by tensor
  std::optional<ps_internal::PushEncoder> push_;
  std::optional<ps_internal::PullDecoder> pull_;
  std::vector<std::byte> payload_;  // scratch: a compressed push
  ps_internal::StatsGather stats_;
  // Shared with the training thread.
  ps_internal::CommandQueue commands_;
  ps_internal::ClientCounters counters_;
  std::thread thread_;
};

ParameterClient::ParameterClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ParameterClient::~ParameterClient() = default;

StatusOr<std::unique_ptr<ParameterClient>> ParameterClient::Connect(
    Transport& world, Transport& workers, const ParameterServerConfig& config,
    std::span<const std::pair<std::string, std::span<const float>>> parameters,
    ParameterClientOptions options) {
  auto impl = std::make_unique<Impl>(world, workers, config, std::move(options));
  FRUGAL_RETURN_IF_ERROR(impl->Connect(parameters));
  impl->Start();
  return std::unique_ptr<ParameterClient>(new ParameterClient(std::move(impl)));
}

std::unique_ptr<Work> ParameterClient::Submit(TensorRequest request, std::span<float> data) {
  return impl_->Submit(std::move(request), data);
}

std::unique_ptr<Work> ParameterClient::SubmitWeighted(TensorRequest request, std::span<float> data,
                                                      double weight) {
  return impl_->Submit(std::move(request), data, weight);
}

std::unique_ptr<Work> ParameterClient::Call(std::string name,
                                            std::function<Status(Transport&)> fn) {
  std::string what = fmt::format("call '{}'", name);
  return impl_->Control(CommandKind::kCall, std::move(what), 0, std::move(name), std::move(fn));
}

Status ParameterClient::Shutdown() { return impl_->Shutdown(); }
EngineStats ParameterClient::stats() const { return impl_->stats(); }
uint64_t ParameterClient::push_bytes() const { return impl_->push_bytes(); }
uint64_t ParameterClient::progress() const { return impl_->progress(); }
std::unique_ptr<Work> ParameterClient::Rest() {
  return impl_->Control(CommandKind::kRest, "the rest message");
}
std::unique_ptr<Work> ParameterClient::Checkpoint(uint64_t step,
                                                  std::function<Status(Transport&)> save) {
  return impl_->Control(CommandKind::kCheckpoint, fmt::format("the checkpoint of step {}", step),
                        step, "checkpoint", std::move(save));
}
void ParameterClient::VisitState(StateVisitor& visitor) { impl_->VisitState(visitor); }
std::unique_ptr<Work> ParameterClient::FetchStats(ParameterServerStats* out) {
  FRUGAL_CHECK(out != nullptr, "FetchStats needs somewhere to put the statistics");
  return impl_->Control(CommandKind::kStats, "the statistics of the servers", 0, {}, nullptr, out);
}

}  // namespace frugal
