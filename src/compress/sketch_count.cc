#include "compress/sketch_count.h"

#include <algorithm>

#include "frugal/check.h"
#include "frugal/random.h"

// Count sketch.
//
// Hash(row, i) mixes i with the row's 64-bit seed through the SplitMix64 finaliser; the low 32
// bits pick the column by Lemire's multiply-shift range reduction (Column) and the top bit picks
// the sign (Sign). Accumulate walks x once per row, adding Sign * x[i] into the Column cell of
// that row; the table is small next to x, so the scattered additions stay in cache.
// Estimate gathers the row-wise signed cells of i and takes their median by insertion sort
// (rows are few). HeavyHitters estimates every entry and keeps the k largest estimates with
// TopKSelector's exact selection.
namespace frugal::sketch {
namespace {

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr int kMaxRows = 64;

}  // namespace

CountSketch::CountSketch(int rows, size_t cols, uint64_t hash_seed) : rows_(rows), cols_(cols) {
  FRUGAL_CHECK(rows >= 1 && rows <= kMaxRows, "count sketch rows must be in [1, 64], got ", rows);
  FRUGAL_CHECK(cols >= 1 && cols <= UINT32_MAX, "count sketch cols out of range: ", cols);
  RngStream rng(RngKey{.seed = hash_seed, .rank = kAnyRank, .step = 0, .tensor = 0});
  for (int r = 0; r < rows; ++r) row_seeds_.push_back(rng.NextU64());
}

uint64_t CountSketch::Hash(int row, uint64_t i) const {
  return Mix(row_seeds_[static_cast<size_t>(row)] ^ (i * 0x9e3779b97f4a7c15ULL));
}

size_t CountSketch::Column(int row, uint64_t i) const {
  uint64_t h = Hash(row, i);
  return static_cast<size_t>(((h & 0xffffffffULL) * cols_) >> 32);
}

float CountSketch::Sign(int row, uint64_t i) const {
  return (Hash(row, i) >> 63) != 0 ? -1.0f : 1.0f;
}

void CountSketch::Accumulate(std::span<const float> x, std::span<float> table) const {
  FRUGAL_CHECK_EQ(table.size(), table_size(), "count sketch table size");
  for (int r = 0; r < rows_; ++r) {
    float* row = table.data() + static_cast<size_t>(r) * cols_;
    const uint64_t seed = row_seeds_[static_cast<size_t>(r)];
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] == 0.0f) continue;
      uint64_t h = Mix(seed ^ (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL));
      size_t col = static_cast<size_t>(((h & 0xffffffffULL) * cols_) >> 32);
      row[col] += (h >> 63) != 0 ? -x[i] : x[i];
    }
  }
}

float CountSketch::Estimate(std::span<const float> table, uint64_t i) const {
  FRUGAL_CHECK_EQ(table.size(), table_size(), "count sketch table size");
  float v[kMaxRows];
  for (int r = 0; r < rows_; ++r) {
    uint64_t h = Hash(r, i);
    size_t col = static_cast<size_t>(((h & 0xffffffffULL) * cols_) >> 32);
    float cell = table[static_cast<size_t>(r) * cols_ + col];
    v[r] = (h >> 63) != 0 ? -cell : cell;
  }
  for (int a = 1; a < rows_; ++a) {
    float key = v[a];
    int b = a - 1;
    while (b >= 0 && v[b] > key) {
      v[b + 1] = v[b];
      --b;
    }
    v[b + 1] = key;
  }
  if (rows_ % 2 == 1) return v[rows_ / 2];
  return 0.5f * (v[rows_ / 2 - 1] + v[rows_ / 2]);
}

void CountSketch::EstimateAll(std::span<const float> table, std::span<float> out) const {
  for (size_t i = 0; i < out.size(); ++i) out[i] = Estimate(table, i);
}

void CountSketch::HeavyHitters(std::span<const float> table, size_t k, std::span<float> estimates,
                               sparse::TopKSelector& selector, sparse::SparseVector* out) const {
  EstimateAll(table, estimates);
  selector.SelectExact(estimates, k, out);
}

}  // namespace frugal::sketch
