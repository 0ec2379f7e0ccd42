// The reduction kernels (kernels.cc, vectorised by the compiler) against one operation per
// element, for sizes around every vector width and buffers at every float offset: the vector
// body and the scalar remainder must give the bits of single float additions and products.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "collectives/internal.h"
#include "test_util.h"

namespace frugal {
namespace {

std::vector<float> Values(size_t n, uint64_t seed) {
  std::vector<float> v = testing::MakeInput(static_cast<int>(seed), n);
  const float specials[] = {
      0.0f, -0.0f, 1e-40f, -3e38f, 3e38f, 1e-8f, std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i < n; i += 5) v[i] = specials[(i / 5) % std::size(specials)];
  return v;
}

bool SameBits(const float* a, const float* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST(ReductionKernels, MatchOneOperationPerElementAtEverySizeAndOffset) {
  for (size_t n = 0; n <= 80; ++n) {
    for (size_t offset = 0; offset < 8; ++offset) {
      const std::vector<float> a = Values(n, n + 1);
      const std::vector<float> b = Values(n, n + 2);
      std::vector<float> want_sum(n), want_scaled(n);
      for (size_t i = 0; i < n; ++i) {
        volatile float sum = a[i] + b[i];  // one rounding per element, never vectorised
        want_sum[i] = sum;
        volatile float scaled = a[i] * 0.3f;
        want_scaled[i] = scaled;
      }
      std::vector<float> dst(n + 16), src(n + 16);
      std::copy(a.begin(), a.end(), dst.begin() + static_cast<std::ptrdiff_t>(offset));
      std::copy(b.begin(), b.end(), src.begin() + static_cast<std::ptrdiff_t>(7 - offset));
      coll::AddInto(dst.data() + offset, src.data() + 7 - offset, n);
      EXPECT_TRUE(SameBits(dst.data() + offset, want_sum.data(), n))
          << "AddInto n " << n << " offset " << offset;
      std::vector<float> x(n + 16);
      std::copy(a.begin(), a.end(), x.begin() + static_cast<std::ptrdiff_t>(offset));
      coll::ScaleInPlace(x.data() + offset, n, 0.3f);
      EXPECT_TRUE(SameBits(x.data() + offset, want_scaled.data(), n))
          << "ScaleInPlace n " << n << " offset " << offset;
      // Nothing outside the range is touched.
      for (size_t i = 0; i < offset; ++i) EXPECT_EQ(x[i], 0.0f);
      for (size_t i = offset + n; i < x.size(); ++i) EXPECT_EQ(x[i], 0.0f);
    }
  }
  for (size_t n : {1000, 4099, 100003}) {
    const std::vector<float> a = Values(n, 3), b = Values(n, 4);
    std::vector<float> dst = a;
    coll::AddInto(dst.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      volatile float sum = a[i] + b[i];
      const float want = sum;
      ASSERT_EQ(std::memcmp(&dst[i], &want, sizeof(float)), 0) << n << " " << i;
    }
  }
}

}  // namespace
}  // namespace frugal
