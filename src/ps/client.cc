// The worker side of the parameter server (see parameter_server.h).
//
// Connect runs the start of the protocol on the caller's thread: it plans the shards from the
// parameters (PlanShards, the same plan every server makes from the hello), sends every server a
// hello, and on worker 0 the initial value of every key, then waits for every server's welcome.
//
// Then the client's thread owns the transports. Its loop:
//  - takes the commands the training thread queued, in order: a submission (a parameter's
//    gradient of one step) queues a push of each of the parameter's keys; a call, a rest or a
//    stats request runs once every submission before it has completed, and later commands wait
//    until it has run (a stats request: until every server answered it);
//  - sends the queued pushes, lowest priority value first (the parameter nearest the input), at
//    most kPushCredits unfinished pushes per server, so that a parameter submitted later with a
//    lower value overtakes pushes still queued (P3's priority order); each push carries the key's
//    clock (the pushes of that key so far) and the version of the parameters its gradient was
//    computed on, and asks for the parameters back; under lag the key's LagKeyRule may turn the
//    push into a skip (a header without the gradient); under weighted pushes it carries the
//    submission's weight, and one of weight 0 is a header without values;
//  - receives the servers' answers: the parameters of a key go into the submission's buffer at
//    the key's offset, and the submission completes when every key of its parameter is in; the
//    answer's progress (the key's pushes from all workers) feeds progress(), its ||gbar||^2 the
//    lag rule;
//  - every kTick: heartbeats to servers it sent nothing to for a while, and the deadlines: a
//    server heard from within the timeout, a pull answered within twice the timeout.
// An abort from a server, a malformed message or a missed deadline fails the client: every
// pending and later submission and call fails with that Status, and the servers are told.
// Shutdown sends done to every server after everything before it, and stops the thread.
// With a timeline, each key has a row ("key NAME": a push until its answer, compression and
// decompression) and the training thread's waits for pulls are on the row "ps wait".
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "engine/engine_work.h"
#include "frugal/backoff.h"
#include "frugal/parameter_server.h"
#include "ps/codec.h"
#include "ps/lag_rule.h"
#include "ps/messages.h"
#include "ps/ps_common.h"
#include "ps/server_stats.h"
#include "ps/sharding.h"

namespace frugal {

using engine_internal::WaitBook;
using engine_internal::WorkState;
using ps_internal::Encoding;
using ps_internal::KeyPart;
using ps_internal::Message;
using ps_internal::MessageHeader;
using ps_internal::MessageType;

namespace {

constexpr int kPushCredits = 2;

// The Work of a submission or a call.
class ClientWork final : public Work {
 public:
  ClientWork(std::shared_ptr<WorkState> state, std::shared_ptr<WaitBook> book, std::string what,
             Timeline* timeline = nullptr)
      : state_(std::move(state)),
        book_(std::move(book)),
        what_(std::move(what)),
        timeline_(timeline) {}

  Status Wait(Duration timeout) override {
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (state_->done) return state_->status;
    if (book_) book_->Begin();
    const Clock::time_point begin = Clock::now();
    const bool done = state_->cv.wait_for(lock, timeout, [&] { return state_->done; });
    if (book_) book_->End();
    if (timeline_ != nullptr) timeline_->Span("ps wait", what_, begin, Clock::now());
    if (!done) {
      return TimeoutError(
          fmt::format("parameter server: {} not answered within {} ms", what_, timeout.count()));
    }
    return state_->status;
  }
  bool IsCompleted() override { return state_->IsDone(); }
  int peer() const override { return -1; }
  size_t bytes() const override { return 0; }

