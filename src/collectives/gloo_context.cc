// Gloo contexts and all-reduces (see frugal/gloo.h).
//
// Mode. Gloo's TCP pairs either leave sending and receiving to Gloo's I/O thread (async) or do
// both in the calling thread (sync, busypoll). In the calling-thread modes a send blocks in
// writev until the whole message is in the kernel, and a rank reads only after its own send:
// when two ranks send each other more than their socket buffers hold (a ring chunk of a 16 MiB
// all-reduce can be enough), each waits for the other to read, and both stay there until the
// socket timeout. The I/O thread reads whatever arrives, so async cannot deadlock that way: it is
// the default, the other two are opt-in.
//
// Timeout. GlooContextOptions::timeout bounds every wait of Gloo: each pair's socket
// timeouts in the calling-thread modes, each wait for a send or receive completion in async mode.
// A wait that expires throws with the address Gloo keeps for the pair's remote end ("Read timeout
// [127.0.0.1]:41234"). That is the remote end of the connection, or, when the connection was
// accepted before this rank's own connect call ran, the listening address rank r published in
// the rendezvous store (Gloo's connect overwrites the address it learnt on accepting). So rank r
// goes by two addresses (RemoteAddresses): its end of the connection, which every rank publishes
// after connecting, and its listening address for the pair, read back from the store.
// DescribeGlooFailure maps the address in Gloo's message back to the rank and picks the code by
// what happened: kTimeout for an expired wait, kPeerLost for a connection the other side closed
// or reset, else kIoError.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>

#include "frugal/gloo.h"

#if FRUGAL_WITH_GLOO
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <stdlib.h>

#include <array>
#include <atomic>
#include <exception>
#include <filesystem>

#include "frugal/collectives.h"
#endif

namespace frugal {
namespace {

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// `address` ("[127.0.0.1]:4123") occurs in `text` and is not the start of a longer port.
bool ContainsAddress(std::string_view text, std::string_view address) {
  for (size_t at = text.find(address); at != std::string_view::npos;
       at = text.find(address, at + 1)) {
    const size_t end = at + address.size();
    if (end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]))) return true;
  }
  return false;
}

#if FRUGAL_WITH_GLOO

class GlooAllreduceImpl final : public GlooAllreduce {
 public:
  GlooAllreduceImpl(std::shared_ptr<gloo::rendezvous::Context> context,
                    std::unique_ptr<gloo::Algorithm> algorithm, GlooAlgorithm kind,
                    std::shared_ptr<const std::vector<std::vector<std::string>>> remote_addresses,
                    std::shared_ptr<std::atomic<bool>> broken, Duration timeout)
      : context_(std::move(context)),
        algorithm_(std::move(algorithm)),
        kind_(kind),
        remote_addresses_(std::move(remote_addresses)),
        broken_(std::move(broken)),
        timeout_(timeout) {}

