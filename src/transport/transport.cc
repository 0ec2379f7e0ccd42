#include "frugal/transport.h"

#include <fmt/format.h>

namespace frugal {

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
