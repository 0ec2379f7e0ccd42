// The start of a parameter-server worker (internal): its codecs, its greeting of the servers, and
// the inbox it reads the servers' messages through from then on.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "frugal/parameter_server.h"
#include "frugal/transport.h"
#include "ps/codec.h"
#include "ps/messages.h"
#include "ps/ps_common.h"
#include "ps/sharding.h"

namespace frugal::ps_internal {

using NamedValues = std::span<const std::pair<std::string, std::span<const float>>>;

// Receives a message a server sent this worker (tag kToWorkerTag) and decodes it.
class Inbox {
 public:
  Inbox(Transport& world, const Peers& peers, Duration timeout)
      : world_(world), peers_(peers), timeout_(timeout) {}
  // Receives the probed message; the server (index) it came from. kMalformed for a message from
  // a rank that is not a server, or one that does not decode.
  StatusOr<int> Receive(const ProbeResult& found);
  // The last message received; its payload is valid until the next Receive.
  const Message& message() const { return message_; }

 private:
  Transport& world_;
  const Peers& peers_;
  Duration timeout_;
  std::vector<std::byte> buffer_;
  Message message_;
};

// The compression of pushes and pulls the configuration asks for (codec.h); the copy of the
// parameters that compressed pulls update starts from `parameters`.
Status MakeClientCodecs(const ParameterServerConfig& config, int worker, const ShardPlan& plan,
                        NamedValues parameters, std::optional<PushEncoder>& push,
                        std::optional<PullDecoder>& pull);

// On the caller's thread: a hello to every server (the worker, the configuration's text, the
// tensors), on worker 0 the initial value of every key, then every server's welcome within 3 T
// (T = config.timeout), with heartbeats meanwhile to the servers that welcomed it. kTimeout
// naming the servers that did not welcome it; an abort from a server as kCancelled.
Status Greet(Transport& world, const Peers& peers, const ParameterServerConfig& config, int worker,
             std::span<const TensorSpec> tensors, const ShardPlan& plan, NamedValues parameters,
             Inbox& inbox);

// The reason a server's abort message gives, as kCancelled.
Status AbortError(const Message& m);

}  // namespace frugal::ps_internal