  Status Run() override {
    try {
      algorithm_->run();
    } catch (const std::exception& e) {
      *broken_ = true;
      return DescribeGlooFailure(e.what(), *remote_addresses_, timeout_)
          .Annotate(fmt::format("Gloo {} allreduce", GlooAlgorithmName(kind_)));
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::unique_ptr<gloo::Algorithm> algorithm_;
  GlooAlgorithm kind_;
  std::shared_ptr<const std::vector<std::vector<std::string>>> remote_addresses_;
  std::shared_ptr<std::atomic<bool>> broken_;
  Duration timeout_;
};

// The slot of Farewell's messages: no all-reduce's (Gloo numbers those from 0 up).
constexpr int kFarewellSlot = INT_MAX;

// A barrier that returns only once its own messages have left. Every rank enters it after its
// last all-reduce returned, so after it no message of an all-reduce is still on its way to or
// from this rank. Its messages travel in a slot of their own: a rank that made fewer all-reduces
// than another (it failed before making one) cannot receive them into a buffer of another size.
void Farewell(gloo::Context& context) {
  const int size = context.size;
  std::vector<int> sent(static_cast<size_t>(size)), received(static_cast<size_t>(size));
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends, receives;
  for (int r = 0; r < size; ++r) {
    if (r == context.rank) continue;
    auto& pair = context.getPair(r);
    sends.push_back(
        pair->createSendBuffer(kFarewellSlot, &sent[static_cast<size_t>(r)], sizeof(int)));
    receives.push_back(
        pair->createRecvBuffer(kFarewellSlot, &received[static_cast<size_t>(r)], sizeof(int)));
  }
  for (auto& buffer : sends) buffer->send();
  for (auto& buffer : receives) buffer->waitRecv();
  for (auto& buffer : sends) buffer->waitSend();
}

class GlooContextImpl final : public GlooContext {
 public:
  GlooContextImpl(std::shared_ptr<gloo::rendezvous::Context> context,
                  std::vector<std::vector<std::string>> remote_addresses, Duration timeout)
      : context_(std::move(context)),
        remote_addresses_(std::make_shared<const std::vector<std::vector<std::string>>>(
            std::move(remote_addresses))),
        timeout_(timeout) {}

  // Gloo's all-reduces return before their last messages have left (halving-doubling does not
  // wait for its final notifications): closing the connections at once could cut a message a
  // peer still waits for. Unless an all-reduce failed, the ranks first meet in a Farewell, bounded
  // by the timeout; its failure only means a peer left first.
  ~GlooContextImpl() override {
    if (*broken_) return;
    try {
      Farewell(*context_);
    } catch (const std::exception&) {
    }
  }

  StatusOr<std::unique_ptr<GlooAllreduce>> MakeAllreduce(GlooAlgorithm algorithm,
                                                         std::span<float> data) override {
    if (data.size() > static_cast<size_t>(INT_MAX)) {
      return InvalidArgumentError("Gloo allreduce: more than INT_MAX elements");
    }
    std::unique_ptr<gloo::Algorithm> made;
    try {
      std::vector<float*> ptrs = {data.data()};
      const int count = static_cast<int>(data.size());
      if (algorithm == GlooAlgorithm::kRingChunked) {
        made = std::make_unique<gloo::AllreduceRingChunked<float>>(context_, ptrs, count);
      } else {
        made = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context_, ptrs, count);
      }
    } catch (const std::exception& e) {
      return DescribeGlooFailure(e.what(), *remote_addresses_, timeout_)
          .Annotate(fmt::format("making Gloo's {} allreduce", GlooAlgorithmName(algorithm)));
    }
    return std::unique_ptr<GlooAllreduce>(std::make_unique<GlooAllreduceImpl>(
        context_, std::move(made), algorithm, remote_addresses_, broken_, timeout_));
  }

 private:
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::shared_ptr<const std::vector<std::vector<std::string>>> remote_addresses_;
  std::shared_ptr<std::atomic<bool>> broken_ = std::make_shared<std::atomic<bool>>(false);
  Duration timeout_;
};

// kIoError unless `host` resolves to an address.
Status Resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    return IoError(fmt::format(
        "Gloo: this rank's host name '{}' does not resolve ({}); name a network interface "
        "instead",
        host, gai_strerror(rc)));
  }
  freeaddrinfo(found);
  return Status::Ok();
}

// Strings of every rank, in rank order.
StatusOr<std::vector<std::string>> GatherStrings(Transport& t, const std::string& mine,
                                                 Duration timeout) {
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(Allgatherv(t, std::as_bytes(std::span<const char>(mine)), all, sizes,
                                    CollectiveOptions{timeout, false}));
  std::vector<std::string> strings;
  size_t offset = 0;
  for (size_t size : sizes) {
    strings.emplace_back(reinterpret_cast<const char*>(all.data()) + offset, size);
    offset += size;
  }
  return strings;
}

// Every rank learns whether all ranks share one host name.
StatusOr<bool> AllOnOneHost(Transport& t, Duration timeout) {
  FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> hosts, GatherStrings(t, t.hostname(), timeout));
  return std::all_of(hosts.begin(), hosts.end(),
                     [&](const std::string& host) { return host == hosts[0]; });
}

