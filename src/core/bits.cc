#include "frugal/bits.h"

#include <fmt/format.h>

#include <bit>

namespace frugal {

void BitWriter::Write(uint64_t value, int width) {
  FRUGAL_CHECK(width >= 0 && width <= 64, "bit width ", width);
  if (width < 64) value &= (uint64_t{1} << width) - 1;
  int done = 0;
  while (done < width) {
    size_t bit = bits_ % 8;
    if (bit == 0) out_->push_back(std::byte{0});
    int take = std::min<int>(8 - static_cast<int>(bit), width - done);
    uint64_t part = (value >> done) & ((uint64_t{1} << take) - 1);
    out_->back() |= static_cast<std::byte>(part << bit);
    done += take;
    bits_ += take;
  }
}

void BitWriter::WriteEliasGamma(uint64_t value) {
  FRUGAL_CHECK(value >= 1, "Elias-gamma codes values >= 1, got ", value);
  int n = std::bit_width(value) - 1;  // floor(log2 value)
  Write(0, n);                        // n zeros
  // then the n+1 bits of value, most significant first
  for (int i = n; i >= 0; --i) Write((value >> i) & 1, 1);
}

void BitWriter::AlignToByte() { bits_ = (bits_ + 7) / 8 * 8; }

StatusOr<uint64_t> BitReader::Read(int width) {
  FRUGAL_CHECK(width >= 0 && width <= 64, "bit width ", width);
  if (static_cast<size_t>(width) > bits_left()) {
    return MalformedError(
        fmt::format("bit stream truncated: need {} bits, {} left", width, bits_left()));
  }
  uint64_t value = 0;
  int done = 0;
  while (done < width) {
    size_t bit = pos_ % 8;
    int take = std::min<int>(8 - static_cast<int>(bit), width - done);
    uint64_t byte = std::to_integer<uint64_t>(in_[pos_ / 8]);
    value |= ((byte >> bit) & ((uint64_t{1} << take) - 1)) << done;
    done += take;
    pos_ += take;
  }
  return value;
}

StatusOr<uint64_t> BitReader::ReadEliasGamma() {
  int zeros = 0;
  while (true) {
    FRUGAL_ASSIGN_OR_RETURN(uint64_t bit, Read(1));
    if (bit == 1) break;
    if (++zeros > 63) return MalformedError("Elias-gamma code longer than 64 bits");
  }
  uint64_t value = 1;
  for (int i = 0; i < zeros; ++i) {
    FRUGAL_ASSIGN_OR_RETURN(uint64_t bit, Read(1));
    value = (value << 1) | bit;
  }
  return value;
}

void BitReader::AlignToByte() { pos_ = std::min((pos_ + 7) / 8 * 8, in_.size() * 8); }

int BitsFor(uint64_t n) { return n <= 1 ? 0 : std::bit_width(n - 1); }

int EliasGammaLength(uint64_t value) {
  FRUGAL_CHECK(value >= 1, "Elias-gamma codes values >= 1, got ", value);
  return 2 * (std::bit_width(value) - 1) + 1;
}

}  // namespace frugal
