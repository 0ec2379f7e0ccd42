#include "frugal/hash.h"

#include <cstring>

namespace frugal {

Fnv1a& Fnv1a::Add(std::span<const std::byte> bytes) {
  for (std::byte b : bytes) {
    hash_ ^= static_cast<uint64_t>(b);
    hash_ *= kPrime;
  }
  return *this;
}

Fnv1a& Fnv1a::Add(std::string_view text) { return Add(std::as_bytes(std::span(text))); }

Fnv1a& Fnv1a::AddU64(uint64_t value) {
  std::byte bytes[sizeof(value)];
  std::memcpy(bytes, &value, sizeof(value));
  return Add(bytes);
}

uint64_t Fnv1a64(std::string_view text) { return Fnv1a().Add(text).value(); }

}  // namespace frugal
