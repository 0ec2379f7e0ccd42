// Count sketch (Charikar, Chen and Farach-Colton 2002) of float vectors, as Sketched-SGD uses it.
// Internal to frugal_compress.
//
// A sketch is a table of rows x cols floats. Row r hashes index i to a column h_r(i) and a sign
// s_r(i) in {-1, +1}; sketching x adds s_r(i) * x[i] into cell (r, h_r(i)) of every row. The map
// is linear, so S(a + b) = S(a) + S(b) and sketches of several ranks can be summed (all-reduced)
// without decoding. The estimate of x[i] is the median over rows of s_r(i) * table(r, h_r(i)).
// The hash functions are drawn from `hash_seed`, so ranks that use the same seed (a shared-seed
// stream) build compatible sketches.
//
// Thread safety: a CountSketch is immutable; const methods may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "compress/sparse_select.h"

namespace frugal::sketch {

class CountSketch {
 public:
  // rows in [1, 64], cols >= 1.
  CountSketch(int rows, size_t cols, uint64_t hash_seed);

  int rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t table_size() const { return static_cast<size_t>(rows_) * cols_; }

  // Column and sign of index i in row r.
  size_t Column(int row, uint64_t i) const;
  float Sign(int row, uint64_t i) const;

  // table (table_size() floats, row-major) += S(x).
  void Accumulate(std::span<const float> x, std::span<float> table) const;

  // The estimate of entry i (median over rows; the mean of the two middle values for an even
  // number of rows).
  float Estimate(std::span<const float> table, uint64_t i) const;
  // Estimates of entries [0, out.size()).
  void EstimateAll(std::span<const float> table, std::span<float> out) const;

  // The k entries below n with the largest estimated magnitude, with their estimates (heavy
  // hitters). `estimates` is scratch of n floats.
  void HeavyHitters(std::span<const float> table, size_t k, std::span<float> estimates,
                    sparse::TopKSelector& selector, sparse::SparseVector* out) const;

 private:
  uint64_t Hash(int row, uint64_t i) const;

  int rows_;
  size_t cols_;
  std::vector<uint64_t> row_seeds_;
};

}  // namespace frugal::sketch
