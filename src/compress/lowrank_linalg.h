// The linear algebra of PowerSGD (Vogels, Karimireddy and Jaggi 2019). Internal to
// frugal_compress.
//
// M is a rows x cols matrix stored row-major; a buffer of fewer than rows * cols elements stands
// for the matrix whose missing trailing elements are zero (a flat tensor viewed as a near-square
// matrix). P (rows x r) and Q (cols x r) are stored column by
// column: column c of P is P[c * rows, (c + 1) * rows). One power iteration is
//   P = M Q;  orthonormalise the columns of P;  Q = M^T P;  M ~ P Q^T.
// Dot products accumulate in double, so results do not depend on the length of the rows beyond
// float rounding of the stored values. Pure functions; thread safe.
#pragma once

#include <cstddef>
#include <span>

#include "frugal/random.h"

namespace frugal::lowrank {

// P = M Q. M: at most rows*cols, Q: cols*r, P: rows*r.
void MultiplyMQ(std::span<const float> m, size_t rows, size_t cols, std::span<const float> q, int r,
                std::span<float> p);

// Q = M^T P. M: at most rows*cols, P: rows*r, Q: cols*r.
void MultiplyMtP(std::span<const float> m, size_t rows, size_t cols, std::span<const float> p,
                 int r, std::span<float> q);

// Gram-Schmidt (with re-orthogonalisation) on the r columns (each `length` long) of `a`, in place:
// afterwards the columns are orthonormal, except that a column whose remaining norm is exactly zero
// (or not finite) after subtracting the previous ones becomes zero, as in PyTorch's PowerSGD hook.
void OrthonormalizeColumns(std::span<float> a, size_t length, int r);

// out (at most rows*cols, row-major, truncated like M) += scale * P Q^T.
void AddOuterProducts(std::span<const float> p, std::span<const float> q, size_t rows, size_t cols,
                      int r, float scale, std::span<float> out);

// Fills `a` with independent standard normal values from `rng`.
void FillNormal(std::span<float> a, RngStream& rng);

}  // namespace frugal::lowrank
