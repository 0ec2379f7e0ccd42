// The server loop of the parameter server (see parameter_server.h for the protocol).
//
// One thread (the caller's) owns the world transport and does everything: it probes for the next
// message from any worker (tag kToServer), receives and validates it (DecodeMessage, then the key
// and the sizes against the shard plan), handles it, posts replies without waiting for them
// (completed sends are reaped as the loop goes), and every kTick checks its deadlines and sends
// heartbeats. It backs off (frugal::BackOff) while nothing arrives.
//
// State per key (ServerKey): the parameters x, the optimizer state, the version, each worker's
// clock, the sum of the pushes of the current version and the pulls held. Pushes are added into
// the sum in worker order (a push that arrives before its predecessors waits, decoded, until they
// are in), so a run is repeatable bit for bit whatever the arrival order. When quorum() pushes
// are in, the update x -= lr(version) * d(sum / divisor()) is applied (ApplySgd), the version
// advances, and every held pull whose need is met is answered with the key's values.
//
// Start: the first hello fixes the tensors, so the shard plan (PlanShards over the hello's
// tensors, the configuration's servers and part size); every other hello must name the same
// tensors and the same configuration text. Worker 0 sends the initial values of this server's
// keys after its hello; the workers are welcomed once every hello and every initial value are in.
//
// Deadlines (config.timeout = T): every hello within 3 T of the start; a held pull answered within
// T (else the job fails naming the key, the version and the workers whose push is missing); every
// welcomed worker heard from (any message: pushes, heartbeats) within T. A failure is sent to
// every worker as an abort with the reason, then returned.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <optional>

#include "frugal/backoff.h"
#include "frugal/parameter_server.h"
#include "ps/consistency.h"
#include "ps/messages.h"
#include "ps/ps_common.h"
#include "ps/server_optimizer.h"
#include "ps/sharding.h"

namespace frugal {
namespace ps_internal {
namespace {

struct HeldPull {
  int worker = 0;
  PullNeed need;
  Clock::time_point since;
};

struct ServerKey {
  const KeyPart* part = nullptr;
  bool initialized = false;
  std::vector<float> x;
  KeyOptimizerState optimizer;
  uint64_t version = 0;
  uint64_t progress = 0;        // pushes received from all workers
  std::vector<uint64_t> clock;  // pushes received from each worker
  // The pushes of the current version: `sum` holds those of workers below `next`, in order;
  // `early` those that came before their predecessors.
  std::vector<float> sum;
  std::vector<std::vector<float>> early;
  std::vector<char> have;
  int have_count = 0;
  int next = 0;
  std::vector<HeldPull> held;
};

class Server {
 public:
  Server(Transport& world, const ParameterServerConfig& config, const ServerOptimizer& optimizer,
         const Logger& logger)
      : world_(world),
        config_(config),
        optimizer_(optimizer),
        logger_(logger),
        rules_(config.consistency, config.workers()),
        peers_(world, config) {
    const int w = config.workers();
    hello_.assign(w, 0);
    welcomed_.assign(w, 0);
    done_.assign(w, 0);
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
    Status status = Loop();
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
        return OnPush(w, m);
      case MessageType::kPull:
        return OnPull(w, m);
      case MessageType::kHeartbeat:
        return Status::Ok();
      case MessageType::kDone:
        done_[w] = 1;
        return Status::Ok();
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
        ServerKey& k = keys_[key];
        k.part = &plan_.parts[key];
        k.clock.assign(static_cast<size_t>(config_.workers()), 0);
        k.have.assign(static_cast<size_t>(config_.workers()), 0);
        k.early.resize(static_cast<size_t>(config_.workers()));
        ++inits_left_;
      }
    } else if (!SameTensors(hello.tensors, tensors_)) {
      return InvalidArgumentError(
          fmt::format("its model ({} tensors) differs from worker rank {}'s ({} tensors)",
                      hello.tensors.size(), peers_.WorkerRank(tensors_from_), tensors_.size()));
    }
    hello_[w] = 1;
    Welcome();
    return Status::Ok();
  }

  Status OnInit(int w, const Message& m) {
    if (w != 0) return MalformedError("only worker 0 sends initial values");
    FRUGAL_ASSIGN_OR_RETURN(ServerKey * k, Mine(m.header.key));
    if (k->initialized)
      return MalformedError(fmt::format("key {} initialised twice", k->part->name));
    k->x.resize(k->part->count);
    FRUGAL_RETURN_IF_ERROR(CopyFloats(m, k->part->count, k->x));
    k->initialized = true;
    --inits_left_;
    Welcome();
    return Status::Ok();
  }

  // Welcomes every worker once every hello (all agreeing) and every initial value are in, so
  // that nobody starts while a worker may still be refused.
  void Welcome() {
    if (inits_left_ > 0 || keys_.empty()) return;
    if (std::any_of(hello_.begin(), hello_.end(), [](char h) { return h == 0; })) return;
    for (int w = 0; w < config_.workers(); ++w) {
      if (welcomed_[w] != 0) continue;
      MessageHeader h;
      h.type = MessageType::kWelcome;
      Post(w, h, {});
      welcomed_[w] = 1;
    }
  }

  StatusOr<ServerKey*> Mine(uint32_t key) {
    auto it = keys_.find(key);
    if (it == keys_.end()) {
      return MalformedError(fmt::format("key {} is not held by this server", key));
    }
    return &it->second;
  }