 private:
  std::shared_ptr<WorkState> state_;
  std::shared_ptr<WaitBook> book_;
  std::string what_;
  Timeline* timeline_;
};

enum class CommandKind { kSubmit, kCall, kRest, kStats, kCheckpoint };

struct Command {
  CommandKind kind = CommandKind::kSubmit;
  // A submission.
  uint32_t tensor = 0;
  int priority = 0;
  std::span<float> data;
  double weight = 0;  // under weighted pushes
  // A call; a checkpoint (fn with the world transport, after asking the servers for `step`).
  uint64_t step = 0;
  std::string name;
  std::function<Status(Transport&)> fn;
  // A stats request.
  ParameterServerStats* stats = nullptr;
  std::shared_ptr<WorkState> state;
};

}  // namespace

class ParameterClient::Impl {
 public:
  Impl(Transport& world, Transport& workers, const ParameterServerConfig& config,
       ParameterClientOptions options)
      : world_(world),
        workers_(workers),
        config_(config),
        options_(std::move(options)),
        peers_(world, config),
        sends_(world, "server") {}

  ~Impl() { (void)Shutdown(); }

  Status Connect(std::span<const std::pair<std::string, std::span<const float>>> parameters) {
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
    FRUGAL_RETURN_IF_ERROR(MakeCodecs(parameters));
    const size_t keys = plan_.parts.size();
    version_.assign(keys, 0);
    clock_.assign(keys, 0);
    key_progress_.assign(keys, 0);
    if (config_.consistency == PsConsistency::kLag) {
      lag_.assign(keys, ps_internal::LagKeyRule(config_.lag));
    }
    pull_since_.assign(keys, std::nullopt);
    active_.resize(specs.size());
    server_heard_.assign(static_cast<size_t>(config_.servers()), Clock::now());
    server_sent_.assign(static_cast<size_t>(config_.servers()), Clock::now());
    in_flight_.assign(static_cast<size_t>(config_.servers()), 0);

    ps_internal::Hello hello;
    hello.worker = static_cast<uint32_t>(worker_);
    hello.config = config_.Describe();
    hello.tensors = specs;
    std::vector<std::byte> bytes;
    MessageHeader h;
    h.type = MessageType::kHello;
    h.encoding = Encoding::kBytes;
    ps_internal::EncodeMessage(h, ps_internal::EncodeHello(hello), bytes);
    for (int s = 0; s < config_.servers(); ++s) {
      FRUGAL_RETURN_IF_ERROR(SendNow(s, bytes, "hello"));
    }
    if (worker_ == 0) {
      for (const KeyPart& part : plan_.parts) {
        MessageHeader init;
        init.type = MessageType::kInit;
        init.encoding = Encoding::kFloats;
        init.key = part.key;
        ps_internal::EncodeMessage(
            init, parameters[part.tensor].second.subspan(part.offset, part.count), bytes);
        FRUGAL_RETURN_IF_ERROR(SendNow(part.server, bytes, "initial values"));
      }
    }
    FRUGAL_RETURN_IF_ERROR(AwaitWelcomes());
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
    Enqueue(std::move(c));
    return std::make_unique<ClientWork>(
        state, waits_, fmt::format("the pull of '{}'", request.name), options_.timeline);
  }

  std::unique_ptr<Work> Call(std::string name, std::function<Status(Transport&)> fn) {
    Command c;
    c.kind = CommandKind::kCall;
    c.name = name;
    c.fn = std::move(fn);
    return EnqueueControl(std::move(c), fmt::format("call '{}'", name));
  }

  std::unique_ptr<Work> Checkpoint(uint64_t step, std::function<Status(Transport&)> save) {
    Command c;
    c.kind = CommandKind::kCheckpoint;
    c.step = step;
    c.name = "checkpoint";
    c.fn = std::move(save);
    return EnqueueControl(std::move(c), fmt::format("the checkpoint of step {}", step));
  }

