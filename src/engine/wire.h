// Little-endian writing and bounds-checked reading of the engine's messages (internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::engine_internal {

class WireWriter {
 public:
  template <typename T>
  void Put(T value) {
    Bytes(&value, sizeof(T));
  }
  void Bytes(const void* data, size_t size) {
    const size_t at = out_.size();
    out_.resize(at + size);
    if (size > 0) std::memcpy(out_.data() + at, data, size);
  }
  std::vector<std::byte> Take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

// Every read checks the bytes left first and returns false instead of reading past the end.
class WireReader {
 public:
  explicit WireReader(std::span<const std::byte> in) : in_(in) {}
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
};

// Every message starts with a four-character magic and a u16 version.
inline void PutHeader(WireWriter& w, std::string_view magic, uint16_t version) {
  w.Bytes(magic.data(), magic.size());
  w.Put<uint16_t>(version);
}
// The error ("bad magic", "unknown version") if the header is not `magic` and `version`.
inline std::optional<std::string> GetHeader(WireReader& r, std::string_view magic,
                                            uint16_t version) {
  std::string seen;
  if (!r.String(magic.size(), seen) || seen != magic) return "bad magic";
  uint16_t seen_version = 0;
  if (!r.Get(seen_version) || seen_version != version) return "unknown version";
  return std::nullopt;
}

}  // namespace frugal::engine_internal
