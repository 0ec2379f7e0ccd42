// Bit packing: fixed-width fields written LSB-first into a byte vector, and read back with
// bounds checks. Used by compressors' wire formats.
//
// BitWriter appends; BitReader reads from a span it does not own and returns kMalformed when a
// read would run past the end. Not thread safe (one object, one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/status.h"

namespace frugal {

class BitWriter {
 public:
  explicit BitWriter(std::vector<std::byte>* out) : out_(out) {}

  // Appends the low `width` bits of `value` (width in [0, 64]).
  void Write(uint64_t value, int width);
  // Elias-gamma code of value >= 1.
  void WriteEliasGamma(uint64_t value);
  // Pads to a byte boundary with zero bits.
  void AlignToByte();

  size_t bits_written() const { return bits_; }

 private:
  std::vector<std::byte>* out_;
  size_t bits_ = 0;
};

class BitReader {
 public:
  explicit BitReader(std::span<const std::byte> in) : in_(in) {}

  StatusOr<uint64_t> Read(int width);
  StatusOr<uint64_t> ReadEliasGamma();
  void AlignToByte();

  size_t bits_read() const { return pos_; }
  size_t bits_left() const { return in_.size() * 8 - pos_; }

 private:
  std::span<const std::byte> in_;
  size_t pos_ = 0;
};

// Bits needed to represent values in [0, n): ceil(log2(n)), 0 for n <= 1.
int BitsFor(uint64_t n);

// Length of the Elias-gamma code of value >= 1: 2*floor(log2 v) + 1.
int EliasGammaLength(uint64_t value);

}  // namespace frugal
