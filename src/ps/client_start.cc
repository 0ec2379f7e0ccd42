#include "ps/client_start.h"

#include <fmt/format.h>

#include <algorithm>

namespace frugal::ps_internal {
namespace {

// A blocking send to server `server` on the caller's thread.
Status SendNow(Transport& world, const Peers& peers, Duration timeout, int server,
               std::span<const std::byte> bytes, std::string_view what) {
  return Send(world, peers.ServerRank(server), kToServerTag, bytes, timeout)
      .Annotate(fmt::format("parameter server: sending the {} to server rank {}", what,
                            peers.ServerRank(server)));
}

}  // namespace

StatusOr<int> Inbox::Receive(const ProbeResult& found) {
  const int s = peers_.ServerOf(found.source);
  buffer_.resize(found.bytes);
  FRUGAL_RETURN_IF_ERROR(
      Recv(world_, found.source, kToWorkerTag, buffer_, timeout_)
          .Annotate(fmt::format("parameter server: receiving from rank {}", found.source)));
  if (s < 0) {
    return MalformedError(fmt::format(
        "parameter server: a message from rank {}, which is not a server", found.source));
  }
  StatusOr<Message> m = DecodeMessage(buffer_);
  if (!m.ok()) return m.status().Annotate(fmt::format("from server rank {}", found.source));
  message_ = *m;
  return s;
}

Status AbortError(const Message& m) { return CancelledError(AsText(m.payload)); }

Status MakeClientCodecs(const ParameterServerConfig& config, int worker, const ShardPlan& plan,
                        NamedValues parameters, std::optional<PushEncoder>& push,
                        std::optional<PullDecoder>& pull) {
  FRUGAL_RETURN_IF_ERROR(CheckCompression(config));
  if (!config.push_compress.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(
        std::unique_ptr<Compressor> c,
        MakeKeyCompressor(
            config.push_compress,
            config.push_error_feedback ? KeyErrorFeedback::kAdd : KeyErrorFeedback::kAsSpecified,
            "--compress"));
    push.emplace(std::move(c), config.seed, worker, config.workers());
  }
  if (!config.pull_compress.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(
        std::unique_ptr<Compressor> c,
        MakeKeyCompressor(config.pull_compress, KeyErrorFeedback::kWithout, "--compress-pull"));
    pull.emplace(std::move(c), config.seed, config.servers());
    for (const KeyPart& part : plan.parts) {
      pull->Start(part, parameters[part.tensor].second.subspan(part.offset, part.count));
    }
  }
  return Status::Ok();
}

namespace {

// Every server's welcome within 3 T.
Status AwaitWelcomes(Transport& world, const Peers& peers, const ParameterServerConfig& config,
                     Inbox& inbox) {
  std::vector<char> welcomed(static_cast<size_t>(config.servers()), 0);
  int left = config.servers();
  const Clock::time_point deadline = Clock::now() + 3 * config.timeout;
  const auto slice = std::chrono::duration_cast<Duration>(HeartbeatInterval(config.timeout));
  while (left > 0) {
    const auto remaining = std::chrono::duration_cast<Duration>(deadline - Clock::now());
    StatusOr<ProbeResult> probe =
        remaining.count() > 0 ? world.Probe(kAnySource, kToWorkerTag, std::min(remaining, slice))
                              : StatusOr<ProbeResult>(TimeoutError(""));
    if (!probe.ok() && probe.status().code() == StatusCode::kTimeout && remaining > slice) {
      // Still waiting: tell the servers that already welcomed us that we are alive.
      MessageHeader h;
      h.type = MessageType::kHeartbeat;
      std::vector<std::byte> bytes;
      EncodeMessage(h, std::span<const std::byte>(), bytes);
      for (int s = 0; s < config.servers(); ++s) {
        if (welcomed[s] != 0) {
          FRUGAL_RETURN_IF_ERROR(SendNow(world, peers, config.timeout, s, bytes, "heartbeat"));
        }
      }
      continue;
    }
    if (!probe.ok() && probe.status().code() == StatusCode::kTimeout) {
      std::vector<int> silent;
      for (int s = 0; s < config.servers(); ++s) {
        if (welcomed[s] == 0) silent.push_back(peers.ServerRank(s));
      }
      return TimeoutError(fmt::format("parameter server: no welcome from server {} within {} ms",
                                      RanksText(silent), (3 * config.timeout).count()));
    }
    FRUGAL_RETURN_IF_ERROR(probe.status());
    FRUGAL_ASSIGN_OR_RETURN(int s, inbox.Receive(*probe));
    const Message& m = inbox.message();
    if (m.header.type == MessageType::kAbort) return AbortError(m);
    if (m.header.type == MessageType::kHeartbeat) continue;  // from a server that welcomed us
    if (m.header.type != MessageType::kWelcome || welcomed[s] != 0) {
      return MalformedError(fmt::format("parameter server: unexpected {} from server rank {}",
                                        MessageTypeName(m.header.type), peers.ServerRank(s)));
    }
    welcomed[s] = 1;
    --left;
  }
  return Status::Ok();
}

}  // namespace

Status Greet(Transport& world, const Peers& peers, const ParameterServerConfig& config, int worker,
             std::span<const TensorSpec> tensors, const ShardPlan& plan, NamedValues parameters,
             Inbox& inbox) {
  Hello hello;
  hello.worker = static_cast<uint32_t>(worker);
  hello.config = config.Describe();
  hello.tensors.assign(tensors.begin(), tensors.end());
  std::vector<std::byte> bytes;
  MessageHeader h;
  h.type = MessageType::kHello;
  h.encoding = Encoding::kBytes;
  EncodeMessage(h, EncodeHello(hello), bytes);
  for (int s = 0; s < config.servers(); ++s) {
    FRUGAL_RETURN_IF_ERROR(SendNow(world, peers, config.timeout, s, bytes, "hello"));
  }
  if (worker == 0) {
    for (const KeyPart& part : plan.parts) {
      MessageHeader init;
      init.type = MessageType::kInit;
      init.encoding = Encoding::kFloats;
      init.key = part.key;
      EncodeMessage(init, parameters[part.tensor].second.subspan(part.offset, part.count), bytes);
      FRUGAL_RETURN_IF_ERROR(
          SendNow(world, peers, config.timeout, part.server, bytes, "initial values"));
    }
  }
  return AwaitWelcomes(world, peers, config, inbox);
}

}  // namespace frugal::ps_internal