// remote[r]: the addresses by which Gloo may name rank r in this rank's messages (none for this
// rank): rank r's end of the connection between us and `listening[r]`. Collective over `t`;
// `local[r]` is this rank's end of its connection to rank r.
StatusOr<std::vector<std::vector<std::string>>> RemoteAddresses(
    Transport& t, const std::vector<std::string>& local, const std::vector<std::string>& listening,
    Duration timeout) {
  std::string joined;
  for (const auto& address : local) joined += address + "\n";
  FRUGAL_ASSIGN_OR_RETURN(std::vector<std::string> all, GatherStrings(t, joined, timeout));
  std::vector<std::vector<std::string>> remote(static_cast<size_t>(t.size()));
  for (int r = 0; r < t.size(); ++r) {
    if (r == t.rank()) continue;
    // Entry t.rank() of rank r's list.
    std::string_view list = all[static_cast<size_t>(r)];
    for (int k = 0; k < t.rank() && !list.empty(); ++k) {
      const size_t end = list.find('\n');
      list = end == std::string_view::npos ? std::string_view() : list.substr(end + 1);
    }
    remote[static_cast<size_t>(r)] = {std::string(list.substr(0, list.find('\n'))),
                                      listening[static_cast<size_t>(r)]};
  }
  return remote;
}

#endif  // FRUGAL_WITH_GLOO

}  // namespace

StatusOr<GlooAlgorithm> ParseGlooAlgorithm(std::string_view name) {
  if (name == "ring_chunked") return GlooAlgorithm::kRingChunked;
  if (name == "halving_doubling") return GlooAlgorithm::kHalvingDoubling;
  return InvalidArgumentError(
      fmt::format("unknown Gloo algorithm '{}' (accepted: ring_chunked, halving_doubling)", name));
}

std::string_view GlooAlgorithmName(GlooAlgorithm algorithm) {
  return algorithm == GlooAlgorithm::kRingChunked ? "ring_chunked" : "halving_doubling";
}

StatusOr<GlooMode> ParseGlooMode(std::string_view name) {
  if (name == "async") return GlooMode::kAsync;
  if (name == "sync") return GlooMode::kSync;
  if (name == "busypoll") return GlooMode::kBusyPoll;
  return InvalidArgumentError(
      fmt::format("unknown Gloo mode '{}' (accepted: async, sync, busypoll)", name));
}

std::string_view GlooModeName(GlooMode mode) {
  switch (mode) {
    case GlooMode::kAsync:
      return "async";
    case GlooMode::kSync:
      return "sync";
    case GlooMode::kBusyPoll:
      return "busypoll";
  }
  return "?";
}

Status DescribeGlooFailure(std::string_view what,
                           const std::vector<std::vector<std::string>>& remote_addresses,
                           Duration timeout) {
  std::vector<int> ranks;
  for (size_t r = 0; r < remote_addresses.size(); ++r) {
    if (std::any_of(remote_addresses[r].begin(), remote_addresses[r].end(),
                    [&](const std::string& address) {
                      return !address.empty() && ContainsAddress(what, address);
                    })) {
      ranks.push_back(static_cast<int>(r));
    }
  }
  std::string who = "a peer";
  if (!ranks.empty()) {
    who = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      who += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
    }
  }
  if (Contains(what, "timeout") || Contains(what, "Timed out")) {
    return TimeoutError(
        fmt::format("no progress from {} within {} ms ({})", who, timeout.count(), what));
  }
  if (Contains(what, "closed by peer") || Contains(what, "reset by peer") ||
      Contains(what, "Broken pipe")) {
    return PeerLostError(fmt::format("{} is gone ({})", who, what));
  }
  return IoError(fmt::format("with {}: {}", who, what));
}

bool GlooAvailable() { return FRUGAL_WITH_GLOO != 0; }

