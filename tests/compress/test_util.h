// Helpers shared by the compression tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "frugal/compress_wire.h"
#include "frugal/compressor.h"
#include "frugal/random.h"

namespace frugal::testing_compress {

inline std::unique_ptr<Compressor> Make(const std::string& spec) {
  static_assert(true);
  CompressorRegistry registry = DefaultCompressorRegistry();
  auto made = registry.Create(spec);
  EXPECT_TRUE(made.ok()) << spec << ": " << made.status().ToString();
  if (!made.ok()) return nullptr;
  return std::move(made).value();
}

// Normal(0, scale) values, reproducible from `seed`.
inline std::vector<float> Gaussian(size_t n, uint64_t seed, float scale = 1.0f) {
  RngStream rng(RngKey{.seed = seed, .rank = 0, .step = 0, .tensor = 77});
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.Normal()) * scale;
  return v;
}

inline std::vector<std::byte> EncodeOrDie(const Compressor& c, std::span<const float> x,
                                          const TensorInfo& t, CompressContext& ctx) {
  std::vector<std::byte> out;
  Status s = c.Encode(x, t, ctx, out);
  EXPECT_TRUE(s.ok()) << c.spec() << ": " << s.ToString();
  return out;
}

inline std::vector<float> RoundTrip(const Compressor& c, std::span<const float> x,
                                    const TensorInfo& t, CompressContext& ctx) {
  std::vector<std::byte> payload = EncodeOrDie(c, x, t, ctx);
  std::vector<float> out(x.size(), 0.0f);
  Status s = c.Decode(payload, t, ctx, out);
  EXPECT_TRUE(s.ok()) << c.spec() << ": " << s.ToString();
  return out;
}

}  // namespace frugal::testing_compress
