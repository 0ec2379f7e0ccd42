// Reproducible random streams keyed by (seed, rank, step, tensor).
//
// Every random decision in frugal draws from an RngStream made for exactly the key it depends on,
// so a run with a fixed seed repeats bit for bit, and streams that leave out the rank (kAnyRank)
// agree across ranks without communication (shared-seed compressors: random-k, PowerSGD's Q).
// The generator is xoshiro256** seeded by SplitMix64 of the key. Not thread safe per object;
// independent objects are independent.
#pragma once

#include <cstdint>
#include <string_view>

namespace frugal {

inline constexpr int64_t kAnyRank = -1;

struct RngKey {
  uint64_t seed = 0;
  int64_t rank = kAnyRank;
  uint64_t step = 0;
  uint64_t tensor = 0;  // TensorId(name) of the tensor, or any caller-chosen stream id
};

// Stable 64-bit id of a tensor name (FNV-1a), the same on every platform and run.
uint64_t TensorId(std::string_view name);

class RngStream {
 public:
  explicit RngStream(const RngKey& key);

  uint64_t NextU64();
  // Uniform in [0, 1) with 24 random bits (float) or 53 (double).
  float Uniform();
  double UniformDouble();
  // Uniform integer in [0, n), n > 0, without modulo bias.
  uint64_t Below(uint64_t n);
  // Standard normal (Box-Muller).
  double Normal();

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace frugal
