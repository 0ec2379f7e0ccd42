// What a parameter-server worker reports (internal): its own counters, which the training thread
// reads while the client's thread adds to them, and the servers' statistics, gathered from every
// server's answer to a stats request.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine_work.h"
#include "frugal/engine.h"
#include "frugal/parameter_server.h"

namespace frugal::ps_internal {

struct ClientCounters {
  std::atomic<uint64_t> push_bytes{0};     // the pushes, headers included
  std::atomic<uint64_t> control_bytes{0};  // everything else sent to the servers
  std::atomic<uint64_t> completed{0};      // submissions completed
  std::atomic<uint64_t> progress{0};       // the least progress over the keys
  // The training thread's waits for pulls, and the time pushes wait for their answers.
  std::shared_ptr<engine_internal::WaitBook> waits = std::make_shared<engine_internal::WaitBook>();
  std::shared_ptr<engine_internal::WaitBook> busy = std::make_shared<engine_internal::WaitBook>();

  // comm_seconds: the time with a push unanswered; exposed_seconds: the part of it the training
  // thread waited; tensors: submissions completed; negotiation_bytes: control_bytes.
  EngineStats Stats() const;
};

// One stats request at a time: Begin, then every server's Answer; the last completes the request
// with the merged statistics.
class StatsGather {
 public:
  bool active() const { return state_ != nullptr; }
  void Begin(std::shared_ptr<engine_internal::WorkState> state, ParameterServerStats* out,
             int servers, int workers);
  // Server `server`'s statistics (the payload of its kStats); kMalformed when none was asked of
  // it or the payload does not decode.
  Status Answer(int server, std::span<const std::byte> payload);
  // Completes the request, if any, with `status`.
  void Cancel(const Status& status);

 private:
  std::shared_ptr<engine_internal::WorkState> state_;
  ParameterServerStats* out_ = nullptr;
  int workers_ = 0;
  std::vector<char> answered_;
  ParameterServerStats merged_;
};

}  // namespace frugal::ps_internal
