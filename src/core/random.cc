#include "frugal/random.h"

#include <cmath>
#include <numbers>

#include "frugal/hash.h"

namespace frugal {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t TensorId(std::string_view name) { return Fnv1a64(name); }

RngStream::RngStream(const RngKey& key) {
  // Mix the four key fields through SplitMix64 so that neighbouring keys give unrelated streams.
  uint64_t x = key.seed;
  uint64_t h = SplitMix64(x);
  x = h ^ static_cast<uint64_t>(key.rank);
  h = SplitMix64(x);
  x = h ^ key.step;
  h = SplitMix64(x);
  x = h ^ key.tensor;
  for (uint64_t& s : s_) s = SplitMix64(x);
}

uint64_t RngStream::NextU64() {
  uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

float RngStream::Uniform() { return static_cast<float>(NextU64() >> 40) * 0x1.0p-24f; }

double RngStream::UniformDouble() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

uint64_t RngStream::Below(uint64_t n) {
  // Lemire's nearly divisionless method.
  __uint128_t m = static_cast<__uint128_t>(NextU64()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    uint64_t threshold = -n % n;
    while (low < threshold) {
      m = static_cast<__uint128_t>(NextU64()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double RngStream::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = 0;
  while (u1 <= 0) u1 = UniformDouble();
  double u2 = UniformDouble();
  double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2 * std::numbers::pi * u2);
}

}  // namespace frugal
