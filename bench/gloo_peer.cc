#include <fmt/format.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <stdlib.h>

#include <array>
#include <climits>
#include <exception>
#include <filesystem>

#include "frugal/collectives.h"
#include "peers.h"

namespace frugal::bench {
namespace {

class GlooPeer : public AllreducePeer {
 public:
  GlooPeer(std::shared_ptr<gloo::rendezvous::Context> context, GlooAlgorithm algorithm)
      : context_(std::move(context)), algorithm_kind_(algorithm) {}

  std::string name() const override { return "gloo"; }

  Status Allreduce(std::span<float> data) override {
    if (data.size() > static_cast<size_t>(INT_MAX)) {
      return InvalidArgumentError("Gloo peer: more than INT_MAX elements");
    }
    try {
      // A Gloo algorithm is bound to its buffer: build it again only when the buffer changes.
      if (!algorithm_ || data.data() != data_ || data.size() != count_) {
        algorithm_.reset();
        std::vector<float*> ptrs = {data.data()};
        const int count = static_cast<int>(data.size());
        if (algorithm_kind_ == GlooAlgorithm::kRingChunked) {
          algorithm_ = std::make_unique<gloo::AllreduceRingChunked<float>>(context_, ptrs, count);
        } else {
          algorithm_ =
              std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context_, ptrs, count);
        }
        data_ = data.data();
        count_ = data.size();
      }
      algorithm_->run();
    } catch (const std::exception& e) {
      algorithm_.reset();
      return IoError(fmt::format("Gloo allreduce: {}", e.what()));
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<gloo::rendezvous::Context> context_;
  GlooAlgorithm algorithm_kind_;
  std::unique_ptr<gloo::Algorithm> algorithm_;
  float* data_ = nullptr;
  size_t count_ = 0;
};

// Every rank learns whether all ranks share one host name.
StatusOr<bool> AllOnOneHost(Transport& t, Duration timeout) {
  std::string host = t.hostname();
  std::vector<std::byte> all;
  std::vector<size_t> sizes;
  FRUGAL_RETURN_IF_ERROR(Allgatherv(t, std::as_bytes(std::span<const char>(host)), all, sizes,
                                    CollectiveOptions{timeout, false}));
  size_t offset = 0;
  for (size_t size : sizes) {
    std::string other(reinterpret_cast<const char*>(all.data()) + offset, size);
    if (other != host) return false;
    offset += size;
  }
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<AllreducePeer>> MakeGlooPeer(Transport& t,
                                                      const GlooPeerOptions& options) {
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
  Status connected = Status::Ok();
  try {
    gloo::transport::tcp::attr attr;
    if (!options.iface.empty()) {
      attr.iface = options.iface;
    } else {
      attr.hostname = one_host ? "127.0.0.1" : t.hostname();
    }
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_path);
    context = std::make_shared<gloo::rendezvous::Context>(t.rank(), t.size());
    context->setTimeout(options.timeout);
    context->connectFullMesh(store, device);
    if (options.mode != GlooMode::kAsync) {
      for (int r = 0; r < t.size(); ++r) {
        if (r != t.rank()) context->getPair(r)->setSync(true, options.mode == GlooMode::kBusyPoll);
      }
    }
  } catch (const std::exception& e) {
    connected = IoError(fmt::format("Gloo rendezvous in '{}': {}", store_path, e.what()));
  }
  // Every rank reports whether it connected; rank 0 then removes the directory.
  std::vector<float> ok = {connected.ok() ? 0.0f : 1.0f};
  Status agreed = Allreduce(t, ok,
                            AllreduceOptions{.algorithm = AllreduceAlgorithm::kRing,
                                             .timeout = options.timeout,
                                             .check_lengths = false});
  if (t.rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(store_path, ec);
  }
  FRUGAL_RETURN_IF_ERROR(connected);
  FRUGAL_RETURN_IF_ERROR(agreed);
  if (ok[0] != 0.0f) return IoError("Gloo rendezvous failed on another rank");
  return std::unique_ptr<AllreducePeer>(std::make_unique<GlooPeer>(context, options.algorithm));
}

}  // namespace frugal::bench
