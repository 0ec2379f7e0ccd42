// The wire format of compressed payloads: a fixed, versioned header followed by the
// compressor's bit-packed body.
//
// Header (kWireHeaderBytes = 32 bytes, little-endian):
//   offset  size  field
//        0     2  magic "FZ" (0x46 0x5A)
//        2     1  version (kWireVersion)
//        3     1  compressor id (CompressorId)
//        4     4  params_crc: Crc32 of the compressor's canonical spec() (its parameters)
//        8     8  numel: elements of the tensor the payload encodes
//       16     8  body_bytes: bytes that follow the header; payload size == 32 + body_bytes
//       24     4  check: Compressor::WireCheck(tensor), zero for most compressors (polar: a
//                  fingerprint of its information sets)
//       28     4  header_crc: Crc32 of bytes [0, 28)
// A reader checks, in this order, the size, magic, version, header_crc, body length, compressor
// id, params_crc, numel and check, and only then looks at the body; each failure is a
// kMalformed status that says which field is wrong. The body's layout belongs to the compressor
// (documented in its .cc); its decoder validates every value it cannot accept (non-finite
// scales, out-of-range indices or levels, padding bits) before writing any output.
//
// Thread safety: stateless functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "frugal/compressor.h"
#include "frugal/status.h"

namespace frugal {

inline constexpr size_t kWireHeaderBytes = 32;
inline constexpr uint8_t kWireVersion = 1;

struct WireHeader {
  uint8_t version = kWireVersion;
  uint8_t id = 0;
  uint32_t params_crc = 0;
  uint64_t numel = 0;
  uint64_t body_bytes = 0;
  uint32_t check = 0;
};

// Crc32 of a canonical spec string.
uint32_t SpecCrc(std::string_view spec);

// Replaces `out` by a header for (compressor, tensor, body_bytes) followed by body_bytes zero bytes
// and returns the body to fill.
std::span<std::byte> BeginPayload(const Compressor& compressor, const TensorInfo& tensor,
                                  size_t body_bytes, std::vector<std::byte>& out);

// For bodies whose size is known only at the end: after appending to `out` beyond its header,
// rewrites body_bytes (= out.size() - kWireHeaderBytes) and the header CRC.
void FinishPayload(std::vector<std::byte>& out);

// Parses and checks the header alone (size, magic, version, CRC, body length).
StatusOr<WireHeader> ReadWireHeader(std::span<const std::byte> payload);

// ReadWireHeader, then checks id, params_crc, numel and check against `compressor` and `tensor`.
// Returns the body. Messages start with the compressor's name: "qsgd payload: header says 4096
// elements, tensor 'fc1.weight' has 1024".
StatusOr<std::span<const std::byte>> OpenPayload(std::span<const std::byte> payload,
                                                 const Compressor& compressor,
                                                 const TensorInfo& tensor);

}  // namespace frugal
