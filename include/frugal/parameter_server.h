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
#include "frugal/status.h"
#include "frugal/timeline.h"
#include "frugal/transport.h"

namespace frugal {

// When a server applies pushes and answers pulls (per key):
//   kBsp  waits for the push of every worker for the current version, applies their average
//         once and answers each worker's pull of that version exactly once.
enum class PsConsistency { kBsp };

// Everything the ranks of a parameter-server job agree on.
struct ParameterServerConfig {
  std::vector<int> worker_ranks;        // world ranks, in worker order (worker w = worker_ranks[w])
  std::vector<int> server_ranks;        // world ranks, in server order
  size_t part_bytes = size_t{4} << 20;  // largest key (BytePS's default partition)
  PsConsistency consistency = PsConsistency::kBsp;
  Duration timeout = kDefaultTimeout;

  int workers() const { return static_cast<int>(worker_ranks.size()); }
  int servers() const { return static_cast<int>(server_ranks.size()); }
  // The configuration as text (consistency, servers, part size, ...), compared at the hello.
  std::string Describe() const;
};

// The optimizer the servers run on every key: torch's SGD (dampening 0),
//   d = g + weight_decay * x;  m = d at the first update, then momentum * m + d;
//   d = nesterov ? d + momentum * m : m  (momentum > 0);  x -= lr(server_step) * d,
// where g is the averaged gradient of the update and server_step the key's version before it.
struct ServerOptimizer {
  std::function<double(int64_t server_step)> lr;
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// What a server did, for reports and tests.
struct ServerReport {
  uint64_t bytes_in = 0;   // payload bytes received from workers
  uint64_t bytes_out = 0;  // payload bytes sent to workers (counted where sent)
  uint64_t updates = 0;    // optimizer updates applied, over all keys
  // The server's keys: their names and final parameters.
  std::vector<std::string> key_names;
  std::vector<std::vector<float>> key_values;
};

// Runs the server loop of this rank (one of config.server_ranks) over `world` until every worker
// has sent done (OK) or the job fails (the Status names the ranks and keys; every worker is told).
// Blocks the calling thread, which owns `world` meanwhile. `report` (optional) receives what the
// server did.
Status RunParameterServer(Transport& world, const ParameterServerConfig& config,
                          const ServerOptimizer& optimizer, const Logger& logger,
                          ServerReport* report = nullptr);

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
  // Sends done to every server and stops the thread; pending work fails with kCancelled.
  // Returns the first error the client met. Idempotent.
  Status Shutdown() override;
  // comm_seconds: while pushes wait for their pulls; negotiation_bytes: the control messages
  // sent after Connect (heartbeats, done), which the transport counts with the pushes.
  EngineStats stats() const override;
  // The bytes of the pushes (headers included), counted where sent: the training traffic to the
  // servers. Thread safe.
  uint64_t push_bytes() const;

  class Impl;

 private:
  explicit ParameterClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal
