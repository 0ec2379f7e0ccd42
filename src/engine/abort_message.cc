// The abort notice of a failed engine: see abort_message.h.
#include "engine/abort_message.h"

#include <cstdint>
#include <optional>
#include <string_view>

#include "engine/wire.h"

namespace frugal::engine_internal {
namespace {

constexpr std::string_view kAbortMagic = "FRAB";
constexpr uint16_t kAbortVersion = 1;
constexpr uint32_t kMaxReasonBytes = 1u << 16;

}  // namespace

std::vector<std::byte> EncodeAbortMessage(const AbortMessage& m) {
  WireWriter w;
  PutHeader(w, kAbortMagic, kAbortVersion);
  w.Put<uint8_t>(static_cast<uint8_t>(m.code));
  const std::string reason = m.reason.substr(0, kMaxReasonBytes);
  w.Put<uint32_t>(static_cast<uint32_t>(reason.size()));
  w.Bytes(reason.data(), reason.size());
  return w.Take();
}

StatusOr<AbortMessage> DecodeAbortMessage(std::span<const std::byte> bytes) {
  WireReader r(bytes);
  if (std::optional<std::string> error = GetHeader(r, kAbortMagic, kAbortVersion)) {
    return MalformedError("abort message: " + *error);
  }
  uint8_t code = 0;
  uint32_t size = 0;
  AbortMessage m;
  if (!r.Get(code) || code == static_cast<uint8_t>(StatusCode::kOk) ||
      code > static_cast<uint8_t>(StatusCode::kInternal)) {
    return MalformedError("abort message: bad status code");
  }
  m.code = static_cast<StatusCode>(code);
  if (!r.Get(size) || size > kMaxReasonBytes || !r.String(size, m.reason) || r.left() != 0) {
    return MalformedError("abort message: bad reason");
  }
  return m;
}

}  // namespace frugal::engine_internal
