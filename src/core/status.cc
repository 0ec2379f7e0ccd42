#include "frugal/status.h"

#include <fmt/format.h>

namespace frugal {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kTimeout:
      return "Timeout";
    case StatusCode::kPeerLost:
      return "PeerLost";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kMalformed:
      return "Malformed";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return fmt::format("{}: {}", StatusCodeName(code_), message_);
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status TimeoutError(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
Status PeerLostError(std::string m) { return {StatusCode::kPeerLost, std::move(m)}; }
Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
Status MalformedError(std::string m) { return {StatusCode::kMalformed, std::move(m)}; }
Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

}  // namespace frugal
