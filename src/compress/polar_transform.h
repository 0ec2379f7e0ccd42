// The polar transform on packed bits, and the packing of a block's information bits. Internal to
// frugal_compress.
//
// A block of 2^m bits is held in max(1, 2^m / 64) 64-bit words, bit i in word i / 64 at bit
// i % 64 (so the words, stored little-endian, are the LSB-first bit plane of the block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "compress/polar_construct.h"
#include "compress/quant_util.h"

namespace frugal::polar {

using compress_internal::Kernels;

// In place: x = u F^{(x)m}, F = [[1, 0], [1, 1]] over GF(2); the transform is its own inverse.
// words.size() == max(1, 2^m / 64); bits at positions >= 2^m must be zero and stay zero.
void Transform(std::span<uint64_t> words, int m);

// Bytes of a block's information bits on the wire: ceil(k / 8).
inline size_t InfoBytes(uint32_t k) { return (size_t{k} + 7) / 8; }

// Writes the bits of `u` at the information positions of `set`, in increasing position order,
// LSB-first into InfoBytes(set.k) bytes at `out` (padding bits zero). Returns false, writing
// nothing, when a frozen position of `u` is not zero.
bool GatherInfoBits(Kernels k, std::span<const uint64_t> u, const InfoSet& set, std::byte* out);

// The inverse: u with the bits of `in` at the information positions and zeros elsewhere. Reads
// exactly InfoBytes(set.k) bytes; the caller checks the padding bits (PaddingIsZero).
void ScatterInfoBits(Kernels k, const std::byte* in, const InfoSet& set, std::span<uint64_t> u);

// Whether the bits after the first `bits` bits of the last of the InfoBytes(bits) bytes are zero.
bool PaddingIsZero(const std::byte* in, uint32_t bits);

}  // namespace frugal::polar
