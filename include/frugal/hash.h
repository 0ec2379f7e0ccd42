// FNV-1a (64 bit): a stable hash of bytes, the same on every platform and run, for ids (tensor
// names, sweep points) and fingerprints that ranks compare. Not for security. Thread safe (a
// value type).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace frugal {

class Fnv1a {
 public:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  static constexpr uint64_t kPrime = 0x100000001b3ULL;

  Fnv1a& Add(std::span<const std::byte> bytes);
  Fnv1a& Add(std::string_view text);
  // The 8 bytes of `value` as they lie in memory (little-endian on every platform frugal runs on).
  Fnv1a& AddU64(uint64_t value);
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = kOffsetBasis;
};

// FNV-1a of `text`.
uint64_t Fnv1a64(std::string_view text);

}  // namespace frugal