  Status OnPush(int w, const Message& m) {
    if (welcomed_[w] == 0) return MalformedError("a push before the welcome");
    FRUGAL_ASSIGN_OR_RETURN(ServerKey * k, Mine(m.header.key));
    if (m.header.step != k->clock[w]) {
      return MalformedError(fmt::format("push of key '{}' for step {}, expected step {}",
                                        k->part->name, m.header.step, k->clock[w]));
    }
    std::vector<float> gradient(k->part->count);
    FRUGAL_RETURN_IF_ERROR(CopyFloats(m, k->part->count, gradient));
    ++k->clock[w];
    ++k->progress;
    std::string error;
    rules_.OnPush(k->version, m.header.version, error);
    if (!error.empty()) {
      return MalformedError(fmt::format("push of key '{}': {}", k->part->name, error));
    }
    if (k->have[w] != 0) {
      return MalformedError(
          fmt::format("a second push of key '{}' for version {}", k->part->name, k->version));
    }
    if ((m.header.flags & kFlagPullAfter) != 0) {
      k->held.push_back({w, rules_.NeedOf(m.header.version), Clock::now()});
    }
    Accumulate(*k, w, std::move(gradient));
    if (k->have_count == rules_.quorum()) Update(*k);
    AnswerPulls(*k);
    return Status::Ok();
  }

  Status OnPull(int w, const Message& m) {
    if (welcomed_[w] == 0) return MalformedError("a pull before the welcome");
    FRUGAL_ASSIGN_OR_RETURN(ServerKey * k, Mine(m.header.key));
    k->held.push_back({w, PullNeed{m.header.version}, Clock::now()});
    AnswerPulls(*k);
    return Status::Ok();
  }

  void Accumulate(ServerKey& k, int w, std::vector<float> gradient) {
    k.have[w] = 1;
    ++k.have_count;
    k.early[w] = std::move(gradient);
    while (k.next < config_.workers() && k.have[k.next] != 0) AddNext(k);
  }

  void AddNext(ServerKey& k) {
    std::vector<float>& g = k.early[k.next];
    if (k.sum.empty()) {
      k.sum = std::move(g);
    } else {
      for (size_t i = 0; i < g.size(); ++i) k.sum[i] += g[i];
    }
    std::vector<float>().swap(g);
    ++k.next;
  }

  void Update(ServerKey& k) {
    while (k.next < config_.workers()) {
      if (k.have[k.next] != 0) {
        AddNext(k);
      } else {
        ++k.next;
      }
    }
    const float divisor = static_cast<float>(rules_.divisor());
    for (float& v : k.sum) v /= divisor;
    const double lr = optimizer_.lr ? optimizer_.lr(static_cast<int64_t>(k.version)) : 0.0;
    ApplySgd(optimizer_, lr, k.x, k.sum, k.optimizer);
    ++k.version;
    ++updates_;
    k.sum.clear();
    std::fill(k.have.begin(), k.have.end(), 0);
    k.have_count = 0;
    k.next = 0;
  }

  void AnswerPulls(ServerKey& k) {
    auto ready = [&](const HeldPull& pull) { return rules_.Ready(pull.need, k.version); };
    for (const HeldPull& pull : k.held) {
      if (!ready(pull)) continue;
      MessageHeader h;
      h.type = MessageType::kParams;
      h.encoding = Encoding::kFloats;
      h.key = k.part->key;
      h.version = k.version;
      h.progress = k.progress;
      Post(pull.worker, h, std::as_bytes(std::span<const float>(k.x)));
    }
    std::erase_if(k.held, ready);
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
      if (welcomed_[w] == 0 || done_[w] != 0 || now - last_heard_[w] <= t) continue;
      return TimeoutError(fmt::format(
          "parameter server: worker rank {} sent nothing for {:.1f} s (no push, no heartbeat)",
          peers_.WorkerRank(w), Seconds(now - last_heard_[w])));
    }
    for (auto& [key, k] : keys_) {
      for (const HeldPull& pull : k.held) {
        if (now - pull.since <= t) continue;
        std::vector<int> missing;
        for (int w = 0; w < config_.workers(); ++w) {
          if (k.have[w] == 0) missing.push_back(peers_.WorkerRank(w));
        }
        return TimeoutError(fmt::format(
            "parameter server: the pull of key '{}' by worker rank {} waited {:.1f} s for version "
            "{}: no push of version {} from worker {}",
            k.part->name, peers_.WorkerRank(pull.worker), Seconds(now - pull.since),
            pull.need.min_version, k.version, RanksText(missing)));
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
    report.updates = updates_;
    report.key_names.clear();
    report.key_values.clear();
    for (const auto& [key, k] : keys_) {
      report.key_names.push_back(k.part->name);
      report.key_values.push_back(k.x);
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
  ConsistencyRules rules_;
  Peers peers_;
  PendingSends sends_{world_, "worker"};
  int index_ = -1;
  std::vector<TensorSpec> tensors_;
  int tensors_from_ = 0;
  ShardPlan plan_;
  std::map<uint32_t, ServerKey> keys_;
  int inits_left_ = 0;
  std::vector<char> hello_;
  std::vector<char> welcomed_;
  std::vector<char> done_;
  std::vector<Clock::time_point> last_heard_;
  std::vector<Clock::time_point> last_sent_;
  std::vector<std::byte> buffer_;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  uint64_t updates_ = 0;
};

}  // namespace
}  // namespace ps_internal

Status RunParameterServer(Transport& world, const ParameterServerConfig& config,
                          const ServerOptimizer& optimizer, const Logger& logger,
                          ServerReport* report) {
  ps_internal::Server server(world, config, optimizer, logger);
  return server.Run(report);
}

}  // namespace frugal
