// Compact coding of sparse vectors for the sparsification compressors. Internal to src/compress.
//
// An index list (strictly increasing indices below n) is written in whichever of three codes is
// shortest for it, chosen per payload:
//  - kFixed: every index in BitsFor(n) = ceil(log2 n) bits;
//  - kGamma: the gaps (first index + 1, then differences) in Elias-gamma code;
//  - kRice:  the gaps minus one in Golomb-Rice code with parameter b (quotient in unary).
// So an index never costs more than ceil(log2 n) bits, and delta coding makes it cheaper when the
// kept entries are dense enough. Bits are packed least significant first (as frugal::BitWriter).
// The Elias-gamma code of g >= 1 with m = floor(log2 g) is m zero bits, a one bit, then the m low
// bits of g, least significant first; Rice of u = g - 1 is (u >> b) zero bits, a one bit, then the
// b low bits of u.
//
// Index section layout: u8 coding, u8 rice parameter, u32 count (little endian), then the codes,
// padded with zero bits to a byte. Readers validate every field and every index (below n,
// strictly increasing) and return kMalformed on anything else, never reading past the span.
//
// Value sections: float32 values (little endian) or one sign bit per entry (1 = negative),
// packed like the codes and padded to a byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "frugal/status.h"

namespace frugal::sparse {

enum class IndexCoding : uint8_t { kFixed = 0, kGamma = 1, kRice = 2 };

struct IndexCodePlan {
  IndexCoding coding = IndexCoding::kFixed;
  int rice_bits = 0;
  uint64_t bits = 0;  // length of the codes, without the section header and padding
};

inline constexpr size_t kIndexSectionHeaderBytes = 6;

// Chooses the shortest coding for `indices` (strictly increasing, all < n).
IndexCodePlan PlanIndexCode(std::span<const uint32_t> indices, uint64_t n);

// Bytes of the index section for a plan.
inline size_t IndexSectionBytes(const IndexCodePlan& plan) {
  return kIndexSectionHeaderBytes + static_cast<size_t>((plan.bits + 7) / 8);
}

// Largest index section for `count` indices below n (the fixed-width code).
size_t MaxIndexSectionBytes(size_t count, uint64_t n);

// Writes the section at `out`, which must have IndexSectionBytes(plan) bytes. Returns the bytes
// written.
size_t WriteIndexSection(std::span<const uint32_t> indices, uint64_t n, const IndexCodePlan& plan,
                         std::byte* out);

// Appends a section to `out`, choosing the plan.
void AppendIndexSection(std::span<const uint32_t> indices, uint64_t n, std::vector<std::byte>* out);

// Reads a section from the front of `in`. `max_count` bounds the count a payload may declare (so a
// corrupted count cannot make the reader allocate). Returns the bytes consumed.
StatusOr<size_t> ReadIndexSection(std::span<const std::byte> in, uint64_t n, size_t max_count,
                                  std::vector<uint32_t>* indices);

// Float and sign sections.
void AppendFloats(std::span<const float> values, std::vector<std::byte>* out);
StatusOr<size_t> ReadFloats(std::span<const std::byte> in, size_t count, std::vector<float>* out);
inline size_t SignSectionBytes(size_t count) { return (count + 7) / 8; }
// Bit i is set when values[i] < 0 (or is -0.0).
void AppendSigns(std::span<const float> values, std::vector<std::byte>* out);
// Reads `count` sign bits; negative[i] is 1 for a set bit. Padding bits must be zero.
StatusOr<size_t> ReadSigns(std::span<const std::byte> in, size_t count,
                           std::vector<uint8_t>* negative);

}  // namespace frugal::sparse
