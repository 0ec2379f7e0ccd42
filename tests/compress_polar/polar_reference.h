// Plain reference computations for the polar tests, written without frugal's polar code: the
// polarization-weight information set, SC with min-sum over an explicit recursion, the transform
// as a matrix product, and the reading of a polar payload.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "frugal/compress_wire.h"

namespace frugal::polar_reference {

// The K positions of largest polarization weight sum_j b_j 2^(j/4) among 2^m.
inline std::vector<bool> PwInfoSet(int m, size_t k) {
  const size_t size = size_t{1} << m;
  std::vector<double> w(size);
  for (size_t i = 0; i < size; ++i) {
    for (int j = 0; j < m; ++j) {
      if ((i >> j) & 1u) w[i] += std::pow(2.0, j / 4.0);
    }
  }
  std::vector<size_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
  std::vector<bool> info(size, false);
  for (size_t j = 0; j < k; ++j) info[order[j]] = true;
  return info;
}

// SC over x = u F^(x)m: the left half of u sees f(L_i, L_(h+i)), the right half
// L_(h+i) + (1 - 2 v_i) L_i with v the left half's codeword; u = (LLR < 0) at information
// positions, 0 at frozen ones. Returns the codeword.
inline std::vector<uint8_t> ScCodeword(const std::vector<float>& llr, const std::vector<bool>& info,
                                       size_t offset = 0) {
  const size_t s = llr.size();
  if (s == 1) return {static_cast<uint8_t>(info[offset] && llr[0] < 0.0f)};
  const size_t h = s / 2;
  std::vector<float> a(h), b(h);
  for (size_t i = 0; i < h; ++i) {
    const float m = std::min(std::fabs(llr[i]), std::fabs(llr[h + i]));
    const bool negative = std::signbit(llr[i]) != std::signbit(llr[h + i]);
    a[i] = negative ? -m : m;
  }
  std::vector<uint8_t> xa = ScCodeword(a, info, offset);
  for (size_t i = 0; i < h; ++i) b[i] = llr[h + i] + (xa[i] ? -llr[i] : llr[i]);
  std::vector<uint8_t> xb = ScCodeword(b, info, offset + h);
  std::vector<uint8_t> x(s);
  for (size_t i = 0; i < h; ++i) {
    x[i] = xa[i] ^ xb[i];
    x[h + i] = xb[i];
  }
  return x;
}

// x = u F^(x)m with (F^(x)m)_(i,j) = 1 exactly when the bits of j are a subset of those of i.
inline std::vector<uint8_t> TransformByMatrix(const std::vector<uint8_t>& u) {
  std::vector<uint8_t> x(u.size(), 0);
  for (size_t j = 0; j < u.size(); ++j) {
    for (size_t i = 0; i < u.size(); ++i) {
      if ((i & j) == j) x[j] ^= u[i];
    }
  }
  return x;
}

// The same transform by its butterflies, for blocks too long for the matrix.
inline std::vector<uint8_t> TransformByButterflies(std::vector<uint8_t> v) {
  for (size_t h = 1; h < v.size(); h *= 2) {
    for (size_t i = 0; i < v.size(); ++i) {
      if ((i & h) == 0) v[i] ^= v[i + h];
    }
  }
  return v;
}

// One block of a polar payload body: alpha, then u rebuilt from the bits at the information
// positions (increasing order, LSB first).
struct ParsedBlock {
  float alpha = 0;
  std::vector<uint8_t> u;
};
inline ParsedBlock ParseBlock(const std::byte* at, const std::vector<bool>& info) {
  ParsedBlock block;
  std::memcpy(&block.alpha, at, 4);
  block.u.assign(info.size(), 0);
  size_t bit = 0;
  for (size_t i = 0; i < info.size(); ++i) {
    if (!info[i]) continue;
    block.u[i] = (std::to_integer<unsigned>(at[4 + bit / 8]) >> (bit % 8)) & 1u;
    ++bit;
  }
  return block;
}

}  // namespace frugal::polar_reference
