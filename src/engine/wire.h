// Little-endian writing and bounds-checked reading of the engine's messages (internal). Every
// message starts with a four-character magic and a u16 version and ends with the CRC-32 of the
// bytes before it, so that a changed byte is refused, not misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/crc.h"

namespace frugal::engine_internal {

class WireWriter {
 public:
  template <typename T>
  void Put(T value) {
    Bytes(&value, sizeof(T));
  }
  void Bytes(const void* data, size_t size) {
    // Byte by byte: the messages are small, and GCC 12 reports false overflows on a bulk copy
    // into a growing vector here (-Wstringop-overflow, -Warray-bounds).
    const auto* bytes = static_cast<const std::byte*>(data);
    for (size_t i = 0; i < size; ++i) out_.push_back(bytes[i]);
  }
  // The message, sealed with the CRC-32 of its bytes.
  std::vector<std::byte> Take() {
    Put<uint32_t>(Crc32(out_));
    return std::move(out_);
  }

 private:
  std::vector<std::byte> out_;
};

// Every read checks the bytes left first and returns false instead of reading past the end.
class WireReader {
 public:
  // Reads `message` without its CRC-32 trailer; sealed() tells whether the trailer matched (when
  // it does not, nothing is left to read).
  explicit WireReader(std::span<const std::byte> message) {
    if (message.size() < sizeof(uint32_t)) return;
    const std::span<const std::byte> body = message.first(message.size() - sizeof(uint32_t));
    uint32_t crc = 0;
    std::memcpy(&crc, message.data() + body.size(), sizeof(crc));
    if (crc != Crc32(body)) return;
    in_ = body;
    sealed_ = true;
  }
  bool sealed() const { return sealed_; }
  template <typename T>
  bool Get(T& value) {
    if (left() < sizeof(T)) return false;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool String(size_t size, std::string& value) {
    if (left() < size) return false;
    value.assign(reinterpret_cast<const char*>(in_.data()) + at_, size);
    at_ += size;
    return true;
  }
  bool Raw(size_t size, std::vector<uint8_t>& value) {
    if (left() < size) return false;
    value.resize(size);
    if (size > 0) std::memcpy(value.data(), in_.data() + at_, size);
    at_ += size;
    return true;
  }
  size_t left() const { return in_.size() - at_; }

 private:
  std::span<const std::byte> in_;
  size_t at_ = 0;
  bool sealed_ = false;
};

// Every message starts with a four-character magic and a u16 version.
inline void PutHeader(WireWriter& w, std::string_view magic, uint16_t version) {
  w.Bytes(magic.data(), magic.size());
  w.Put<uint16_t>(version);
}
// The error ("bad checksum", "bad magic", "unknown version") if the message is not sealed or
// its header is not `magic` and `version`.
inline std::optional<std::string> GetHeader(WireReader& r, std::string_view magic,
                                            uint16_t version) {
  if (!r.sealed()) return "bad checksum";
  std::string seen;
  if (!r.String(magic.size(), seen) || seen != magic) return "bad magic";
  uint16_t seen_version = 0;
  if (!r.Get(seen_version) || seen_version != version) return "unknown version";
  return std::nullopt;
}

}  // namespace frugal::engine_internal
