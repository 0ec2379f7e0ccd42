// The information sets of polar lossy source coding: which of the 2^m positions u_i of a block
// carry information bits and which are frozen to 0. Internal to frugal_compress.
//
// The transform is x = u F^{(x)m} with F = [[1, 0], [1, 1]] and no bit reversal; successive
// cancellation runs over u in natural order. Bit m-1 of an index i (its most significant bit)
// selects the first channel transform applied to the source (0: the check-node "minus" channel,
// 1: the variable-node "plus" channel), bit 0 the last. The K most reliable synthetic channels
// carry information (Korada and Urbanke 2010: the frozen set of a source code is the set of the
// least reliable channels of its test channel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal::polar {

enum class Construction {
  kPw,  // polarization weight (beta-expansion, beta = 2^(1/4)): channel independent
  kBb,  // Bhattacharyya parameters of the test channel BSC(D), D = h^-1(1 - rate)
  kGa,  // Gaussian approximation (mean LLRs) of the BI-AWGN channel of capacity `rate`
};

std::string_view ConstructionName(Construction c);
StatusOr<Construction> ParseConstruction(std::string_view name);

// Positions 0 .. 2^m - 1 from the most to the least reliable (m in [0, 20]). `rate` in [0, 1] is
// the design point of kBb and kGa (clamped into [1e-6, 1 - 1e-6]); kPw ignores it. Equal
// reliabilities are ordered by polarization weight, then by the larger index first, so every build
// picks the same order. Pure function.
std::vector<uint32_t> ReliabilityOrder(int m, Construction c, double rate);

// The polarization weight of position i: sum over the set bits j of i of 2^(j/4), computed as
// c0 + c1 2^(1/4) + c2 2^(1/2) + c3 2^(3/4) with integers c_r (the bits j = r mod 4), so that it
// is the same double on every build.
double PolarizationWeight(uint32_t i);

// The design distortion of a rate: D in [0, 1/2] with 1 - h(D) = rate (h the binary entropy), the
// Hamming distortion a binary symmetric source cannot go below at that rate.
double DesignDistortion(double rate);

// An information set: bit i of mask[i / 64] is set when position i carries information.
struct InfoSet {
  int m = 0;                   // the block has 2^m positions
  uint32_t k = 0;              // information positions
  std::vector<uint64_t> mask;  // max(1, 2^m / 64) words; bits at positions >= 2^m are zero
  uint32_t fingerprint = 0;    // CRC-32 of (m, k, mask)

  size_t size() const { return size_t{1} << m; }
  bool info(size_t i) const { return (mask[i / 64] >> (i % 64)) & 1u; }
};

// The first k positions of `order` (a ReliabilityOrder for m), k <= 2^m.
InfoSet MakeInfoSet(std::span<const uint32_t> order, int m, uint32_t k);

}  // namespace frugal::polar