  void VisitState(StateVisitor& v) {
    for (const KeyPart& part : plan_.parts) {
      StateVisitor::Scope key(v, part.name);
      v.U64("clock", clock_[part.key]);
      v.U64("version", version_[part.key]);
      v.U64("progress", key_progress_[part.key]);
      if (!lag_.empty()) {
        StateVisitor::Scope lag(v, "lag");
        lag_[part.key].VisitState(v);
      }
    }
    ps_internal::VisitCodecs(v, push_, pull_);
    uint64_t push_bytes = push_bytes_.load();
    v.U64("push_bytes", push_bytes);
    if (!v.loading() || !v.ok()) return;
    push_bytes_ = push_bytes;
    progress_ =
        key_progress_.empty() ? 0 : *std::min_element(key_progress_.begin(), key_progress_.end());
  }

  std::unique_ptr<Work> Rest() {
    Command c;
    c.kind = CommandKind::kRest;
    return EnqueueControl(std::move(c), "the rest message");
  }

  std::unique_ptr<Work> FetchStats(ParameterServerStats* out) {
    FRUGAL_CHECK(out != nullptr, "FetchStats needs somewhere to put the statistics");
    Command c;
    c.kind = CommandKind::kStats;
    c.stats = out;
    return EnqueueControl(std::move(c), "the statistics of the servers");
  }

  uint64_t progress() const { return progress_.load(); }

  Status Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

  EngineStats stats() const {
    EngineStats stats;
    const std::vector<engine_internal::Interval> busy = busy_->Snapshot();
    for (const auto& i : busy) stats.comm_seconds += ps_internal::Seconds(i.end - i.begin);
    stats.exposed_seconds = engine_internal::OverlapSeconds(busy, waits_->Snapshot());
    stats.tensors = completed_.load();
    stats.negotiation_bytes = control_bytes_.load();
    return stats;
  }

  uint64_t push_bytes() const { return push_bytes_.load(); }

 private:
  size_t TensorCount(uint32_t tensor) const {
    size_t count = 0;
    for (uint32_t key : plan_.by_tensor[tensor]) count += plan_.parts[key].count;
    return count;
  }

  std::unique_ptr<Work> EnqueueControl(Command c, std::string what) {
    auto state = std::make_shared<WorkState>();
    c.state = state;
    Enqueue(std::move(c));
    return std::make_unique<ClientWork>(state, nullptr, std::move(what));
  }

