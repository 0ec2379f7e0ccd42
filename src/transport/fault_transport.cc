// One injected fault on the way out (see fault_transport.h).
//
// FaultyTransport::ISend asks the fault whether to hit the message. A dropped message gets a Work
// that is complete at once; a corrupted one is copied, one bit of the copy is flipped, and the copy
// is sent with a Work that keeps the copy alive until the inner send completes. Split wraps the
// child with the same fault, so that "the first message" counts the children's messages too.
#include "frugal/fault_transport.h"

#include <string>
#include <vector>

#include "frugal/forwarding_transport.h"

namespace frugal {
namespace {

class DoneWork final : public Work {
 public:
  DoneWork(int peer, size_t bytes) : peer_(peer), bytes_(bytes) {}
  Status Wait(Duration) override { return Status::Ok(); }
  bool IsCompleted() override { return true; }
  int peer() const override { return peer_; }
  size_t bytes() const override { return bytes_; }

 private:
  int peer_;
  size_t bytes_;
};

// The inner send of a corrupted copy, which it owns.
class CopyWork final : public Work {
 public:
  CopyWork(std::unique_ptr<std::vector<std::byte>> copy, std::unique_ptr<Work> inner)
      : copy_(std::move(copy)), inner_(std::move(inner)) {}
  Status Wait(Duration timeout) override { return inner_->Wait(timeout); }
  bool IsCompleted() override { return inner_->IsCompleted(); }
  int peer() const override { return inner_->peer(); }
  size_t bytes() const override { return inner_->bytes(); }

 private:
  std::unique_ptr<std::vector<std::byte>> copy_;
  std::unique_ptr<Work> inner_;
};

class FaultyTransport final : public ForwardingTransport {
 public:
  FaultyTransport(Transport& inner, std::unique_ptr<Transport> owned,
                  std::shared_ptr<TransportFault> fault)
      : ForwardingTransport(inner), owned_(std::move(owned)), fault_(std::move(fault)) {}

  std::unique_ptr<Work> ISend(int dst, int tag, std::span<const std::byte> data) override {
    const std::optional<uint64_t> bit = fault_->Take(data);
    if (!bit) return inner_.ISend(dst, tag, data);
    if (fault_->kind() == TransportFault::Kind::kDrop) {
      return std::make_unique<DoneWork>(dst, data.size());
    }
    auto copy = std::make_unique<std::vector<std::byte>>(data.begin(), data.end());
    if (!copy->empty()) {
      const uint64_t b = *bit % (8 * copy->size());
      (*copy)[b / 8] ^= std::byte{static_cast<uint8_t>(1u << (b % 8))};
    }
    std::unique_ptr<Work> sent = inner_.ISend(dst, tag, *copy);
    return std::make_unique<CopyWork>(std::move(copy), std::move(sent));
  }
  StatusOr<std::unique_ptr<Transport>> Split(int color, int key, Duration timeout) override {
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Transport> child, inner_.Split(color, key, timeout));
    Transport& child_ref = *child;
    return std::unique_ptr<Transport>(
        std::make_unique<FaultyTransport>(child_ref, std::move(child), fault_));
  }

 private:
  std::unique_ptr<Transport> owned_;  // a child made by Split
  std::shared_ptr<TransportFault> fault_;
};

}  // namespace

std::optional<uint64_t> TransportFault::Take(std::span<const std::byte> data) {
  if (!armed_.load(std::memory_order_relaxed) || fired_.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  const std::optional<uint64_t> bit = choose_ ? choose_(data) : std::optional<uint64_t>(0);
  if (!bit) return std::nullopt;
  bool expected = false;
  if (!fired_.compare_exchange_strong(expected, true)) return std::nullopt;
  return bit;
}

std::unique_ptr<Transport> WithTransportFault(Transport& inner,
                                              std::shared_ptr<TransportFault> fault) {
  return std::make_unique<FaultyTransport>(inner, nullptr, std::move(fault));
}

}  // namespace frugal
