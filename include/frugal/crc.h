// CRC-32 (the zlib polynomial) of a byte span, for wire-format headers and parameter hashes.
// Thread safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace frugal {

uint32_t Crc32(std::span<const std::byte> data, uint32_t crc = 0);

}  // namespace frugal
