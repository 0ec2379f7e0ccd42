#include "frugal/transport.h"

#include <fmt/format.h>

#include <algorithm>

namespace frugal {

namespace {

// A Work that keeps the memory of a shared send or receive alive until the operation is finished
// with it: `inner_` is destroyed first (the transport then no longer touches the memory).
class KeepAliveWork final : public Work {
 public:
  KeepAliveWork(std::unique_ptr<Work> inner, std::shared_ptr<const void> owner)
      : owner_(std::move(owner)), inner_(std::move(inner)) {}
  Status Wait(Duration timeout) override { return inner_->Wait(timeout); }
  bool IsCompleted() override { return inner_->IsCompleted(); }
  int peer() const override { return inner_->peer(); }
  size_t bytes() const override { return inner_->bytes(); }

 private:
  std::shared_ptr<const void> owner_;
  std::unique_ptr<Work> inner_;
};

}  // namespace

std::unique_ptr<Work> Transport::ISendShared(int dst, int tag, std::shared_ptr<const void> owner,
                                             std::span<const std::byte> data) {
  return std::make_unique<KeepAliveWork>(ISend(dst, tag, data), std::move(owner));
}

std::unique_ptr<Work> Transport::IRecvShared(int src, int tag, std::shared_ptr<void> owner,
                                             std::span<std::byte> data) {
  return std::make_unique<KeepAliveWork>(IRecv(src, tag, data), std::move(owner));
}

SharedBytes Transport::NewShared(size_t bytes) {
  std::shared_ptr<std::byte[]> memory(new std::byte[std::max<size_t>(bytes, 1)]);
  return SharedBytes{memory, std::span<std::byte>(memory.get(), bytes)};
}

std::optional<PeerRegion> Transport::RegionOf(std::span<const std::byte>) const { return {}; }

StatusOr<const std::byte*> Transport::MapPeerRegion(int peer, const PeerRegion&) {
  return FailedPreconditionError(
      fmt::format("this transport cannot map the memory of rank {} (not on one machine)", peer));
}

Status Send(Transport& t, int dst, int tag, std::span<const std::byte> data, Duration timeout) {
  return t.ISend(dst, tag, data)->Wait(timeout);
}

Status Recv(Transport& t, int src, int tag, std::span<std::byte> data, Duration timeout) {
  return t.IRecv(src, tag, data)->Wait(timeout);
}

Status SendRecv(Transport& t, int dst, std::span<const std::byte> out, int src,
                std::span<std::byte> in, int tag, Duration timeout) {
  std::unique_ptr<Work> recv = src >= 0 ? t.IRecv(src, tag, in) : nullptr;
  std::unique_ptr<Work> send = dst >= 0 ? t.ISend(dst, tag, out) : nullptr;
  if (recv) {
    FRUGAL_RETURN_IF_ERROR(recv->Wait(timeout));
    if (recv->bytes() != in.size()) {
      return MalformedError(fmt::format("rank {} sent {} bytes where {} were expected", src,
                                        recv->bytes(), in.size()));
    }
  }
  if (send) FRUGAL_RETURN_IF_ERROR(send->Wait(timeout));
  return Status::Ok();
}

}  // namespace frugal