  void Enqueue(Command c) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.ok() || stop_) {
      c.state->Complete(error_.ok() ? CancelledError("parameter-server client shut down") : error_);
      return;
    }
    commands_.push_back(std::move(c));
  }

  // A blocking send on the caller's thread (before the client's thread starts).
  // Not counted in control_bytes_: the loop counts its traffic from after the start.
  Status SendNow(int server, std::span<const std::byte> bytes, std::string_view what) {
    return Send(world_, peers_.ServerRank(server), ps_internal::kToServerTag, bytes,
                config_.timeout)
        .Annotate(fmt::format("parameter server: sending the {} to server rank {}", what,
                              peers_.ServerRank(server)));
  }

  // The compression of pushes and pulls the configuration asks for (codec.h); the copy of the
  // parameters that compressed pulls update starts from `parameters`.
  Status MakeCodecs(std::span<const std::pair<std::string, std::span<const float>>> parameters) {
    using ps_internal::KeyErrorFeedback;
    FRUGAL_RETURN_IF_ERROR(ps_internal::CheckCompression(config_));
    if (!config_.push_compress.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(
          std::unique_ptr<Compressor> c,
          ps_internal::MakeKeyCompressor(
              config_.push_compress,
              config_.push_error_feedback ? KeyErrorFeedback::kAdd : KeyErrorFeedback::kAsSpecified,
              "--compress"));
      push_.emplace(std::move(c), config_.seed, worker_, config_.workers());
    }
    if (!config_.pull_compress.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(
          std::unique_ptr<Compressor> c,
          ps_internal::MakeKeyCompressor(config_.pull_compress, KeyErrorFeedback::kWithout,
                                         "--compress-pull"));
      pull_.emplace(std::move(c), config_.seed, config_.servers());
      for (const KeyPart& part : plan_.parts) {
        pull_->Start(part, parameters[part.tensor].second.subspan(part.offset, part.count));
      }
    }
    return Status::Ok();
  }

  Status AwaitWelcomes() {
    std::vector<char> welcomed(static_cast<size_t>(config_.servers()), 0);
    int left = config_.servers();
    const Clock::time_point deadline = Clock::now() + 3 * config_.timeout;
    const auto slice =
        std::chrono::duration_cast<Duration>(ps_internal::HeartbeatInterval(config_.timeout));
    while (left > 0) {
      const auto remaining = std::chrono::duration_cast<Duration>(deadline - Clock::now());
      StatusOr<ProbeResult> probe =
          remaining.count() > 0
              ? world_.Probe(kAnySource, ps_internal::kToWorkerTag, std::min(remaining, slice))
              : StatusOr<ProbeResult>(TimeoutError(""));
      if (!probe.ok() && probe.status().code() == StatusCode::kTimeout && remaining > slice) {
        // Still waiting: tell the servers that already welcomed us that we are alive.
        MessageHeader h;
        h.type = MessageType::kHeartbeat;
        std::vector<std::byte> bytes;
        ps_internal::EncodeMessage(h, std::span<const std::byte>(), bytes);
        for (int s = 0; s < config_.servers(); ++s) {
          if (welcomed[s] != 0) FRUGAL_RETURN_IF_ERROR(SendNow(s, bytes, "heartbeat"));
        }
        continue;
      }
      if (!probe.ok() && probe.status().code() == StatusCode::kTimeout) {
        std::vector<int> silent;
        for (int s = 0; s < config_.servers(); ++s) {
          if (welcomed[s] == 0) silent.push_back(peers_.ServerRank(s));
        }
        return TimeoutError(fmt::format("parameter server: no welcome from server {} within {} ms",
                                        ps_internal::RanksText(silent),
                                        (3 * config_.timeout).count()));
      }
      FRUGAL_RETURN_IF_ERROR(probe.status());
      FRUGAL_ASSIGN_OR_RETURN(int s, ReceiveFrom(*probe));
      const Message& m = message_;
      if (m.header.type == MessageType::kAbort) return AbortError(m);
      if (m.header.type == MessageType::kHeartbeat) continue;  // from a server that welcomed us
      if (m.header.type != MessageType::kWelcome || welcomed[s] != 0) {
        return MalformedError(fmt::format("parameter server: unexpected {} from server rank {}",
                                          MessageTypeName(m.header.type), peers_.ServerRank(s)));
      }
      welcomed[s] = 1;
      --left;
    }
    return Status::Ok();
  }

  // Receives the probed message into buffer_ and decodes it into message_; its server.
  StatusOr<int> ReceiveFrom(const ProbeResult& found) {
    const int s = peers_.ServerOf(found.source);
    buffer_.resize(found.bytes);
    FRUGAL_RETURN_IF_ERROR(
        Recv(world_, found.source, ps_internal::kToWorkerTag, buffer_, config_.timeout)
            .Annotate(fmt::format("parameter server: receiving from rank {}", found.source)));
    if (s < 0) {
      return MalformedError(fmt::format(
          "parameter server: a message from rank {}, which is not a server", found.source));
    }
    server_heard_[static_cast<size_t>(s)] = Clock::now();
    StatusOr<Message> m = ps_internal::DecodeMessage(buffer_);
    if (!m.ok()) return m.status().Annotate(fmt::format("from server rank {}", found.source));
    message_ = *m;
    return s;
  }

  Status AbortError(const Message& m) const {
    return CancelledError(ps_internal::AsText(m.payload));
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
      FRUGAL_RETURN_IF_ERROR(ReapPushes());
      FRUGAL_RETURN_IF_ERROR(SendPushes(busy));
      FRUGAL_RETURN_IF_ERROR(sends_.Reap());
      bool drained = false;
      FRUGAL_RETURN_IF_ERROR(ReceiveAll(busy, drained));
      const Clock::time_point now = Clock::now();
      if (now >= next_tick && drained) {
        next_tick = now + ps_internal::kTick;
        FRUGAL_RETURN_IF_ERROR(CheckDeadlines(now));
        SendHeartbeats(now);
      }
      if (busy) {
        idle_since = now;
      } else {
        BackOff(ps_internal::kServerBackOff, now - idle_since);
      }
    }
  }

  // Moves submissions from the queue to the pushes, and runs a call at the head of the queue
  // once nothing submitted before it is pending.
  Status TakeCommands(bool& busy, bool& stop) {
    while (true) {
      Command c;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) {
          stop = true;
          break;
        }
        if (commands_.empty() || stats_.state) return Status::Ok();
        if (commands_.front().kind != CommandKind::kSubmit && pending_ > 0) return Status::Ok();
        c = std::move(commands_.front());
        commands_.pop_front();
      }
      busy = true;
      if (c.kind == CommandKind::kCall || c.kind == CommandKind::kCheckpoint) {
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
        if (checkpoint) {
          // The servers were busy with the same checkpoint meanwhile: silence is not a failure.
          const Clock::time_point now = Clock::now();
          std::fill(server_heard_.begin(), server_heard_.end(), now);
        }
        c.state->Complete(s);
        continue;
      }
      if (c.kind == CommandKind::kRest || c.kind == CommandKind::kStats) {
        const bool rest = c.kind == CommandKind::kRest;
        for (int s = 0; s < config_.servers(); ++s) {
          SendEmpty(s, rest ? MessageType::kRest : MessageType::kStatsRequest);
        }
        if (rest) {
          c.state->Complete(Status::Ok());
        } else {
          stats_.state = c.state;
          stats_.out = c.stats;
          stats_.answered.assign(static_cast<size_t>(config_.servers()), 0);
          stats_.merged = ParameterServerStats{};
          stats_.merged.workers.resize(static_cast<size_t>(config_.workers()));
          stats_.merged.bytes_in.assign(static_cast<size_t>(config_.servers()), 0);
          stats_.merged.bytes_out.assign(static_cast<size_t>(config_.servers()), 0);
        }
        continue;
      }
      Active& a = active_[c.tensor];
      if (a.state) {
        c.state->Complete(InternalError(fmt::format(
            "parameter '{}' submitted again before its pull completed", NameOf(c.tensor))));
        continue;
      }
      a.state = c.state;
      a.data = c.data;
      a.weight = c.weight;
      a.parts_left = static_cast<int>(plan_.by_tensor[c.tensor].size());
      ++pending_;
      if (a.parts_left == 0) Complete(c.tensor);
      for (uint32_t key : plan_.by_tensor[c.tensor]) queue_.insert({c.priority, key});
    }
    // Shut down: whatever is still pending will not complete.
    Cancel(CancelledError("parameter-server client shut down"));
    return Status::Ok();
  }

  // Completes every queued command and every pending submission with `status`.
  void Cancel(const Status& status) {
    std::deque<Command> commands;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      commands.swap(commands_);
      pending_ = 0;
    }
    for (Command& c : commands) c.state->Complete(status);
    if (stats_.state) {
      stats_.state->Complete(status);
      stats_ = StatsRequest{};
    }
    for (Active& a : active_) {
      if (a.state) a.state->Complete(status);
      a = Active{};
    }
    queue_.clear();
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

  Status SendPushes(bool& busy) {
    for (auto it = queue_.begin(); it != queue_.end();) {
      const KeyPart& part = plan_.parts[it->second];
      if (in_flight_[static_cast<size_t>(part.server)] >= kPushCredits) {
        ++it;
        continue;
      }
      const Active& a = active_[part.tensor];
      const std::span<const float> gradient = a.data.subspan(part.offset, part.count);
      MessageHeader h;
      h.type = MessageType::kPush;
      h.flags = ps_internal::kFlagPullAfter;
      h.encoding = Encoding::kFloats;
      h.key = part.key;
      h.step = clock_[part.key]++;
      h.version = version_[part.key];
      std::vector<std::byte> bytes;
      if (config_.weighted) h.aux = std::bit_cast<uint64_t>(a.weight);
      if ((!lag_.empty() && !lag_[part.key].Decide(gradient)) ||
          (config_.weighted && a.weight == 0)) {
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
      Post(part.server, std::move(bytes), true);
      pull_since_[part.key] = Clock::now();
      busy_->Begin();
      it = queue_.erase(it);
      busy = true;
    }
    return Status::Ok();
  }

  // Forgets the finished pushes and counts the unfinished ones per server.
  Status ReapPushes() {
    std::fill(in_flight_.begin(), in_flight_.end(), 0);
    for (auto it = pushes_.begin(); it != pushes_.end();) {
      if (!it->work->IsCompleted()) {
        ++in_flight_[static_cast<size_t>(it->server)];
        ++it;
        continue;
      }
      Status s = it->work->Wait(Duration::zero());
      if (!s.ok()) {
        return s.Annotate(fmt::format("parameter server: pushing to server rank {}",
                                      peers_.ServerRank(it->server)));
      }
      it = pushes_.erase(it);
    }
    return Status::Ok();
  }

  void Post(int server, std::vector<std::byte> bytes, bool push) {
    server_sent_[static_cast<size_t>(server)] = Clock::now();
    if (push) {
      push_bytes_ += bytes.size();
      // Pushes are watched for credits; their buffers live in pushes_.
      PushSend& p = pushes_.emplace_back();
      p.server = server;
      p.bytes = std::move(bytes);
      p.work = world_.ISend(peers_.ServerRank(server), ps_internal::kToServerTag, p.bytes);
      ++in_flight_[static_cast<size_t>(server)];
      return;
    }
    control_bytes_ += bytes.size();
    sends_.Post(peers_.ServerRank(server), ps_internal::kToServerTag, std::move(bytes));
  }

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
      FRUGAL_ASSIGN_OR_RETURN(int s, ReceiveFrom(**probe));
      FRUGAL_RETURN_IF_ERROR(Handle(s, message_));
    }
    return Status::Ok();
  }

  Status Handle(int s, const Message& m) {
    const int rank = peers_.ServerRank(s);
    switch (m.header.type) {
      case MessageType::kHeartbeat:
        return Status::Ok();
      case MessageType::kAbort:
        return AbortError(m);
      case MessageType::kParams:
        return OnParams(s, m).Annotate(
            fmt::format("parameter server: answer of server rank {}", rank));
      case MessageType::kStats:
        return OnStats(s, m).Annotate(
            fmt::format("parameter server: statistics of server rank {}", rank));
      default:
        return MalformedError(fmt::format("parameter server: unexpected {} from server rank {}",
                                          MessageTypeName(m.header.type), rank));
    }
  }

  Status OnParams(int s, const Message& m) {
    const uint32_t key = m.header.key;
    if (key >= plan_.parts.size() || plan_.parts[key].server != s) {
      return MalformedError(fmt::format("key {} is not held by this server", key));
    }
    const KeyPart& part = plan_.parts[key];
    if (!pull_since_[key]) {
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
          Row(part), "push, pull", *pull_since_[key], received,
          fmt::format("{{\"server\": {}, \"version\": {}, \"bytes\": {}}}", peers_.ServerRank(s),
                      m.header.version, ps_internal::kHeaderBytes + m.payload.size()));
    }
    if (pull_) {
      FRUGAL_RETURN_IF_ERROR(pull_->Apply(part, s, m.header.version, m.payload,
                                          a.data.subspan(part.offset, part.count)));
      if (options_.timeline != nullptr) {
        options_.timeline->Span(Row(part), "decompress", received, Clock::now());
      }
    } else {
      FRUGAL_RETURN_IF_ERROR(
          ps_internal::CopyFloats(m, part.count, a.data.subspan(part.offset, part.count)));
    }
    version_[key] = m.header.version;
    key_progress_[key] = m.header.progress;
    progress_ = *std::min_element(key_progress_.begin(), key_progress_.end());
    if (!lag_.empty()) lag_[key].Heard(std::bit_cast<double>(m.header.aux));
    pull_since_[key].reset();
    busy_->End();
    if (--a.parts_left == 0) Complete(part.tensor);
    return Status::Ok();
  }

  Status OnStats(int s, const Message& m) {
    const size_t i = static_cast<size_t>(s);
    if (!stats_.state || stats_.answered[i] != 0) {
      return MalformedError("statistics that were not asked for");
    }
    FRUGAL_ASSIGN_OR_RETURN(ps_internal::ServerStats stats,
                            ps_internal::DecodeServerStats(m.payload, config_.workers()));
    stats_.answered[i] = 1;
    stats_.merged.bytes_in[i] = stats.bytes_in;
    stats_.merged.bytes_out[i] = stats.bytes_out;
    stats_.merged.pushes += stats.pushes;
    stats_.merged.updates += stats.updates;
    for (size_t w = 0; w < stats.workers.size(); ++w)
      stats_.merged.workers[w].Merge(stats.workers[w]);
    if (std::all_of(stats_.answered.begin(), stats_.answered.end(),
                    [](char a) { return a != 0; })) {
      *stats_.out = std::move(stats_.merged);
      std::shared_ptr<WorkState> state = std::move(stats_.state);
      stats_ = StatsRequest{};
      state->Complete(Status::Ok());
    }
    return Status::Ok();
  }

  void Complete(uint32_t tensor) {
    Active& a = active_[tensor];
    std::shared_ptr<WorkState> state = std::move(a.state);
    a = Active{};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --pending_;
    }
    ++completed_;
    state->Complete(Status::Ok());
  }

  Status CheckDeadlines(Clock::time_point now) {
    const Duration t = config_.timeout;
    for (int s = 0; s < config_.servers(); ++s) {
      if (now - server_heard_[static_cast<size_t>(s)] > t) {
        return TimeoutError(fmt::format(
            "parameter server: server rank {} sent nothing for {:.1f} s", peers_.ServerRank(s),
            ps_internal::Seconds(now - server_heard_[static_cast<size_t>(s)])));
      }
    }
    for (const KeyPart& part : plan_.parts) {
      const auto& since = pull_since_[part.key];
      if (since && now - *since > 2 * t) {
        return TimeoutError(fmt::format(
            "parameter server: the pull of key '{}' from server rank {} was not answered within "
            "{:.1f} s",
            part.name, peers_.ServerRank(part.server), ps_internal::Seconds(now - *since)));
      }
    }
    return Status::Ok();
  }

  void SendHeartbeats(Clock::time_point now) {
    const Clock::duration interval = ps_internal::HeartbeatInterval(config_.timeout);
    for (int s = 0; s < config_.servers(); ++s) {
      if (now - server_sent_[static_cast<size_t>(s)] < interval) continue;
      SendEmpty(s, MessageType::kHeartbeat);
    }
  }

  void SendEmpty(int server, MessageType type, uint64_t step = 0) {
    MessageHeader h;
    h.type = type;
    h.step = step;
    std::vector<std::byte> bytes;
    ps_internal::EncodeMessage(h, std::span<const std::byte>(), bytes);
    Post(server, std::move(bytes), false);
  }

  Status SendDone() {
    for (int s = 0; s < config_.servers(); ++s) SendEmpty(s, MessageType::kDone);
    for (PushSend& p : pushes_) (void)p.work->Wait(config_.timeout);
    pushes_.clear();
    sends_.Drain(config_.timeout);
    return Status::Ok();
  }

  // Fails everything pending and tells the servers.
  void Fail(const Status& status) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error_.ok()) error_ = status;
    }
    Cancel(status);
    const std::string reason = fmt::format("worker rank {}: {}", world_.rank(), status.message())
                                   .substr(0, ps_internal::kMaxAbortBytes);
    MessageHeader h;
    h.type = MessageType::kAbort;
    h.encoding = Encoding::kBytes;
    std::vector<std::byte> bytes;
    for (int s = 0; s < config_.servers(); ++s) {
      ps_internal::EncodeMessage(h, std::as_bytes(std::span<const char>(reason)), bytes);
      Post(s, bytes, false);
    }
    sends_.Drain(ps_internal::kAbortSendBound);
    for (PushSend& p : pushes_) (void)p.work->Wait(Duration::zero());
    pushes_.clear();
  }

  struct Active {
    std::shared_ptr<WorkState> state;
    std::span<float> data;
    double weight = 0;
    int parts_left = 0;
  };
  struct StatsRequest {
    std::shared_ptr<WorkState> state;
    ParameterServerStats* out = nullptr;
    std::vector<char> answered;
    ParameterServerStats merged;
  };
  struct PushSend {
    int server = 0;
    std::vector<std::byte> bytes;
    std::unique_ptr<Work> work;
  };

  Transport& world_;
  Transport& workers_;
  ParameterServerConfig config_;
  ParameterClientOptions options_;
  ps_internal::Peers peers_;
  ps_internal::PendingSends sends_;
  int worker_ = -1;
  ps_internal::ShardPlan plan_;
  std::unordered_map<std::string, uint32_t> by_name_;
  // Owned by the client's thread.
  std::vector<uint64_t> version_;
  std::vector<uint64_t> clock_;
  std::vector<std::optional<Clock::time_point>> pull_since_;
  std::vector<Active> active_;
  std::set<std::pair<int, uint32_t>> queue_;  // (priority, key) of the pushes to send
  std::deque<PushSend> pushes_;
  std::vector<int> in_flight_;
  std::vector<Clock::time_point> server_heard_;
  std::vector<Clock::time_point> server_sent_;
  std::vector<uint64_t> key_progress_;
  std::vector<ps_internal::LagKeyRule> lag_;
  std::optional<ps_internal::PushEncoder> push_;
  std::optional<ps_internal::PullDecoder> pull_;
  std::vector<std::byte> payload_;  // scratch: a compressed push
  StatsRequest stats_;
  std::vector<std::byte> buffer_;
  Message message_;
  // Shared with the training thread.
  std::mutex mutex_;
  std::deque<Command> commands_;
  int pending_ = 0;  // submissions taken and not yet complete
  bool stop_ = false;
  Status error_;
  std::atomic<uint64_t> push_bytes_{0};     // the pushes, headers included
  std::atomic<uint64_t> control_bytes_{0};  // everything else sent to the servers
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> progress_{0};
  std::shared_ptr<WaitBook> waits_ = std::make_shared<WaitBook>();
  std::shared_ptr<WaitBook> busy_ = std::make_shared<WaitBook>();
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
  return impl_->Call(std::move(name), std::move(fn));
}

Status ParameterClient::Shutdown() { return impl_->Shutdown(); }
EngineStats ParameterClient::stats() const { return impl_->stats(); }
uint64_t ParameterClient::push_bytes() const { return impl_->push_bytes(); }
uint64_t ParameterClient::progress() const { return impl_->progress(); }
std::unique_ptr<Work> ParameterClient::Rest() { return impl_->Rest(); }
std::unique_ptr<Work> ParameterClient::Checkpoint(uint64_t step,
                                                  std::function<Status(Transport&)> save) {
  return impl_->Checkpoint(step, std::move(save));
}
void ParameterClient::VisitState(StateVisitor& visitor) { impl_->VisitState(visitor); }
std::unique_ptr<Work> ParameterClient::FetchStats(ParameterServerStats* out) {
  return impl_->FetchStats(out);
}

}  // namespace frugal
