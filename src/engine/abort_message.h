// The notice a failed engine sends every peer (internal), on its own tag outside the cycles: the
// code and message of its failure, so that the peers fail with the same code and the cause.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "frugal/status.h"

namespace frugal::engine_internal {

struct AbortMessage {
  StatusCode code = StatusCode::kInternal;
  std::string reason;
};

// Wire format, little-endian: magic "FRAB", version u16, code u8, reason (u32 length + bytes, at
// most 64 KiB; longer reasons are cut).
std::vector<std::byte> EncodeAbortMessage(const AbortMessage& message);
// kMalformed for a bad magic, version, code (OK or unknown) or length.
StatusOr<AbortMessage> DecodeAbortMessage(std::span<const std::byte> bytes);

}  // namespace frugal::engine_internal
