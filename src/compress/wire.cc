#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "frugal/compress_wire.h"
#include "frugal/crc.h"

namespace frugal {
namespace {

// Field offsets of the header, see compress_wire.h.
constexpr size_t kMagicOffset = 0;
constexpr size_t kVersionOffset = 2;
constexpr size_t kIdOffset = 3;
constexpr size_t kParamsCrcOffset = 4;
constexpr size_t kNumelOffset = 8;
constexpr size_t kBodyBytesOffset = 16;
constexpr size_t kCheckOffset = 24;
constexpr size_t kHeaderCrcOffset = 28;
constexpr std::byte kMagic0{0x46};
constexpr std::byte kMagic1{0x5A};

template <typename T>
void Put(std::byte* at, T value) {
  static_assert(std::endian::native == std::endian::little,
                "frugal's wire format is little-endian");
  std::memcpy(at, &value, sizeof(T));
}

template <typename T>
T Get(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

void SealHeader(std::byte* header) {
  Put<uint32_t>(header + kHeaderCrcOffset,
                Crc32(std::span<const std::byte>(header, kHeaderCrcOffset)));
}

}  // namespace

uint32_t SpecCrc(std::string_view spec) {
  return Crc32(std::as_bytes(std::span<const char>(spec.data(), spec.size())));
}

std::span<std::byte> BeginPayload(const Compressor& compressor, const TensorInfo& tensor,
                                  size_t body_bytes, std::vector<std::byte>& out) {
  // resize() keeps the old bytes of a reused buffer: the caller writes every byte of the body.
  out.resize(kWireHeaderBytes + body_bytes);
  std::byte* h = out.data();
  h[kMagicOffset] = kMagic0;
  h[kMagicOffset + 1] = kMagic1;
  h[kVersionOffset] = std::byte{kWireVersion};
  h[kIdOffset] = static_cast<std::byte>(compressor.id());
  Put<uint32_t>(h + kParamsCrcOffset, SpecCrc(compressor.spec()));
  Put<uint64_t>(h + kNumelOffset, tensor.numel);
  Put<uint64_t>(h + kBodyBytesOffset, body_bytes);
  Put<uint32_t>(h + kCheckOffset, compressor.WireCheck(tensor));
  SealHeader(h);
  return std::span<std::byte>(out).subspan(kWireHeaderBytes);
}

void FinishPayload(std::vector<std::byte>& out) {
  FRUGAL_CHECK_GE(out.size(), kWireHeaderBytes, "FinishPayload before BeginPayload");
  Put<uint64_t>(out.data() + kBodyBytesOffset, out.size() - kWireHeaderBytes);
  SealHeader(out.data());
}

StatusOr<WireHeader> ReadWireHeader(std::span<const std::byte> payload) {
  if (payload.size() < kWireHeaderBytes) {
    return MalformedError(fmt::format("payload of {} bytes is shorter than the {}-byte header",
                                      payload.size(), kWireHeaderBytes));
  }
  const std::byte* h = payload.data();
  if (h[kMagicOffset] != kMagic0 || h[kMagicOffset + 1] != kMagic1) {
    return MalformedError("payload does not start with the compressed-payload magic");
  }
  WireHeader header;
  header.version = std::to_integer<uint8_t>(h[kVersionOffset]);
  if (header.version != kWireVersion) {
    return MalformedError(fmt::format("payload has wire version {}, this build reads version {}",
                                      header.version, kWireVersion));
  }
  uint32_t crc = Crc32(payload.subspan(0, kHeaderCrcOffset));
  if (crc != Get<uint32_t>(h + kHeaderCrcOffset)) {
    return MalformedError("payload header is corrupted (CRC mismatch)");
  }
  header.id = std::to_integer<uint8_t>(h[kIdOffset]);
  header.params_crc = Get<uint32_t>(h + kParamsCrcOffset);
  header.numel = Get<uint64_t>(h + kNumelOffset);
  header.body_bytes = Get<uint64_t>(h + kBodyBytesOffset);
  header.check = Get<uint32_t>(h + kCheckOffset);
  if (header.body_bytes != payload.size() - kWireHeaderBytes) {
    return MalformedError(fmt::format("payload header announces a {}-byte body, {} bytes follow",
                                      header.body_bytes, payload.size() - kWireHeaderBytes));
  }
  return header;
}

StatusOr<std::span<const std::byte>> OpenPayload(std::span<const std::byte> payload,
                                                 const Compressor& compressor,
                                                 const TensorInfo& tensor) {
  StatusOr<WireHeader> header = ReadWireHeader(payload);
  if (!header.ok()) return header.status().Annotate(fmt::format("{} payload", compressor.name()));
  if (header->id != static_cast<uint8_t>(compressor.id())) {
    return MalformedError(fmt::format("{} payload: made by compressor id {}, expected {}",
                                      compressor.name(), header->id,
                                      static_cast<int>(compressor.id())));
  }
  if (header->params_crc != SpecCrc(compressor.spec())) {
    return MalformedError(fmt::format("{} payload: made with other parameters than {}",
                                      compressor.name(), compressor.spec()));
  }
  if (header->numel != tensor.numel) {
    return MalformedError(fmt::format("{} payload: header says {} elements, tensor '{}' has {}",
                                      compressor.name(), header->numel, tensor.name, tensor.numel));
  }
  if (const uint32_t check = compressor.WireCheck(tensor); header->check != check) {
    return MalformedError(
        fmt::format("{} payload: check word {:#010x}, this build derives {:#010x} for tensor '{}'",
                    compressor.name(), header->check, check, tensor.name));
  }
  return payload.subspan(kWireHeaderBytes);
}

}  // namespace frugal
