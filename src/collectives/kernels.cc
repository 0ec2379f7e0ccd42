// The reduction kernels: element-wise loops over non-aliasing pointers that the compiler turns
// into SIMD code (this file is compiled with -O3 in every build type). Element-wise addition does
// not reassociate anything, so the vector code gives the same bits as a scalar loop.
#include "collectives/internal.h"

namespace frugal::coll {

void AddInto(float* __restrict dst, const float* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

void AddTo(float* __restrict out, const float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void AddTwoInto(float* __restrict dst, const float* __restrict a, const float* __restrict b,
                size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = (dst[i] + a[i]) + b[i];
}

void ScaleInPlace(float* __restrict x, size_t n, float factor) {
  for (size_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace frugal::coll