StatusOr<std::unique_ptr<GlooContext>> GlooContext::Connect(Transport& t,
                                                            const GlooContextOptions& options) {
#if FRUGAL_WITH_GLOO
  const CollectiveOptions sync{options.timeout, false};
  FRUGAL_ASSIGN_OR_RETURN(bool one_host, AllOnOneHost(t, options.timeout));

  // Rank 0 makes the rendezvous directory and broadcasts its path (empty: it failed).
  std::array<char, 4096> path{};
  std::string error;
  if (t.rank() == 0) {
    std::error_code ec;
    std::filesystem::path base = options.store_dir.empty()
                                     ? std::filesystem::temp_directory_path(ec)
                                     : std::filesystem::path(options.store_dir);
    std::string pattern = (base / "frugal-gloo-XXXXXX").string();
    if (ec || pattern.size() + 1 > path.size()) {
      error = "no usable directory for Gloo's rendezvous";
    } else {
      std::copy(pattern.begin(), pattern.end(), path.begin());
      if (mkdtemp(path.data()) == nullptr) {
        error =
            fmt::format("cannot create a directory like '{}': {}", pattern, std::strerror(errno));
        path.fill('\0');
      }
    }
  }
  FRUGAL_RETURN_IF_ERROR(Broadcast(t, std::as_writable_bytes(std::span<char>(path)), 0, sync));
  const std::string store_path(path.data());
  if (store_path.empty()) {
    return IoError(t.rank() == 0 ? error : "rank 0 could not create Gloo's rendezvous directory");
  }

  std::shared_ptr<gloo::rendezvous::Context> context;
  std::vector<std::string> local(static_cast<size_t>(t.size()));
  std::vector<std::string> listening(static_cast<size_t>(t.size()));
  gloo::transport::tcp::attr attr;
  if (!options.iface.empty()) {
    attr.iface = options.iface;
  } else {
    attr.hostname = one_host ? "127.0.0.1" : t.hostname();
  }
  // Gloo does not survive a host name that does not resolve: checked here first.
  Status connected = attr.hostname.empty() ? Status::Ok() : Resolves(attr.hostname);
  if (connected.ok()) {
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      gloo::rendezvous::FileStore store(store_path);
      context = std::make_shared<gloo::rendezvous::Context>(t.rank(), t.size());
      context->setTimeout(options.timeout);
      context->connectFullMesh(store, device);
      for (int r = 0; r < t.size(); ++r) {
        if (r == t.rank()) continue;
        auto& pair = context->getPair(r);
        local[static_cast<size_t>(r)] = pair->address().str();
        // Rank r stored the listening addresses of its pairs in rank order, skipping itself.
        const std::vector<char> stored = store.get(std::to_string(r));
        const size_t each = stored.size() / static_cast<size_t>(t.size() - 1);
        const size_t index = static_cast<size_t>(t.rank() > r ? t.rank() - 1 : t.rank());
        const auto first = stored.begin() + static_cast<std::ptrdiff_t>(index * each);
        listening[static_cast<size_t>(r)] =
            gloo::transport::tcp::Address(
                std::vector<char>(first, first + static_cast<std::ptrdiff_t>(each)))
                .str();
        if (options.mode != GlooMode::kAsync) {
          pair->setSync(true, options.mode == GlooMode::kBusyPoll);
        }
      }
    } catch (const std::exception& e) {
      connected = IoError(fmt::format("Gloo rendezvous in '{}': {}", store_path, e.what()));
    }
  }
  // Every rank reports whether it connected; rank 0 then removes the directory.
  std::vector<float> ok = {connected.ok() ? 0.0f : 1.0f};
  Status agreed = Allreduce(t, ok,
                            AllreduceOptions{.algorithm = AllreduceAlgorithm::kRing,
                                             .timeout = options.timeout,
                                             .check_lengths = false,
                                             .data_owner = nullptr,
                                             .block_counts = {}});
  if (t.rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(store_path, ec);
  }
  FRUGAL_RETURN_IF_ERROR(connected);
  FRUGAL_RETURN_IF_ERROR(agreed);
  if (ok[0] != 0.0f) return IoError("Gloo rendezvous failed on another rank");
  FRUGAL_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> remote,
                          RemoteAddresses(t, local, listening, options.timeout));
  return std::unique_ptr<GlooContext>(
      std::make_unique<GlooContextImpl>(context, std::move(remote), options.timeout));
#else
  return FailedPreconditionError("frugal was built without Gloo (FRUGAL_WITH_GLOO=OFF)");
#endif
}

}  // namespace frugal
